import { presentMeterBalance, type MeterBalance } from '../commerce/meter-balances.js';
import { presentOrderLine } from '../commerce/order.presenter.js';
import type { UsageEstimate } from '../commerce/usage-estimate.js';
import { iso } from '../kernel/present.js';

/** A customer's balances per meter (src/commerce/meter-balances.ts), read for the usage answers. */
export interface CustomerBalances {
  forCustomer(orgId: string, customerId: string): Promise<MeterBalance[]>;
}

/** A customer's usage this period and balances, as the console and admin answers show it (console.yaml CustomerUsage). */
export const presentCustomerUsage = (u: { customerId: string; estimates: UsageEstimate[] }, balances: readonly MeterBalance[]) => ({
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
  balances: balances.map(presentMeterBalance),
});

/** The usage answer of a customer: the estimates, then the balances of the customer found (none without metering). */
export async function customerUsageOf(subscriptions: { usageThisPeriod(orgId: string, customerRef: string): Promise<{ customerId: string; estimates: UsageEstimate[] }> }, balances: CustomerBalances | undefined, orgId: string, customerRef: string) {
  const usage = await subscriptions.usageThisPeriod(orgId, customerRef);
  return presentCustomerUsage(usage, balances ? await balances.forCustomer(orgId, usage.customerId) : []);
}
