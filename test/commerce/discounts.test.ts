import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { discountCovers, discountInputs, type AppliedDiscount } from '../../src/commerce/discounts.js';
import { sessionLineInputs } from '../../src/commerce/order-lines.js';
import { pricePeriod, type LineInput } from '../../src/commerce/pricing.js';

/**
 * Discounts (issue 39) against an independent recomputation: unit prices scaled to 10^12 and
 * percentages to 10^2, each charge line rounded half up on the scaled integer, the discount's base
 * the sum of the rounded lines of the products it applies to, a percent rounded half up once, an
 * amount capped at the base and at what remains. Shares no code with src/commerce/.
 */
const SCALE = 10n ** 12n;
const scaled = (text: string, digits: number): bigint => {
  const [whole, fraction = ''] = text.split('.');
  return BigInt(whole!) * 10n ** BigInt(digits) + BigInt((fraction + '0'.repeat(digits)).slice(0, digits) || '0');
};
const halfUp = (value: bigint, scale: bigint): number => Number((value * 2n + scale) / (2n * scale));

interface Charge {
  productId: string;
  quantity: number;
  unitAmount: string;
}

function reference(charges: Charge[], d: AppliedDiscount): { charges: number[]; discount: number; total: number } {
  const amounts = charges.map((c) => halfUp(BigInt(c.quantity) * scaled(c.unitAmount, 12), SCALE));
  const subtotal = amounts.reduce((a, b) => a + b, 0);
  const base = charges.reduce((sum, c, i) => sum + (d.productIds === null || d.productIds.includes(c.productId) ? amounts[i]! : 0), 0);
  let wanted = 0;
  if (base > 0) wanted = d.percentOff !== null ? halfUp(BigInt(base) * scaled(d.percentOff, 2), 10000n) : Math.min(d.amountOff!, base);
  const discount = Math.min(wanted, subtotal);
  return { charges: amounts, discount, total: subtotal - discount };
}

const decimal = fc
  .tuple(fc.integer({ min: 0, max: 1_000_000 }), fc.integer({ min: 0, max: 999 }), fc.boolean())
  .map(([whole, fraction, withFraction]) => (withFraction ? `${whole}.${String(fraction).padStart(3, '0')}` : String(whole)));
const charge = fc.record({ productId: fc.constantFrom('PRD_a', 'PRD_b', 'PRD_c'), quantity: fc.integer({ min: 0, max: 1000 }), unitAmount: decimal });
const percent = fc.tuple(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 0, max: 99 })).filter(([w, f]) => (w > 0 || f > 0) && (w < 100 || f === 0)).map(([w, f]) => (f === 0 ? String(w) : `${w}.${String(f).padStart(2, '0')}`));
const coupon: fc.Arbitrary<AppliedDiscount> = fc
  .record({
    percent: fc.option(percent, { nil: null }),
    amountOff: fc.integer({ min: 1, max: 10_000_000 }),
    products: fc.option(fc.subarray(['PRD_a', 'PRD_b', 'PRD_c'], { minLength: 1 }), { nil: null }),
    code: fc.option(fc.constantFrom('SUMMER20', 'launch'), { nil: null }),
  })
  .map(({ percent: p, amountOff, products, code }) => ({
    couponId: 'CPN_x',
    name: 'Launch',
    promotionCodeId: code ? 'PROMO_x' : null,
    code,
    percentOff: p,
    amountOff: p === null ? amountOff : null,
    currency: p === null ? 'USD' : null,
    duration: 'ONCE',
    durationInPeriods: null,
    productIds: products,
  }));

