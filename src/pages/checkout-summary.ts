import type { CheckoutSession, Order } from '../commerce/model.js';
import { formatMoney } from '../kernel/money.js';
import { escapeHtml } from './page.js';
import { sessionLines } from '../commerce/order-lines.js';

/** The session's DISCOUNT line (issue 39), as the order will carry it: "Promotion code X (20% off) −2.00". */
function discountSummary(session: CheckoutSession): string {
  if (!session.pricing.discount) return '';
  const line = sessionLines(session).lines.find((l) => l.kind === 'DISCOUNT');
  const amount = line ? formatMoney(line.amount, session.currency) : formatMoney(0, session.currency);
  return `<div class="total" data-testid="discount"><span>${escapeHtml(line?.description ?? session.pricing.discount.name)}</span><span>${escapeHtml(amount)}</span></div>`;
}

/** A taxed session's subtotal and TAX lines above its total (issue 39): exclusive tax added, inclusive tax shown as included. */
function taxRows(session: CheckoutSession): string {
  if (!session.tax) return '';
  const { lines } = sessionLines(session);
  const taxLines = lines.filter((l) => l.kind === 'TAX');
  if (taxLines.length === 0) return '';
  const subtotal = lines.filter((l) => l.kind !== 'TAX' && l.kind !== 'CREDIT').reduce((s, l) => s + l.amount, 0);
  const rows = taxLines
    .map((l) => `<div class="line"><span>${escapeHtml(l.description)}</span><span>${escapeHtml(formatMoney(l.tax?.taxAmount ?? l.amount, session.currency))}</span></div>`)
    .join('');
  return `<div class="tax-lines" data-testid="tax-lines"><div class="line"><span>Subtotal</span><span>${escapeHtml(formatMoney(subtotal, session.currency))}</span></div>${rows}</div>`;
}

/** The session's free trial days (issue 39); 0 without one. */
export const trialDaysOf = (session: CheckoutSession): number => (session.pricing.pricingType === 'SUBSCRIPTION' ? (session.pricing.trialDays ?? 0) : 0);

/**
 * What every checkout page shows first: product, quantity × unit price (and interval), total. With
 * a free trial: "N days free, then <total>/<interval>" and a total due today of zero. `beforeTax`:
 * the buyer's country is still to be chosen (the tax step), so the amount is labelled
 * "Subtotal, before tax", not "Total".
 */
export function summary(session: CheckoutSession, options: { beforeTax?: boolean } = {}): string {
  const unit = formatMoney(session.pricing.amount, session.currency);
  const { billingInterval, billingIntervalCount } = session.pricing;
  const subscription = session.pricing.pricingType === 'SUBSCRIPTION' && billingInterval;
  const interval = subscription
    ? ` every ${billingIntervalCount > 1 ? `${billingIntervalCount} ` : ''}${billingInterval.toLowerCase()}${billingIntervalCount > 1 ? 's' : ''}`
    : '';
  const days = trialDaysOf(session);
  const per = subscription ? (billingIntervalCount > 1 ? ` every ${billingIntervalCount} ${billingInterval.toLowerCase()}s` : `/${billingInterval.toLowerCase()}`) : '';
  const trial = days > 0
    ? `<div class="ok" data-testid="trial">${days} day${days === 1 ? '' : 's'} free, then ${escapeHtml(formatMoney(session.amount, session.currency))}${escapeHtml(per)}</div>`
    : '';
  const total = days > 0
    ? `<div class="total"><span>Due today</span><strong class="amount" data-testid="amount">${escapeHtml(formatMoney(0, session.currency))}</strong></div>`
    : options.beforeTax
      ? // Before the buyer's country is known (the tax step): the amount is not the total yet.
        `<div class="total"><span>Subtotal, before tax</span><strong class="amount" data-testid="amount">${escapeHtml(formatMoney(session.amount, session.currency))}</strong></div><p class="muted" data-testid="tax-pending">Tax is calculated after you choose your country.</p>`
      : `<div class="total"><span>Total</span><strong class="amount" data-testid="amount">${escapeHtml(formatMoney(session.amount, session.currency))}</strong></div>`;
  return `<h1 data-testid="product-name">${escapeHtml(session.product.name)}</h1>
${session.product.description ? `<div class="muted">${escapeHtml(session.product.description)}</div>` : ''}
<div class="muted" data-testid="quantity">${session.quantity} × ${escapeHtml(unit)}${escapeHtml(interval)}</div>
${discountSummary(session)}${trial}${days > 0 ? '' : taxRows(session)}${total}`;
}

/**
 * What a paid page shows under its "payment received": whom the buyer paid, the order id to quote
 * to the merchant, the merchant's own reference when it set one, and the way back to its site.
 */
export function receipt(session: CheckoutSession, order: Pick<Order, 'id' | 'merchantReference'>, merchant: string): string {
  const reference = order.merchantReference ?? session.merchantReference;
  const back = session.successUrl
    ? `<p class="note"><a data-testid="return" href="${escapeHtml(session.successUrl)}">Return to ${escapeHtml(merchant)}</a></p>`
    : '';
  return `<dl class="receipt" data-testid="receipt"><dt>Paid to</dt><dd>${escapeHtml(merchant)}</dd><dt>Order</dt><dd><code data-testid="order-id">${escapeHtml(order.id)}</code></dd>${
    reference ? `<dt>Reference</dt><dd data-testid="merchant-reference">${escapeHtml(reference)}</dd>` : ''
  }</dl>${back}`;
}
