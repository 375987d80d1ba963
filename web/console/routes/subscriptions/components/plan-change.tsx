/**
 * Change a subscription's price or seats (issue 39), with the proration preview: the merchant API's
 * previewSubscriptionChange / changeSubscription (the session cookie; `subscriptions:manage` to
 * confirm). The confirmation sends the preview's `prorationDate` and `amountDueCents`, so what is
 * charged is what was shown, or nothing (409: preview again).
 */
import { useEffect, useState } from 'preact/hooks';
import type { components } from '../../../../../generated/merchant';
import type { components as ConsoleComponents } from '../../../../../generated/console';
import { Money } from '../../../components/ui';
import { formatMoney } from '../../../shared/format';
import { distinctLabels, priceLabel, priceName } from '../../../shared/price-label';
import { every } from './subscriptions-table';
import { consoleApi, errorMessage, merchantApi } from '../../../shared/api';
import type { Subscription } from '../use-subscriptions';

type Preview = components['schemas']['SubscriptionChangePreview'];
type Price = ConsoleComponents['schemas']['Price'];
interface Choice {
  pricingId: string;
  label: string;
  /** The product and the price's own name when it has one ("Pro plan — Yearly"): what the preview calls it. */
  name: string;
}

/** The organization's prices this subscription may move to (same currency and interval, active, card subscription). */
function useChoices(s: Subscription): Choice[] {
  const [choices, setChoices] = useState<Choice[]>([]);
  useEffect(() => {
    let live = true;
    void (async () => {
      const products = (await consoleApi.GET('/v1/console/products', { params: { query: { size: 50 } } })).data?.data?.records ?? [];
      const eligible: Array<{ price: Price; productName: string }> = [];
      // The products' prices read side by side (one after the other took over a second for a few products).
      const lists = await Promise.all(products.map(async (product) => ({ product, prices: (await consoleApi.GET('/v1/console/products/{id}/prices', { params: { path: { id: product.productId } } })).data?.data ?? [] })));
      for (const { product, prices } of lists) {
        for (const p of prices) {
          if (!p.active || p.pricingType !== 'SUBSCRIPTION' || p.provider !== 'STRIPE' || p.flexibleAmount) continue;
          if (p.currency !== s.currency || p.billingInterval !== s.billingInterval || p.billingIntervalCount !== s.billingIntervalCount) continue;
          eligible.push({ price: p, productName: product.name });
        }
      }
      // Two metered prices differ by their meters: named when the session may read them (else their ids).
      const meters = eligible.some((e) => (e.price.meteredComponents ?? []).length > 0) ? ((await merchantApi.GET('/v1/meters', { params: { query: { status: 'ACTIVE' } } })).data?.data.records ?? []) : [];
      const meterName = (id: string) => meters.find((m) => m.id === id)?.name ?? id;
      // The product, the price's own name (two prices of one product: "Monthly", "With tokens"), per seat
      // and per interval: "Team plan — $20.00 per seat / month" (shared/price-label.ts).
      const out = eligible.map((e) => ({ id: e.price.pricingId, label: priceLabel(e.price, { productName: e.productName, withProduct: true, perSeat: true, meterName }) }));
      const labels = distinctLabels(out);
      const names = new Map(eligible.map((e) => [e.price.pricingId, priceName(e.price, { productName: e.productName, withProduct: true })]));
      if (live) setChoices(out.map((c) => ({ pricingId: c.id, label: `${labels.get(c.id)!}${c.id === s.priceId ? ' (current)' : ''}`, name: names.get(c.id) || '' })));
    })();
    return () => {
      live = false;
    };
  }, [s.subscriptionId]);
  return choices;
}

