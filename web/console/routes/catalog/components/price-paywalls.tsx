/**
 * x402 paywalls on a product's prices: which one-time USD/USDC prices are sold to agents at Kassa's
 * own x402 URL, set (a signed receipt, or a redirect to the merchant's content) or removed.
 */
import { ConfirmButton } from '../../../components/confirm';
import { Badge, CopyButton, ErrorNotice, Loading } from '../../../components/ui';
import { priceLabels, type LabeledPrice } from '../../../shared/price-label';
import { errorMessage } from '../../../shared/api';
import { useKeyedForms } from '../../../shared/use-keyed-forms';
import { removePaywall, setPaywall, usePaywalls } from '../use-catalog';

interface PriceRow extends LabeledPrice {
  active: boolean;
}

export function PricePaywalls(props: { productId: string; productName?: string; prices: PriceRow[] }) {
  const paywalls = usePaywalls(props.productId, true);
  const forms = useKeyedForms<string>();
  const eligible = props.prices.filter((p) => p.active && p.pricingType === 'ONE_TIME' && !p.flexibleAmount && (p.currency === 'USD' || p.currency === 'USDC'));
  const byPrice = new Map((paywalls.data ?? []).map((w) => [w.pricingId, w]));
  const labels = priceLabels(eligible, { productName: props.productName });
  return (
    <section aria-labelledby="paywalls-title">
      <h2 id="paywalls-title">x402 paywalls</h2>
      <p class="muted small">
        Sell a one-time USD or USDC price to AI agents per request at Kassa's own x402 URL, with no code: an unpaid request gets <code>402</code> and the terms, a paid one a signed receipt or a redirect to your
        content. Payments go to your receiving wallets (Settings → Organization).
      </p>
      <ErrorNotice message={paywalls.error} retry={paywalls.reload} />
      {!paywalls.data && !paywalls.error && <Loading />}
      {paywalls.data && eligible.length === 0 && <p class="small">No active one-time USD or USDC price to sell this way.</p>}
      {paywalls.data &&
        eligible.map((p) => {
          const wall = byPrice.get(p.pricingId);
          const id = `paywall-${p.pricingId}`;
          const value = forms.value(p.pricingId, wall?.contentUrl ?? '');
          const error = forms.error(p.pricingId);
          return (
            <form
              key={p.pricingId}
              class="card"
              aria-label={`x402 paywall of ${p.pricingId}`}
              onSubmit={async (e) => {
                e.preventDefault();
                if (await forms.submit(p.pricingId, () => setPaywall(p.pricingId, value))) paywalls.reload();
              }}
            >
              <p>
                <span data-testid="paywall-price">{labels.get(p.pricingId)}</span> <span class="mono small">{p.pricingId}</span> {wall ? <Badge tone="good">Paywall on</Badge> : <Badge tone="neutral">No paywall</Badge>}
              </p>
              {wall && (
                <div class="secret">
                  <div>
                    x402 URL: <code data-testid="paywall-url">{wall.url}</code>
                  </div>
                  <CopyButton text={wall.url} label="Copy x402 URL" />
                </div>
              )}
              <label for={id}>After payment, redirect to (optional; empty: a signed receipt)</label>
              <div class="inline-form">
                <input
                  id={id}
                  type="url"
                  placeholder="https://shop.example.com/reports/latest"
                  value={value}
                  aria-invalid={error ? true : undefined}
                  aria-describedby={error ? `${id}-error` : undefined}
                  onInput={(e) => forms.input(p.pricingId, e.currentTarget.value)}
                />
                <button type="submit" class="primary" disabled={forms.pending(p.pricingId)}>
                  {wall ? 'Save paywall' : 'Sell with x402'}
                  <span class="visually-hidden"> {p.pricingId}</span>
                </button>
                {wall && (
                  <ConfirmButton
                    label={`Remove paywall ${p.pricingId}`}
                    title={`Remove the x402 paywall of ${p.pricingId}?`}
                    confirmLabel="Remove paywall"
                    danger
                    onConfirm={async () => {
                      const answer = await removePaywall(p.pricingId);
                      if (answer.error) return errorMessage(answer.error, answer.response);
                      forms.forget(p.pricingId);
                      paywalls.reload();
                    }}
                  >
                    <p>Its x402 URL answers 404 from now on; orders it recorded stay.</p>
                  </ConfirmButton>
                )}
              </div>
              {error && (
                <p id={`${id}-error`} class="field-error" role="alert">
                  {error}
                </p>
              )}
            </form>
          );
        })}
    </section>
  );
}
