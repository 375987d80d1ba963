/**
 * Kassa's coupons on the Stripe card processor (issue 39, item 2; docs/discounts.md "Stripe rail").
 *
 * A checkout's coupon (or the coupon of the promotion code the merchant gave) is passed to Stripe
 * Checkout as `discounts: [{ coupon }]`: Stripe then takes it off the session (payment mode) or
 * makes it the subscription's discount (subscription mode), so the amount Stripe collects is
 * Kassa's order total. Kassa's redemption counters stay the only limits: the Stripe coupon has no
 * `max_redemptions`, `redeem_by` nor `applies_to` (Kassa checked the product already, and the
 * session's one line is an ad-hoc Stripe product).
 *
 * Durations. Kassa counts billing periods that charge the fee; Stripe's `repeating` counts
 * months from when the discount starts (the subscription's creation, trial included) and covers
 * every invoice created before `start + duration_in_months`. So one Kassa coupon may need more
 * than one Stripe coupon (a REPEATING 3 coupon is 3 months on a monthly price and 25 on a yearly
 * one): the Stripe coupon's id names the Kassa coupon and the Stripe duration, and it is made once
 * per id (idempotency key, then `resource_already_exists` → read back).
 */
import Stripe from 'stripe';
import type { CheckoutSession, PricingSnapshot } from '../commerce/model.js';
import type { AppliedDiscount } from '../commerce/discounts.js';
import { validationError } from '../kernel/errors.js';
import { INTERACTIVE, withStripeRetries } from './stripe-retry.js';
import { KASSA_ORG_KEY } from './stripe-metadata.js';

/**
 * The longest free trial a ONCE or REPEATING coupon may follow on Stripe: a trial shorter than
 * the shortest month keeps the first charged invoice inside Stripe's first month (see below).
 */
export const STRIPE_COUPON_MAX_TRIAL_DAYS = 27;

export type StripeCouponDuration = { duration: 'once' | 'forever' } | { duration: 'repeating'; duration_in_months: number };

/**
 * Stripe's duration for a Kassa coupon on this purchase, or a refusal (a sentence for a 400).
 *
 * - One-time purchases: Stripe takes any duration off the one payment; `once` is sent.
 * - FOREVER → `forever` (a trial's $0 invoice has nothing to take off).
 * - ONCE / REPEATING n without a trial, on a price billed every p months (MONTH × count, or
 *   YEAR × count × 12): invoices are made at 0, p, 2p, … months; n of them fall before
 *   `p·(n − 1) + 1` months and the next (at p·n ≥ p·(n − 1) + 1) does not. ONCE is n = 1
 *   (`once` is sent: the same first invoice).
 * - With a trial of T ≤ 27 days: Stripe's `once` would be spent on the $0 trial invoice, so ONCE is
 *   `repeating` 1 month; charged invoices are at T, T + p, … months, and T + p·(n − 1) is before
 *   `p·(n − 1) + 1` months (T is shorter than any month) while T + p·n is not. A longer trial has
 *   no month count that gives exactly n charged invoices: refused.
 * - DAY prices: ONCE without a trial → `once`; REPEATING (n > 1) or a trial → refused, because a
 *   month count cannot give n invoices of d days.
 */
export function stripeCouponDuration(discount: Pick<AppliedDiscount, 'duration' | 'durationInPeriods'>, pricing: Pick<PricingSnapshot, 'pricingType' | 'billingInterval' | 'billingIntervalCount' | 'trialDays'>): StripeCouponDuration | { refusal: string } {
  if (discount.duration === 'FOREVER') return { duration: 'forever' };
  if (pricing.pricingType !== 'SUBSCRIPTION' || !pricing.billingInterval) return { duration: 'once' };
  const n = discount.duration === 'ONCE' ? 1 : (discount.durationInPeriods ?? 1);
  const trial = pricing.trialDays ?? 0;
  const what = discount.duration === 'ONCE' ? 'a ONCE coupon' : `a REPEATING ${n} coupon`;
  if (trial > STRIPE_COUPON_MAX_TRIAL_DAYS) {
    return { refusal: `${what} cannot follow a free trial longer than ${STRIPE_COUPON_MAX_TRIAL_DAYS} days on the Stripe card processor (Stripe counts a coupon's duration in months from the trial's start); use a FOREVER coupon or a shorter trial` };
  }
  if (pricing.billingInterval === 'DAY') {
    if (n === 1 && trial === 0) return { duration: 'once' };
    return { refusal: `${what}${trial > 0 ? ' with a free trial' : ''} is not available on a DAY price on the Stripe card processor (Stripe counts a coupon's duration in months); use ONCE or FOREVER` };
  }
  if (n === 1 && trial === 0) return { duration: 'once' };
  const p = (pricing.billingInterval === 'YEAR' ? 12 : 1) * pricing.billingIntervalCount;
  return { duration: 'repeating', duration_in_months: p * (n - 1) + 1 };
}

/** The Stripe coupon's id for a Kassa coupon and a Stripe duration: `kassa_CPN…_once`, `_forever`, `_m25`. */
export function stripeCouponId(couponId: string, d: StripeCouponDuration): string {
  return `kassa_${couponId}_${d.duration === 'repeating' ? `m${d.duration_in_months}` : d.duration}`;
}

/**
 * The Stripe coupon of a session's discount, made once: `POST /v1/coupons` with its own id and an
 * idempotency key; a coupon made earlier (a key Stripe no longer remembers, after 24 hours)
 * answers `resource_already_exists`, and is then read back. Undefined without a discount.
 * 400 for a duration Stripe cannot express on this price (stripeCouponDuration).
 */
export async function stripeCouponFor(stripe: Stripe, session: CheckoutSession): Promise<string | undefined> {
  const discount = session.pricing.discount;
  if (!discount) return undefined;
  const d = stripeCouponDuration(discount, session.pricing);
  if ('refusal' in d) throw validationError(`body.discounts: ${d.refusal}`);
  const id = stripeCouponId(discount.couponId, d);
  const params: Stripe.CouponCreateParams = {
    id,
    // Stripe's coupon names are at most 40 characters; Kassa's DISCOUNT line keeps the full name.
    name: discount.name.slice(0, 40),
    ...(discount.percentOff !== null ? { percent_off: Number(discount.percentOff) } : { amount_off: discount.amountOff!, currency: discount.currency!.toLowerCase() }),
    ...d,
    metadata: { [KASSA_ORG_KEY]: session.orgId, kassa_coupon_id: discount.couponId },
  };
  try {
    return (await withStripeRetries(() => stripe.coupons.create(params, { idempotencyKey: `kassa_coupon_${id}` }), INTERACTIVE)).id;
  } catch (err) {
    if (err instanceof Stripe.errors.StripeInvalidRequestError && err.code === 'resource_already_exists') {
      return (await withStripeRetries(() => stripe.coupons.retrieve(id), INTERACTIVE)).id;
    }
    throw err;
  }
}
