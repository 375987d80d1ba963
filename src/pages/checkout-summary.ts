import type { CheckoutSession, Order } from '../commerce/model.js';
import { formatMoney } from '../kernel/money.js';
import { escapeHtml } from './page.js';

/** What every checkout page shows first: product, quantity × unit price (and interval), total. */
export function summary(session: CheckoutSession): string {
  const unit = formatMoney(session.pricing.amount, session.currency);
  const interval = session.pricing.pricingType === 'SUBSCRIPTION' && session.pricing.billingInterval
    ? ` every ${session.pricing.billingIntervalCount > 1 ? `${session.pricing.billingIntervalCount} ` : ''}${session.pricing.billingInterval.toLowerCase()}${session.pricing.billingIntervalCount > 1 ? 's' : ''}`
    : '';
  return `<h1 data-testid="product-name">${escapeHtml(session.product.name)}</h1>
${session.product.description ? `<div class="muted">${escapeHtml(session.product.description)}</div>` : ''}
<div class="muted" data-testid="quantity">${session.quantity} × ${escapeHtml(unit)}${escapeHtml(interval)}</div>
<div class="total"><span>Total</span><strong class="amount" data-testid="amount">${escapeHtml(formatMoney(session.amount, session.currency))}</strong></div>`;
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
