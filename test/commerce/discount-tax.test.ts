import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { priceWithTax, taxContextOfLines, untaxedAmount, type TaxContext } from '../../src/commerce/tax.js';
import { discountInputs, type AppliedDiscount } from '../../src/commerce/discounts.js';
import { renewalFeeInputs, sessionChargeInputs, sessionLineInputs } from '../../src/commerce/order-lines.js';
import type { CheckoutSession } from '../../src/commerce/model.js';

/**
 * Coupons and tax together (merge of coupons39 and tax39): charges → DISCOUNT → TAX on the
 * discounted amount → CREDIT. Checked against an independent recomputation on scaled integers
 * (no code shared with src/commerce/pricing.ts, discounts.ts or tax.ts), for a checkout's lines
 * and for a discounted renewal found back from the subscription's amount (tax included).
 */
const scaled = (p: string, digits: number): bigint => {
  const [w, f = ''] = p.split('.');
  return BigInt(w!) * 10n ** BigInt(digits) + BigInt((f + '0'.repeat(digits)).slice(0, digits));
};
const halfUp = (num: bigint, den: bigint): number => {
  const q = num / den;
  return Number(2n * (num - q * den) >= den ? q + 1n : q);
};

function reference(unit: number, quantity: number, coupon: { percentOff: string | null; amountOff: number | null }, tax: TaxContext) {
  const charges = unit * quantity;
  const off = coupon.percentOff !== null ? halfUp(BigInt(charges) * scaled(coupon.percentOff, 2), 10000n) : Math.min(coupon.amountOff!, charges);
  const discount = Math.min(off, charges);
  const taxable = charges - discount;
  let added = 0;
  if (!tax.reverseCharge) for (const r of tax.rates) if (!r.inclusive) added += halfUp(BigInt(taxable) * scaled(r.percentage, 4), 1000000n);
  return { discount, taxable, tax: added, total: taxable + added };
}

const percentage = fc
  .tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 9999 }), fc.integer({ min: 0, max: 4 }))
  .map(([w, f, d]) => (d === 0 ? String(w) : `${w}.${String(f).padStart(4, '0').slice(0, d)}`))
  .filter((p) => scaled(p, 4) > 0n);

const taxContext = fc
  .record({ inclusive: fc.boolean(), percentages: fc.array(percentage, { minLength: 1, maxLength: 3 }), reverse: fc.integer({ min: 0, max: 5 }).map((n) => n === 0) })
  .map(({ inclusive, percentages, reverse }): TaxContext => ({
    location: { country: 'DE', region: null, taxId: reverse ? 'FR40303265045' : null },
    rates: reverse ? [] : percentages.map((p, i) => ({ rateId: `TXR_${i}`, displayName: 'VAT', percentage: p, inclusive })),
    reverseCharge: reverse,
  }));

const coupon = fc.oneof(
  fc.tuple(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 0, max: 99 }), fc.boolean()).map(([w, f, frac]) => ({ percentOff: frac && w < 100 ? `${w}.${String(f).padStart(2, '0')}` : String(w), amountOff: null })),
  fc.integer({ min: 1, max: 5_000_000 }).map((a) => ({ percentOff: null, amountOff: a })),
);

function session(unit: number, quantity: number, c: { percentOff: string | null; amountOff: number | null }, tax: TaxContext) {
  const discount: AppliedDiscount = { couponId: 'CPN_1', name: 'Spring', promotionCodeId: 'PROMO_1', code: 'SPRING', percentOff: c.percentOff, amountOff: c.amountOff, currency: c.amountOff !== null ? 'EUR' : null, duration: 'FOREVER', durationInPeriods: null, productIds: null };
  return {
    quantity,
    product: { productId: 'PRD_1', name: 'Plan' },
    pricing: { pricingId: 'PRC_1', amount: unit, currency: 'EUR', discount },
    tax,
  } as unknown as Pick<CheckoutSession, 'quantity' | 'pricing' | 'product' | 'tax'>;
}

describe('discount + tax (charges → DISCOUNT → TAX on the discounted amount)', () => {
  it('a checkout and a discounted renewal match an independent recomputation; lines add up, in order', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2_000_000 }), fc.integer({ min: 1, max: 20 }), coupon, taxContext, (unit, quantity, c, tax) => {
        const s = session(unit, quantity, c, tax);
        const want = reference(unit, quantity, c, tax);
        const first = priceWithTax(sessionLineInputs(s), tax);
        expect(first.total).toBe(want.total);
        expect(first.lines.reduce((sum, l) => sum + l.amount, 0)).toBe(first.total);
        const discountLine = first.lines.find((l) => l.kind === 'DISCOUNT');
        expect(discountLine ? -discountLine.amount : 0).toBe(want.discount);
        const taxLines = first.lines.filter((l) => l.kind === 'TAX');
        expect(taxLines.reduce((sum, l) => sum + l.amount, 0)).toBe(want.tax);
        for (const l of taxLines) expect(l.tax!.taxableAmount).toBe(want.taxable);
        const rank = { PRICE: 0, USAGE: 0, PRORATION: 0, DISCOUNT: 1, TAX: 2, CREDIT: 3, BALANCE: 4 } as const;
        const ranks = first.lines.map((l) => rank[l.kind]);
        expect([...ranks].sort((a, b) => a - b)).toEqual(ranks);

        // The subscription stores its charges before the discount, tax included (payment-flow.ts);
        // a renewal takes the tax back from the first order, un-taxes the amount to the fee, applies
        // the coupon and taxes the discounted amount: the same total as the first order.
        const subscriptionAmount = priceWithTax(sessionChargeInputs(s), tax).total;
        const found = taxContextOfLines(first.lines);
        const net = untaxedAmount(subscriptionAmount, found);
        expect(net).toBe(unit * quantity);
        const fee = renewalFeeInputs({ lines: first.lines }, 'Plan', net!, { productId: 'PRD_1', priceId: 'PRC_1' });
        const renewal = priceWithTax([...fee, ...discountInputs(s.pricing.discount, fee)], found);
        expect(renewal.total).toBe(want.total);
        // After the coupon: the full fee with its tax, the subscription's amount.
        expect(priceWithTax(fee, found).total).toBe(subscriptionAmount);
      }),
      { numRuns: 2000 },
    );
  });
});