export function PlanChange(props: { subscription: Subscription; onChanged(): void }) {
  const s = props.subscription;
  const choices = useChoices(s);
  const [priceId, setPriceId] = useState(s.priceId ?? '');
  const [quantity, setQuantity] = useState(String(s.quantity ?? 1));
  const [preview, setPreview] = useState<Preview>();
  const [error, setError] = useState<string>();
  const [done, setDone] = useState<string>();
  if (s.status !== 'ACTIVE') return null;
  const fallback = s.priceId && !choices.some((c) => c.pricingId === s.priceId) ? `${s.productName} (current)` : undefined;
  const shown = choices.find((c) => c.pricingId === priceId)?.label ?? (priceId === s.priceId ? fallback : undefined);
  const nameOf = (side: Preview['from']) => choices.find((c) => c.pricingId === side.priceId)?.name || side.productName;
  const body = () => ({ ...(priceId && priceId !== s.priceId ? { priceId } : {}), ...(Number(quantity) !== s.quantity ? { quantity: Number(quantity) } : {}) });
  const ask = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setDone(undefined);
    const answer = await merchantApi.POST('/v1/subscriptions/{id}/change/preview', { params: { path: { id: s.subscriptionId } }, body: body() });
    if (answer.error || !answer.data) return setError(errorMessage(answer.error, answer.response));
    setPreview(answer.data.data);
  };
  const confirm = async () => {
    if (!preview) return;
    const answer = await merchantApi.POST('/v1/subscriptions/{id}/change', { params: { path: { id: s.subscriptionId } }, body: { ...body(), prorationDate: preview.prorationDate, expectedAmountDueCents: preview.amountDueCents } });
    setPreview(undefined);
    if (answer.error || !answer.data) return setError(errorMessage(answer.error, answer.response));
    const charged = answer.data.data.preview;
    setDone(charged.effective === 'PERIOD_END' ? 'The change is scheduled for the end of the period.' : `The subscription was changed${charged.amountDueCents > 0 ? `; ${formatMoney(charged.amountDueCents, charged.currency)} was charged` : ''}.`);
    props.onChanged();
  };
  return (
    <div class="card">
      <h2 id="plan-change-heading">Change plan or seats</h2>
      <form onSubmit={ask} aria-labelledby="plan-change-heading">
        <label>
          Price
          {/* A native select cannot wrap its closed text ("… per seat every month" was cut off at 390 px):
              the chosen option is drawn, wrapped, by the aria-hidden box under it, and the select itself,
              transparent, covers that box. Keyboard, mouse, type-ahead and screen readers still use the select. */}
          <span class="wrapping-select">
            <span class="wrapping-select-shown" aria-hidden="true" data-testid="price-shown">
              {shown || '\u00a0'}
            </span>
            <select value={priceId} onChange={(e) => setPriceId((e.target as HTMLSelectElement).value)}>
              {fallback && <option value={s.priceId!}>{fallback}</option>}
              {choices.map((c) => (
                <option value={c.pricingId}>{c.label}</option>
              ))}
            </select>
          </span>
        </label>
        <label>
          Seats
          <input type="number" min={1} max={10000} step={1} required value={quantity} onInput={(e) => setQuantity((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit">Preview the change</button>
      </form>
      {error && (
        <div class="notice error" role="alert">
          <p>{error}</p>
        </div>
      )}
      {done && (
        <p class="notice" role="status">
          {done}
        </p>
      )}
      {preview && (
        <section aria-label="Preview of the change" class="notice">
          <p data-testid="change-summary">
            From {preview.from.quantity} × {nameOf(preview.from)}, <Money minor={preview.from.amountCents} currency={preview.currency} /> {every(s)}
            <br />
            to {preview.to.quantity} × {nameOf(preview.to)}, <Money minor={preview.to.amountCents} currency={preview.currency} /> {every(s)}
          </p>
          {preview.effective === 'PERIOD_END' ? (
            <p>Takes effect at the end of the period; nothing is charged now. The next renewal charges <Money minor={preview.nextRenewalAmountCents} currency={preview.currency} />.</p>
          ) : (
            <>
              <table>
                <caption>Charged now</caption>
                <thead>
                  <tr>
                    <th scope="col">Line</th>
                    <th scope="col" class="num">Amount</th>
                  </tr>
                </thead>
                <tbody>
                  {preview.lines.map((l) => (
                    <tr>
                      <td>{l.description}</td>
                      <td class="num"><Money minor={l.amountCents} currency={preview.currency} /></td>
                    </tr>
                  ))}
                </tbody>
                <tfoot>
                  <tr>
                    <th scope="row">Total due now</th>
                    <td class="num"><strong><Money minor={preview.amountDueCents} currency={preview.currency} /></strong></td>
                  </tr>
                </tfoot>
              </table>
              <p>Then <Money minor={preview.nextRenewalAmountCents} currency={preview.currency} /> at each renewal.</p>
            </>
          )}
          <button type="button" onClick={confirm}>
            {preview.amountDueCents > 0 ? `Confirm and charge ${formatMoney(preview.amountDueCents, preview.currency)}` : 'Confirm the change'}
          </button>
        </section>
      )}
    </div>
  );
}
