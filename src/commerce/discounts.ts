/**
 * Discounts (issue 39, item 2): what a coupon takes off a period's charges, as one DISCOUNT line
 * priced by commerce/pricing.ts (lines order: charges, then DISCOUNT, then TAX, then CREDIT).
 * Pure: no clock, no database. The coupon and promotion code records live in src/discounts/.
 *
 * The rule (also in docs/discounts.md and openapi/merchant.yaml `Coupon`):
 * - the discount's base is the sum of the period's rounded charge lines (PRICE, USAGE, PRORATION)
 *   of the products the coupon applies to (all lines when it names none);
 * - percent off: base × percent / 100, computed exactly and rounded once, half up, to the minor unit;
 * - amount off: the coupon's amount (in its currency), at most the base;
 * - the DISCOUNT line covers at most what remains, so a total is never negative (pricePeriod).
 * One discount per checkout (no stacking).
 */
import { formatMoney } from '../kernel/money.js';
import { parseDecimal, pricePeriod, roundHalfUp, type LineInput } from './pricing.js';

export type CouponDuration = 'ONCE' | 'REPEATING' | 'FOREVER';

/** A coupon as a checkout keeps it (frozen when applied: later edits of the coupon change nothing). */
export interface AppliedDiscount {
  couponId: string;
  /** The coupon's name (shown on the page, the DISCOUNT line and receipts). */
  name: string;
  /** The promotion code the buyer (or the merchant) gave, if any; `code` as it was created. */
  promotionCodeId: string | null;
  code: string | null;
  /** Percent off, a decimal with at most 2 fraction digits (e.g. "12.5"); null for amount off. */
  percentOff: string | null;
  /** Minor units off in `currency`; null for percent off. */
  amountOff: number | null;
  currency: string | null;
  duration: CouponDuration;
  durationInPeriods: number | null;
  /** The catalog products it applies to; null: every line. */
  productIds: string[] | null;
}

const CHARGE_KINDS = new Set(['PRICE', 'USAGE', 'PRORATION']);

/** "20% off", "5.00 USD off". */
export function discountTerms(d: Pick<AppliedDiscount, 'percentOff' | 'amountOff' | 'currency'>): string {
  if (d.percentOff !== null) return `${d.percentOff.replace(/\.0+$/, '').replace(/(\.\d*?)0+$/, '$1')}% off`;
  return `${formatMoney(d.amountOff!, d.currency!)} off`;
}

/** The DISCOUNT line's description: the promotion code or the coupon's name, and its terms. */
export function discountDescription(d: AppliedDiscount): string {
  return `${d.code !== null ? `Promotion code ${d.code}` : d.name} (${discountTerms(d)})`;
}

/**
 * The minor units a discount takes off these charges (before pricePeriod's "at most what remains"
 * clamp): the base is the sum of the charges' rounded amounts for the products it applies to.
 */
export function discountAmount(d: AppliedDiscount, charges: readonly LineInput[]): number {
  const priced = pricePeriod(charges.filter((l) => CHARGE_KINDS.has(l.kind)));
  const base = priced.lines
    .filter((l) => d.productIds === null || (l.productId !== null && d.productIds.includes(l.productId)))
    .reduce((sum, l) => sum + l.amount, 0);
  if (base <= 0) return 0;
  if (d.percentOff !== null) {
    const percent = parseDecimal(d.percentOff, 'percentOff');
    return roundHalfUp({ n: BigInt(base) * percent.n, d: percent.d * 100n });
  }
  return Math.min(d.amountOff ?? 0, base);
}

/** The DISCOUNT line of a period (none when the discount takes nothing off). */
export function discountInputs(d: AppliedDiscount | undefined | null, charges: readonly LineInput[]): LineInput[] {
  if (!d) return [];
  const amount = discountAmount(d, charges);
  return amount > 0 ? [{ kind: 'DISCOUNT', description: discountDescription(d), amount }] : [];
}

/**
 * Whether a subscription's billing period gets the discount. Durations count the periods that
 * charge the fee: `firstCharged` is 0, or 1 after a free trial (period 0 is the trial). ONCE: that
 * first period; REPEATING: N periods from it; FOREVER: every period.
 */
export function discountCovers(d: Pick<AppliedDiscount, 'duration' | 'durationInPeriods'>, period: number, firstCharged: number): boolean {
  if (period < firstCharged) return false;
  if (d.duration === 'FOREVER') return true;
  const periods = d.duration === 'ONCE' ? 1 : (d.durationInPeriods ?? 0);
  return period < firstCharged + periods;
}

/** The last period a discount covers (null: forever). */
export function lastDiscountedPeriod(d: Pick<AppliedDiscount, 'duration' | 'durationInPeriods'>, firstCharged: number): number | null {
  if (d.duration === 'FOREVER') return null;
  return firstCharged + (d.duration === 'ONCE' ? 1 : (d.durationInPeriods ?? 0)) - 1;
}

/**
 * How a subscription's discount stands on the Stripe rail during billing period `period` (issue 39,
 * plan changes on Stripe): Stripe reflects the subscription's discount in a proration line's amount
 * while the discount lasts, so a change's proration is discounted when Stripe's discount (the
 * checkout's coupon, docs/discounts.md "Stripe rail") is still the subscription's at the change.
 * `monthsPerPeriod`: months of one billing period (null for a DAY price). Returns
 * - `whole`: the discount lasts through the whole period (FOREVER; a period before the last one it covers);
 * - `none`: it ended (a ONCE coupon without a trial is Stripe's `once`, spent on the first invoice;
 *   a period after the ones it covers);
 * - `part`: it ends inside this period (the last period it covers, when Stripe's `repeating` months
 *   end after the period's start: after a trial, or on a price billed every 2 months or more).
 */
export function processorDiscountDuring(d: Pick<AppliedDiscount, 'duration' | 'durationInPeriods'>, period: number, firstCharged: number, monthsPerPeriod: number | null): 'whole' | 'none' | 'part' {
  if (d.duration === 'FOREVER') return 'whole';
  if (d.duration === 'ONCE' && firstCharged === 0) return 'none';
  if (!discountCovers(d, period, firstCharged)) return 'none';
  const last = lastDiscountedPeriod(d, firstCharged)!;
  if (period < last) return 'whole';
  return firstCharged === 0 && monthsPerPeriod === 1 ? 'whole' : 'part';
}
