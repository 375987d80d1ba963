/**
 * The estimated next charge of a metered subscription (issue 38 §9): what its renewal would charge
 * if the current period closed now — the next period's fee (none when it ends at the period end)
 * and one USAGE line per component over [currentPeriodStart, currentPeriodEnd) — priced by the
 * renewal's own function (renewalOrder: the fee at the subscription's seats, the checkout's coupon
 * while it covers the next period, the first order's tax; each line rounded once, half up). The
 * console's customer page, the admin API and the customer portal show it; the renewal order is the
 * bill. Prepaid credit and the customer's credit balance are not drawn (the close draws them).
 */
import type { Subscription } from './model.js';
import type { CommerceStores } from './stores.js';
import { USAGE_CLOSE_DELAY_MS, usageLineInputs, type MeteredBilling, type MeteredComponent } from './metered-billing.js';
import { renewalOrder } from './renewal-order.js';
import type { LineInput, PricedLine } from './pricing.js';

export interface UsageEstimate {
  subscription: Subscription;
  /** When the renewal job closes the period and charges it (the usage grace window after its end). */
  estimatedChargeAt: Date;
  lines: PricedLine[];
  total: number;
}

export async function estimateNextCharge(
  billing: MeteredBilling,
  /** Read only: the first order (the fee lines and tax the renewal repeats) and the checkout's coupon. */
  stores: CommerceStores,
  s: Subscription,
  components: readonly MeteredComponent[],
  /** The period's USAGE lines when a plan change split it (metered-plan-change.ts); else read here. */
  splitUsage?: readonly LineInput[],
): Promise<UsageEstimate> {
  const usage = splitUsage ?? (await usageLineInputs(billing, s, components));
  const estimatedChargeAt = new Date(s.currentPeriodEnd.getTime() + USAGE_CLOSE_DELAY_MS);
  // Before, the fee was one line of the stored amount (exclusive tax folded in) and the coupon was
  // left out, so a taxed or discounted subscription's estimate was not what its renewal charged.
  const order = await renewalOrder(stores, s, s.periodNumber + 1, false, { processorPaymentId: null, processorStatus: null }, estimatedChargeAt, usage, {
    fee: !s.cancelAtPeriodEnd,
  });
  return { subscription: s, estimatedChargeAt, lines: order.lines, total: order.amountCents };
}
