import type { CheckoutSession } from '../commerce/model.js';
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
