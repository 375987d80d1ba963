/** A product's prices: create (amount in the currency's units), deactivate, and a payment link per price (copy, open, shown at once); x402 paywalls. */
import { useState } from 'preact/hooks';
import { ConfirmButton } from '../../../components/confirm';
import { Badge, CopyButton, Empty, ErrorNotice, Loading, Money } from '../../../components/ui';
import { errorMessage } from '../../../shared/api';
import { parseMoney } from '../../../shared/format';
import { useAction } from '../../../shared/use-api';
import { useSession } from '../../../shared/session';
import { PricePaywalls } from './price-paywalls';
import { createPaymentLink, createPrice, deactivatePrice, usePrices } from '../use-catalog';

export function ProductPrices(props: { productId: string }) {
  const { can } = useSession();
  const prices = usePrices(props.productId);
  const [amount, setAmount] = useState('');
  const [currency, setCurrency] = useState('USD');
  const [type, setType] = useState<'ONE_TIME' | 'SUBSCRIPTION'>('ONE_TIME');
  const [interval, setInterval] = useState<'DAY' | 'MONTH' | 'YEAR'>('MONTH');
  const [link, setLink] = useState<string | undefined>();
  const create = useAction(createPrice);
  const makeLink = useAction(createPaymentLink);
  const crypto = currency === 'USDC' || currency === 'USDT';
  const minor = parseMoney(amount, currency);
  const writable = can('catalog:write');
  return (
    <section aria-labelledby="prices-title">
      <h2 id="prices-title">Prices</h2>
      {link && (
        <div class="secret" role="status">
          <div>
            Payment link:{' '}
            <a href={link} target="_blank" rel="noopener" data-testid="payment-link-url">
              {link}
            </a>
          </div>
          <CopyButton text={link} label="Copy link" />
        </div>
      )}
      <ErrorNotice message={prices.error ?? makeLink.error} retry={prices.reload} />
      {!prices.data && !prices.error && <Loading />}
      {prices.data && prices.data.length === 0 && <Empty>No prices yet.</Empty>}
      {prices.data && prices.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Price</th>
                <th scope="col">Type</th>
                <th scope="col">State</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {prices.data.map((p) => (
                <tr key={p.pricingId}>
                  <td>
                    <Money minor={p.amount} currency={p.currency} />
                    <div class="mono small">{p.pricingId}</div>
                  </td>
                  <td>{p.pricingType === 'SUBSCRIPTION' ? `every ${p.billingIntervalCount > 1 ? `${p.billingIntervalCount} ` : ''}${String(p.billingInterval).toLowerCase()}` : 'one-time'}</td>
                  <td>{p.active ? <Badge tone="good">Active</Badge> : <Badge tone="neutral">Inactive</Badge>}</td>
                  <td>
                    {writable && p.active && (
                      <>
                        <button
                          type="button"
                          onClick={async () => {
                            const created = await makeLink.run(p.pricingId);
                            if (created) setLink(created.paymentLinkUrl);
                          }}
                        >
                          Create payment link
                        </button>{' '}
                        <ConfirmButton
                          label="Deactivate"
                          title="Deactivate this price?"
                          danger
                          onConfirm={async () => {
                            const answer = await deactivatePrice(p.pricingId);
                            if (answer.error) return errorMessage(answer.error, answer.response);
                            prices.reload();
                          }}
                        >
                          <p>Checkouts and payment links with this price stop working. Subscriptions already running keep their price.</p>
                        </ConfirmButton>
                      </>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {can('x402:settle') && prices.data && <PricePaywalls productId={props.productId} prices={prices.data} />}
      {writable && (
        <form
          class="card"
          aria-labelledby="new-price-title"
          onSubmit={async (e) => {
            e.preventDefault();
            if (minor === undefined) return;
            const created = await create.run(props.productId, { amount: minor, currency, pricingType: crypto ? 'ONE_TIME' : type, ...(type === 'SUBSCRIPTION' && !crypto ? { billingInterval: interval } : {}), provider: crypto ? 'CRYPTO' : 'STRIPE' });
            if (created) {
              setAmount('');
              prices.reload();
            }
          }}
        >
          <h3 id="new-price-title">New price</h3>
          <div class="toolbar">
            <label>
              Amount
              <input inputMode="decimal" required value={amount} onInput={(e) => setAmount(e.currentTarget.value)} aria-invalid={amount !== '' && minor === undefined} />
            </label>
            <label>
              Currency
              <select value={currency} onChange={(e) => setCurrency(e.currentTarget.value)}>
                {['USD', 'EUR', 'GBP', 'USDC', 'USDT'].map((c) => (
                  <option key={c} value={c}>
                    {c}
                  </option>
                ))}
              </select>
            </label>
            <label>
              Type
              <select value={type} onChange={(e) => setType(e.currentTarget.value as typeof type)} disabled={crypto}>
                <option value="ONE_TIME">One-time</option>
                <option value="SUBSCRIPTION">Subscription</option>
              </select>
            </label>
            {type === 'SUBSCRIPTION' && !crypto && (
              <label>
                Every
                <select value={interval} onChange={(e) => setInterval(e.currentTarget.value as typeof interval)}>
                  <option value="DAY">day</option>
                  <option value="MONTH">month</option>
                  <option value="YEAR">year</option>
                </select>
              </label>
            )}
            <button type="submit" class="primary" disabled={create.pending || minor === undefined}>
              Add price
            </button>
          </div>
          <ErrorNotice message={create.error} />
        </form>
      )}
    </section>
  );
}
