/** Merchant read access to the catalog: `GET /v1/product…` and the deprecated `/v1/products…` aliases. */
import type { MerchantHandlers } from '../handler-maps.js';
import { iso, page } from '../kernel/present.js';
import type { ProductWithLinks, CatalogService } from './catalog.service.js';

type CatalogHandlers = Pick<MerchantHandlers, 'listProducts' | 'getProduct' | 'listProductsDeprecated' | 'getProductDeprecated'>;

export function createCatalogHandlers(catalog: CatalogService): CatalogHandlers {
  const presentProduct = ({ product, links }: ProductWithLinks) => ({
    id: product.id,
    productId: product.id,
    name: product.name,
    // The spec: omitted when unset (never null, never "").
    ...(product.description !== null ? { description: product.description } : {}),
    status: product.status,
    orgId: product.orgId,
    createdAt: iso(product.createdAt),
    updatedAt: iso(product.updatedAt),
    paymentLinks: links.map(({ link, price }) => ({
      paymentLinkId: link.id,
      amount: price.amount,
      createdAt: iso(link.createdAt),
      currency: price.currency,
      flexibleAmount: price.flexibleAmount,
      isActive: link.isActive,
      name: link.name,
      paymentLinkUrl: catalog.paymentLinkUrl(link),
      pricingId: price.id,
      pricingType: price.pricingType,
      provider: price.provider,
    })),
  });

  const listProducts: CatalogHandlers['listProducts'] = async ({ auth, query }) => {
    const pageNumber = query.page ?? 1;
    const size = query.size ?? 20;
    const { records, total } = await catalog.listProductsWithLinks(auth.orgId, {
      page: pageNumber,
      size,
      search: query.search,
      status: query.status ?? 'PUBLISHED',
    });
    return {
      status: 200,
      body: { success: true, message: 'Products retrieved', data: page(records.map(presentProduct), total, pageNumber, size) },
    };
  };

  const getProduct: CatalogHandlers['getProduct'] = async ({ auth, params }) => ({
    status: 200,
    body: { success: true, message: 'Product retrieved', data: presentProduct(await catalog.getProductWithLinks(auth.orgId, params.id)) },
  });

  // The deprecated aliases are the same handlers: identical query, response and errors.
  return { listProducts, getProduct, listProductsDeprecated: listProducts, getProductDeprecated: getProduct };
}
