/**
 * The estimated next charge of a metered subscription (issue 38 §9): what its renewal would charge
 * if the current period closed now — the next period's fee (none when it ends at the period end)
 * and one USAGE line per component over [currentPeriodStart, currentPeriodEnd) — priced by the
 * renewal's own function (pricePeriod: each line rounded once, half up). The console's customer
 * page, the admin API and the customer portal show it; the renewal order is the bill.
 */
import type { Order, Subscription } from './model.js';
import { USAGE_CLOSE_DELAY_MS, usageLineInputs, type MeteredBilling, type MeteredComponent } from './metered-billing.js';
import { renewalFeeInputs } from './order-lines.js';
import { pricePeriod, type LineInput, type PricedLine } from './pricing.js';

export interface UsageEstimate {
  subscription: Subscription;
  /** When the renewal job closes the period and charges it (the usage grace window after its end). */
  estimatedChargeAt: Date;
  lines: PricedLine[];
  total: number;
}

export async function estimateNextCharge(
  billing: MeteredBilling,
  s: Subscription,
  components: readonly MeteredComponent[],
  /** The subscription's first order: the renewal repeats its fee lines (order-lines.ts renewalFeeInputs). */
  initial: Pick<Order, 'lines'> | undefined,
  /** The period's USAGE lines when a plan change split it (metered-plan-change.ts); else read here. */
  splitUsage?: readonly LineInput[],
): Promise<UsageEstimate> {
  const usage = splitUsage ?? (await usageLineInputs(billing, s, components));
  const fee = s.cancelAtPeriodEnd ? [] : renewalFeeInputs(initial, s.productName, s.amountCents, { productId: s.productId, priceId: s.priceId });
  const priced = pricePeriod([...fee, ...usage]);
  return { subscription: s, estimatedChargeAt: new Date(s.currentPeriodEnd.getTime() + USAGE_CLOSE_DELAY_MS), lines: priced.lines, total: priced.total };
}
