import type { CheckoutSession, Order } from '../commerce/model.js';
import { formatMoney } from '../kernel/money.js';
import { escapeHtml } from './page.js';
import { sessionChargeInputs, sessionLines } from '../commerce/order-lines.js';
import { discountInputs } from '../commerce/discounts.js';
import { priceWithTax } from '../commerce/tax.js';
import { usageTermText } from './usage-terms.js';

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
 * What a subscription's periods charge after the checkout (issue 39), priced as the renewals price
 * them (src/commerce/renewal-order.ts): the seats at the unit amount, the checkout's coupon while
 * its duration covers the period, the session's tax on what remains. `discounted`: a period the
 * coupon covers; `full`: one after it; `covered`: how many charged periods the coupon covers (null:
 * every one); `taxName`: the tax the amounts include ("VAT 19%"), null when none is charged.
 */
function periodPricing(session: CheckoutSession): { discounted: number; full: number; covered: number | null; taxName: string | null } {
  const charges = sessionChargeInputs(session);
  const withDiscount = priceWithTax([...charges, ...discountInputs(session.pricing.discount, charges)], session.tax);
  const full = priceWithTax(charges, session.tax);
  const d = session.pricing.discount;
  const covered = !d ? 0 : d.duration === 'FOREVER' ? null : d.duration === 'ONCE' ? 1 : (d.durationInPeriods ?? 0);
  const taxLines = full.lines.filter((l) => l.kind === 'TAX' && (l.tax?.taxAmount ?? l.amount) > 0);
  const taxName = taxLines.length > 0 ? taxLines.map((l) => (l.tax ? `${l.tax.displayName} ${l.tax.percentage}%` : l.description)).join(' and ') : null;
  return { discounted: withDiscount.total, full: full.total, covered, taxName };
}

/**
 * A trial's first charge in words (issue 39): what the first period after the trial charges, as the
 * renewal prices it ("€38.08 (VAT 19% included)", "plus usage" for a metered price).
 */
export function firstChargeText(session: CheckoutSession): string {
  const { discounted, taxName } = periodPricing(session);
  return `${formatMoney(discounted, session.currency)}${taxName ? ` (${taxName} included)` : ''}${session.pricing.usage?.length ? ' plus usage' : ''}`;
}

/** "month", "3 months": one billing period in words. */
function periodWords(count: number, interval: string): string {
  return count > 1 ? `${count} ${interval}s` : interval;
}

/**
 * What the subscription charges after the checkout, in words: "then €38.08/month for 3 months,
 * then €47.60/month (VAT 19% included)" — the coupon's periods and the full price after them, the
 * tax the amounts include, "before tax" while the buyer's country is still to be chosen, and "plus
 * usage" for metered components. `first`: "then" after a trial, "Renews at" without one.
 */
function renewalTerms(session: CheckoutSession, options: { beforeTax?: boolean; afterTrial: boolean }): string {
  const { billingInterval, billingIntervalCount } = session.pricing;
  if (!billingInterval) return '';
  const interval = billingInterval.toLowerCase();
  const per = billingIntervalCount > 1 ? ` every ${billingIntervalCount} ${interval}s` : `/${interval}`;
  const money = (n: number) => formatMoney(n, session.currency);
  const { discounted, full, covered, taxName } = periodPricing(session);
  const usage = session.pricing.usage?.length ? ' plus usage' : '';
  const tax = options.beforeTax ? ' before tax' : taxName ? ` (${taxName} included)` : '';
  if (options.afterTrial) {
    // Periods the coupon covers, counted from the first charged one (period 1 after the trial).
    if (covered === null || covered === 0 || discounted === full) return `then ${money(discounted)}${per}${usage}${tax}`;
    const span = periodWords(covered * billingIntervalCount, interval);
    return `then ${money(discounted)}${per} for ${covered === 1 && billingIntervalCount === 1 ? `the first ${interval}` : span}, then ${money(full)}${per}${usage}${tax}`;
  }
  // Without a trial the checkout charges the first period; only a coupon that ends changes what follows.
  if (covered === null || covered === 0 || discounted === full) return '';
  const span = periodWords(covered * billingIntervalCount, interval);
  return `The discount covers ${covered === 1 && billingIntervalCount === 1 ? `the first ${interval}` : `the first ${span}`}; then ${money(full)}${per}${usage}${tax}.`;
}

/** The price's metered components (issue 38): one line each, what usage costs beyond the fee. */
function usageRows(session: CheckoutSession): string {
  const terms = session.pricing.usage;
  const { billingInterval, billingIntervalCount } = session.pricing;
  if (!terms?.length || !billingInterval) return '';
  const period = periodWords(billingIntervalCount, billingInterval.toLowerCase());
  return `<ul class="usage-terms muted" data-testid="usage-terms">${terms.map((t) => `<li>${escapeHtml(usageTermText(t, session.currency, period))}</li>`).join('')}</ul>`;
}

