/** Catalog: products (create, archive; each with its prices and payment links) and the payment links. */
import { useState } from 'preact/hooks';
import { useLocation, useRoute } from 'preact-iso';
import { ConfirmButton } from '../../components/confirm';
import { Tabs } from '../../components/tabs';
import { Badge, CopyButton, Empty, ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { errorMessage } from '../../shared/api';
import { filtersToQuery } from '../../shared/format';
import { useAction } from '../../shared/use-api';
import { useSession } from '../../shared/session';
import { ProductPrices } from './components/product-prices';
import { priceLabel } from '../../shared/price-label';
import { CouponsSection } from './components/coupons';
import { archiveProduct, createProduct, deactivatePaymentLink, usePaymentLinks, useProducts } from './use-catalog';

const TABS = [
  { href: '/console/catalog', label: 'Products' },
  { href: '/console/catalog/payment-links', label: 'Payment links' },
  { href: '/console/catalog/coupons', label: 'Coupons' },
];

export function CatalogPage() {
  const { path } = useLocation();
  const { params } = useRoute();
  const productId = /^products\/(PRD_[^/]+)$/.exec(params.rest ?? '')?.[1] ?? /^\/console\/catalog\/products\/(PRD_[^/]+)$/.exec(path)?.[1];
  return (
    <>
      <PageHeader title="Catalog" />
      <Tabs label="Catalog" tabs={TABS} />
      {productId ? <ProductSection id={productId} /> : path === '/console/catalog/payment-links' ? <PaymentLinksSection /> : path === '/console/catalog/coupons' ? <CouponsSection /> : <ProductsSection />}
    </>
  );
}

function ProductsSection() {
  const { query, route } = useLocation();
  const { can } = useSession();
  const products = useProducts(query.search);
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const create = useAction(createProduct);
  return (
    <section aria-labelledby="products-title">
      <h2 id="products-title">Products</h2>
      <form
        class="toolbar"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          route(`/console/catalog${filtersToQuery({ search: String(new FormData(e.currentTarget).get('search') ?? '') })}`);
        }}
      >
        <label>
          Name contains
          <input name="search" type="search" defaultValue={query.search ?? ''} />
        </label>
        <button type="submit">Search</button>
      </form>
      <ErrorNotice message={products.error} retry={products.reload} />
      {!products.data && !products.error && <Loading />}
      {products.data && products.data.records.length === 0 && <Empty>No products yet.</Empty>}
      {products.data && products.data.records.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Product</th>
                <th scope="col">State</th>
              </tr>
            </thead>
            <tbody>
              {products.data.records.map((p) => (
                <tr key={p.productId}>
                  <td>
                    <a href={`/console/catalog/products/${p.productId}`}>{p.name}</a>
                    <div class="mono small">{p.productId}</div>
                  </td>
                  <td>
                    <Badge tone={p.status === 'PUBLISHED' ? 'good' : 'neutral'}>{p.status.toLowerCase()}</Badge>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {can('catalog:write') && (
        <form
          class="card"
          aria-labelledby="new-product-title"
          onSubmit={async (e) => {
            e.preventDefault();
            const created = await create.run(name, description);
            if (created) route(`/console/catalog/products/${created.productId}`);
          }}
        >
          <h3 id="new-product-title">New product</h3>
          <label for="product-name">Name</label>
          <input id="product-name" required maxLength={255} value={name} onInput={(e) => setName(e.currentTarget.value)} />
          <label for="product-description">Description (optional)</label>
          <textarea id="product-description" maxLength={5000} rows={3} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
          <ErrorNotice message={create.error} />
          <button type="submit" class="primary" disabled={create.pending}>
            Create product
          </button>
        </form>
      )}
    </section>
  );
}

function ProductSection(props: { id: string }) {
  const { can } = useSession();
  const products = useProducts(undefined);
  const product = products.data?.records.find((p) => p.productId === props.id);
  return (
    <section aria-labelledby="product-title">
      <p>
        <a href="/console/catalog">← Products</a>
      </p>
      <h2 id="product-title">{product?.name ?? props.id}</h2>
      {product?.description && <p>{product.description}</p>}
      {product && can('catalog:write') && product.status !== 'ARCHIVED' && (
        <ConfirmButton
          label="Archive product"
          title={`Archive ${product.name}?`}
          danger
          onConfirm={async () => {
            const answer = await archiveProduct(product.productId);
            if (answer.error) return errorMessage(answer.error, answer.response);
            products.reload();
          }}
        >
          <p>It can no longer be bought; past orders and running subscriptions stay.</p>
        </ConfirmButton>
      )}
      <ProductPrices productId={props.id} productName={product?.name} />
    </section>
  );
}

function PaymentLinksSection() {
  const { can } = useSession();
  const links = usePaymentLinks();
  return (
    <section aria-labelledby="links-title">
      <h2 id="links-title">Payment links</h2>
      <ErrorNotice message={links.error} retry={links.reload} />
      {!links.data && !links.error && <Loading />}
      {links.data && links.data.records.length === 0 && <Empty>No payment links yet: create one on a product's price.</Empty>}
      {links.data && links.data.records.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Link</th>
                <th scope="col" class="num">
                  Price
                </th>
                <th scope="col">State</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {links.data.records.map((l) => (
                <tr key={l.paymentLinkId}>
                  <td class="break-words">
                    {l.name}
                    {l.productName && l.productName !== l.name && <div class="muted small">{l.productName}</div>}
                    <div>
                      <code class="id" title={l.paymentLinkUrl} data-field="payment-link-url">
                        {l.paymentLinkUrl}
                      </code>
                    </div>
                  </td>
                  <td class="num" data-testid="link-price">
                    {/* The price by its name and terms, so links to two prices of one product read apart. */}
                    {priceLabel(l, { productName: l.productName })}
                  </td>
                  <td>{l.isActive ? <Badge tone="good">Active</Badge> : <Badge tone="neutral">Inactive</Badge>}</td>
                  <td>
                    {l.isActive && (
                      <>
                        <a class="button" href={l.paymentLinkUrl} target="_blank" rel="noopener">
                          Open<span class="visually-hidden"> {l.name} (new tab)</span>
                        </a>{' '}
                        <CopyButton text={l.paymentLinkUrl} label="Copy link" />{' '}
                        {can('catalog:write') && (
                          <ConfirmButton
                            label="Deactivate"
                            title={`Deactivate ${l.name}?`}
                            danger
                            onConfirm={async () => {
                              const answer = await deactivatePaymentLink(l.paymentLinkId);
                              if (answer.error) return errorMessage(answer.error, answer.response);
                              links.reload();
                            }}
                          >
                            <p>The link stops taking payments at once.</p>
                          </ConfirmButton>
                        )}
                      </>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