describe('discount lines (property: lines sum to the total and equal an independent recomputation)', () => {
  it('for random prices, quantities and coupons, to the minor unit', () => {
    fc.assert(
      fc.property(fc.array(charge, { minLength: 1, maxLength: 5 }), coupon, (charges, d) => {
        const inputs: LineInput[] = charges.map((c) => ({ kind: 'PRICE', description: c.productId, productId: c.productId, quantity: c.quantity, unitAmount: c.unitAmount }));
        const priced = pricePeriod([...inputs, ...discountInputs(d, inputs)]);
        const ref = reference(charges, d);
        expect(priced.lines.reduce((a, l) => a + l.amount, 0)).toBe(priced.total);
        expect(priced.total).toBe(ref.total);
        expect(priced.lines.filter((l) => l.kind === 'PRICE').map((l) => l.amount)).toEqual(ref.charges);
        const discount = priced.lines.find((l) => l.kind === 'DISCOUNT');
        expect(discount?.amount ?? 0).toBe(ref.discount === 0 ? 0 : -ref.discount);
        expect(priced.total).toBeGreaterThanOrEqual(0);
      }),
      { numRuns: 2000 },
    );
  });

  it('orders the lines charges, DISCOUNT, TAX, CREDIT whatever order they are given in', () => {
    const d: AppliedDiscount = { couponId: 'CPN_x', name: 'Ten', promotionCodeId: null, code: null, percentOff: '10', amountOff: null, currency: null, duration: 'FOREVER', durationInPeriods: null, productIds: null };
    const charges: LineInput[] = [{ kind: 'PRICE', description: 'Pro', quantity: 3, unitAmount: '333' }];
    const priced = pricePeriod([{ kind: 'CREDIT', description: 'credit', amount: 50 }, { kind: 'TAX', description: 'VAT', amount: 180 }, ...discountInputs(d, charges), ...charges]);
    expect(priced.lines.map((l) => [l.kind, l.amount])).toEqual([
      ['PRICE', 999],
      ['DISCOUNT', -100], // 99.9 → 100, half up
      ['TAX', 180],
      ['CREDIT', -50],
    ]);
    expect(priced.lines[1]!.description).toBe('Ten (10% off)');
    expect(priced.total).toBe(1029);
  });

  it('a checkout session prices its discount through the one hook (sessionLineInputs)', () => {
    const d: AppliedDiscount = { couponId: 'CPN_x', name: 'Five off', promotionCodeId: 'PROMO_x', code: 'FIVE', percentOff: null, amountOff: 500, currency: 'USD', duration: 'ONCE', durationInPeriods: null, productIds: null };
    const base = { amount: 1999, billingInterval: null, billingIntervalCount: 1, currency: 'USD', flexibleAmount: false, maxAmount: null, minAmount: null, pricingId: null, pricingName: 'x', pricingType: 'ONE_TIME' as const };
    const priced = pricePeriod(sessionLineInputs({ quantity: 2, pricing: { ...base, discount: d }, product: { productId: 'PRD_a', name: 'Book', description: '' } }));
    expect(priced.lines.map((l) => [l.kind, l.amount, l.description])).toEqual([
      ['PRICE', 3998, 'Book'],
      ['DISCOUNT', -500, 'Promotion code FIVE ($5.00 off)'],
    ]);
  });

  it('counts durations in periods that charge the fee (period 1 after a trial)', () => {
    const once = { duration: 'ONCE' as const, durationInPeriods: null };
    const three = { duration: 'REPEATING' as const, durationInPeriods: 3 };
    const forever = { duration: 'FOREVER' as const, durationInPeriods: null };
    expect([0, 1, 2].map((p) => discountCovers(once, p, 0))).toEqual([true, false, false]);
    expect([0, 1, 2].map((p) => discountCovers(once, p, 1))).toEqual([false, true, false]);
    expect([0, 1, 2, 3, 4].map((p) => discountCovers(three, p, 0))).toEqual([true, true, true, false, false]);
    expect([0, 1, 2, 3, 4].map((p) => discountCovers(three, p, 1))).toEqual([false, true, true, true, false]);
    expect([0, 5, 500].map((p) => discountCovers(forever, p, 0))).toEqual([true, true, true]);
  });
});