/**
 * What every checkout page shows first: product, quantity × unit price (and interval), the usage
 * charges of a metered price, total. With a free trial: "N days free, then <what the first period
 * charges>/<interval>" (the coupon's end and the tax included said) and a total due today of zero.
 * `beforeTax`: the buyer's country is still to be chosen (the tax step), so the amount is labelled
 * "Subtotal, before tax", not "Total". `appliedBalance` (issue 39): the customer's credit balance
 * this checkout draws, shown under the total as "Applied balance −X" and "Due today" (what the card
 * is charged), before the buyer confirms.
 */
export function summary(session: CheckoutSession, options: { beforeTax?: boolean; appliedBalance?: number } = {}): string {
  const unit = formatMoney(session.pricing.amount, session.currency);
  const { billingInterval, billingIntervalCount } = session.pricing;
  const subscription = session.pricing.pricingType === 'SUBSCRIPTION' && billingInterval;
  const interval = subscription
    ? ` every ${billingIntervalCount > 1 ? `${billingIntervalCount} ` : ''}${billingInterval.toLowerCase()}${billingIntervalCount > 1 ? 's' : ''}`
    : '';
  const days = trialDaysOf(session);
  const trial = days > 0
    ? `<div class="ok" data-testid="trial">${days} day${days === 1 ? '' : 's'} free, ${escapeHtml(renewalTerms(session, { beforeTax: options.beforeTax, afterTrial: true }))}</div>`
    : '';
  const renews = subscription && days === 0 ? renewalTerms(session, { beforeTax: options.beforeTax, afterTrial: false }) : '';
  const total = days > 0
    ? `<div class="total"><span>Due today</span><strong class="amount" data-testid="amount">${escapeHtml(formatMoney(0, session.currency))}</strong></div>`
    : options.beforeTax
      ? // Before the buyer's country is known (the tax step): the amount is not the total yet.
        `<div class="total"><span>Subtotal, before tax</span><strong class="amount" data-testid="amount">${escapeHtml(formatMoney(session.amount, session.currency))}</strong></div><p class="muted" data-testid="tax-pending">Tax is calculated after you choose your country.</p>`
      : options.appliedBalance && options.appliedBalance > 0
        ? // The customer's balance pays part (or all) of it: the total, the balance applied, what the card pays.
          `<div class="total"><span>Total</span><span data-testid="total">${escapeHtml(formatMoney(session.amount, session.currency))}</span></div><div class="total" data-testid="applied-balance"><span>Applied balance</span><span>${escapeHtml(formatMoney(-options.appliedBalance, session.currency))}</span></div><div class="total"><span>Due today</span><strong class="amount" data-testid="amount">${escapeHtml(formatMoney(session.amount - options.appliedBalance, session.currency))}</strong></div>`
        : `<div class="total"><span>Total</span><strong class="amount" data-testid="amount">${escapeHtml(formatMoney(session.amount, session.currency))}</strong></div>`;
  return `<h1 data-testid="product-name">${escapeHtml(session.product.name)}</h1>
${session.product.description ? `<div class="muted">${escapeHtml(session.product.description)}</div>` : ''}
<div class="muted" data-testid="quantity">${session.quantity} × ${escapeHtml(unit)}${escapeHtml(interval)}</div>
${usageRows(session)}${discountSummary(session)}${trial}${days > 0 ? '' : taxRows(session)}${total}${renews ? `<p class="muted" data-testid="renewal-terms">${escapeHtml(renews)}</p>` : ''}`;
}

/**
 * What a paid page shows under its "payment received": whom the buyer paid, the order id to quote
 * to the merchant, the merchant's own reference when it set one, and the way back to its site.
 */
export function receipt(session: CheckoutSession, order: Pick<Order, 'id' | 'merchantReference'>, merchant: string, options: { trial?: boolean } = {}): string {
  const reference = order.merchantReference ?? session.merchantReference;
  const back = session.successUrl
    ? `<p class="note"><a data-testid="return" href="${escapeHtml(session.successUrl)}">Return to ${escapeHtml(merchant)}</a></p>`
    : '';
  return `<dl class="receipt" data-testid="receipt"><dt>${options.trial ? 'Subscribed with' : 'Paid to'}</dt><dd>${escapeHtml(merchant)}</dd><dt>Order</dt><dd><code data-testid="order-id">${escapeHtml(order.id)}</code></dd>${
    reference ? `<dt>Reference</dt><dd data-testid="merchant-reference">${escapeHtml(reference)}</dd>` : ''
  }</dl>${back}`;
}
