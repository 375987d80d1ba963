import { presentOrderLine } from '../commerce/order.presenter.js';
import type { UsageEstimate } from '../commerce/usage-estimate.js';
import { iso } from '../kernel/present.js';

/** A customer's usage this period as the console and admin answers show it (console.yaml CustomerUsage). */
export const presentCustomerUsage = (u: { customerId: string; estimates: UsageEstimate[] }) => ({
  customerId: u.customerId,
  subscriptions: u.estimates.map((e) => ({
    subscriptionId: e.subscription.id,
    productName: e.subscription.productName,
    currency: e.subscription.currency,
    periodStart: iso(e.subscription.currentPeriodStart),
    periodEnd: iso(e.subscription.currentPeriodEnd),
    cancelAtPeriodEnd: e.subscription.cancelAtPeriodEnd,
    estimatedChargeAt: iso(e.estimatedChargeAt),
    lines: e.lines.map(presentOrderLine),
    estimatedTotalCents: e.total,
  })),
});
