/**
 * The Stripe rail's proration order (issue 39): processorProrationOrderLines against an independent
 * recomputation of Stripe's proration invoice (BigInt, its own rounding): the discounted period
 * amounts prorated and rounded per line, each tax rate on each line rounded per line (a credit's
 * tax negative); Kassa's lines are the undiscounted PRORATION lines, one DISCOUNT of the
 * difference and one TAX line per rate, adding up to Stripe's amount due. 2,000 runs. And where
 * the subscription's coupon stands on Stripe during a period (processorDiscountDuring). And the
 * change Kassa prorates itself on Stripe (explicitProrationOrderLines: amount-off coupons, coupons
 * ending inside the period): its two invoice items and per-line tax against a recomputation (2,000 runs).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { explicitProrationOrderLines, processorDowngradeOrderLines, processorProrationOrderLines, prorate } from '../../src/commerce/proration.js';
import { processorDiscountDuring, type AppliedDiscount } from '../../src/commerce/discounts.js';
import { perLineTaxInputs, taxLineInputs, type TaxContext } from '../../src/commerce/tax.js';

const scaled = (p: string) => {
  const [w, f = ''] = p.split('.');
  return BigInt(w!) * 10000n + BigInt((f + '0000').slice(0, 4));
};
const nearest = (n: bigint, d: bigint) => (n < 0n ? -((-2n * n + d) / (2n * d)) : (2n * n + d) / (2n * d));

const taxOf = (percents: string[]): TaxContext | null =>
  percents.length === 0 ? null : { location: { country: 'CA', region: 'QC', taxId: null }, rates: percents.map((p, i) => ({ rateId: `TXR_${i}`, displayName: `R${i}`, percentage: p, inclusive: false })), reverseCharge: false };
const coupon = (percentOff: string): AppliedDiscount => ({ couponId: 'CPN_1', name: 'Test', promotionCodeId: null, code: null, percentOff, amountOff: null, currency: null, duration: 'FOREVER', durationInPeriods: null, productIds: null });

describe('the Stripe rail’s proration order', () => {
  it('equals an independent recomputation of Stripe’s invoice (2,000 runs)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 500_000 }),
        fc.integer({ min: 0, max: 500_000 }),
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 0, max: 9 }),
        fc.integer({ min: 1, max: 3 * 2_678_400 }),
        fc.integer({ min: 0, max: 3 * 2_678_400 }),
        fc.constantFrom<string[]>([], ['19'], ['7.5'], ['5', '9.975'], ['8.875', '0.0001', '25']),
        fc.option(fc.integer({ min: 1, max: 10_000 }), { nil: null }),
        (unitFrom, unitTo, q1, extra, length, elapsedRaw, percents, hundredths) => {
          const elapsed = elapsedRaw % length;
          const percent = hundredths === null ? null : (hundredths / 100).toFixed(2);
          const input = { from: { description: 'A', unitAmount: unitFrom, quantity: q1 }, to: { description: 'B', unitAmount: Math.max(unitFrom, unitTo), quantity: q1 + extra }, periodStart: new Date(0), periodEnd: new Date(length * 1000), at: new Date(elapsed * 1000) };
          const p = prorate(input);
          if (p.net < 0) return;
          const priced = processorProrationOrderLines(input, p, taxOf(percents), percent === null ? null : coupon(percent));
          // Stripe: each line the prorated discounted period amount, rounded once; tax per line per rate.
          const remaining = BigInt(length - elapsed);
          const after = (a: bigint) => (percent === null ? a : a - nearest(a * scaled(percent), 1000000n));
          const net = [nearest(-after(BigInt(unitFrom * q1)) * remaining, BigInt(length)), nearest(after(BigInt(input.to.unitAmount * input.to.quantity)) * remaining, BigInt(length))];
          const taxes = percents.map((r) => net.reduce((s, a) => s + nearest(a * scaled(r), 1000000n), 0n));
          const due = Number(net[0]! + net[1]! + taxes.reduce((s, t) => s + t, 0n));
          expect(priced.total).toBe(due);
          expect(priced.lines.reduce((s, l) => s + l.amount, 0)).toBe(priced.total);
          expect(priced.lines.filter((l) => l.kind === 'TAX').map((l) => l.amount)).toEqual(taxes.map(Number));
          const discount = priced.lines.find((l) => l.kind === 'DISCOUNT');
          const prorations = priced.lines.filter((l) => l.kind === 'PRORATION').map((l) => l.amount);
          if (discount) expect(prorations).toEqual([p.credit, p.charge]);
          expect(prorations.reduce((s, a) => s + a, 0) + (discount?.amount ?? 0)).toBe(Number(net[0]! + net[1]!));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('an immediate downgrade: Stripe’s invoice of a total below 0 recomputed independently; the order is 0 with the BALANCE line of minus that total, DISCOUNT ≥ 0, TAX ≤ 0 (2,000 runs)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 500_000 }),
        fc.integer({ min: 1, max: 500_000 }),
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 3 * 2_678_400 }),
        fc.integer({ min: 0, max: 3 * 2_678_400 }),
        fc.constantFrom<string[]>([], ['19'], ['7.5'], ['5', '9.975'], ['8.875', '0.0001', '25']),
        fc.option(fc.integer({ min: 1, max: 10_000 }), { nil: null }),
        (unitTo, more, q, length, elapsedRaw, percents, hundredths) => {
          const elapsed = elapsedRaw % length;
          const percent = hundredths === null ? null : (hundredths / 100).toFixed(2);
          const input = { from: { description: 'Big', unitAmount: unitTo + more, quantity: q }, to: { description: 'Small', unitAmount: unitTo, quantity: q }, periodStart: new Date(0), periodEnd: new Date(length * 1000), at: new Date(elapsed * 1000) };
          const p = prorate(input);
          if (p.net >= 0) return;
          const { priced, credit } = processorDowngradeOrderLines(input, p, taxOf(percents), percent === null ? null : coupon(percent));
          // Stripe: each line the prorated discounted period amount, halves away from zero; tax per line per rate; total below 0.
          const remaining = BigInt(length - elapsed);
          const after = (a: bigint) => (percent === null ? a : a - nearest(a * scaled(percent), 1000000n));
          const net = [nearest(-after(BigInt(input.from.unitAmount * q)) * remaining, BigInt(length)), nearest(after(BigInt(unitTo * q)) * remaining, BigInt(length))];
          const taxes = percents.map((r) => net.reduce((s, a) => s + nearest(a * scaled(r), 1000000n), 0n));
          const stripeTotal = Number(net[0]! + net[1]! + taxes.reduce((s, t) => s + t, 0n));
          expect(credit).toBe(stripeTotal === 0 ? 0 : -stripeTotal);
          expect(priced.total).toBe(0);
          expect(priced.lines.reduce((s, l) => s + l.amount, 0)).toBe(0);
          const kinds = priced.lines.map((l) => l.kind);
          expect(kinds.slice(0, 2)).toEqual(['PRORATION', 'PRORATION']);
          expect(priced.lines.slice(0, 2).map((l) => l.description)).toEqual([p.inputs[0]!.description, p.inputs[1]!.description]);
          if (credit > 0) expect(priced.lines.at(-1)).toMatchObject({ kind: 'BALANCE', amount: credit });
          expect(priced.lines.filter((l) => l.kind === 'TAX').map((l) => l.amount)).toEqual(taxes.map(Number));
          for (const l of priced.lines) {
            if (l.kind === 'DISCOUNT') expect(l.amount).toBeGreaterThanOrEqual(0);
            if (l.kind === 'TAX') expect(l.amount).toBeLessThanOrEqual(0);
          }
          const discount = priced.lines.find((l) => l.kind === 'DISCOUNT');
          const prorations = priced.lines.filter((l) => l.kind === 'PRORATION').map((l) => l.amount);
          expect(prorations.reduce((s, a) => s + a, 0) + (discount?.amount ?? 0)).toBe(Number(net[0]! + net[1]!));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('one line taxed per line is the order rule; two lines may differ from taxing their sum by the roundings', () => {
    const tax = taxOf(['19'])!;
    const amounts = (lines: ReturnType<typeof taxLineInputs>) => lines.map((l) => [l.kind === 'TAX' ? l.amount : null, l.kind === 'TAX' ? l.tax?.taxAmount : null]);
    expect(amounts(perLineTaxInputs(tax, [1250]))).toEqual(amounts(taxLineInputs(tax, 1250)));
    // −887 + 1774 (a seat added with 22 of 31 days left): −169 + 337 = 168 per line; 887 × 19 % = 168.53 → 169 on the sum.
    expect(perLineTaxInputs(tax, [-887, 1774]).map((l) => (l as { amount: number }).amount)).toEqual([168]);
    expect(taxLineInputs(tax, 887).map((l) => (l as { amount: number }).amount)).toEqual([169]);
  });
});

describe('a change Kassa prorates itself on Stripe (explicitProrationOrderLines)', () => {
  const amountOff = (amountOff: number, productIds: string[] | null = null): AppliedDiscount => ({ ...coupon('0'), percentOff: null, amountOff, currency: 'EUR', productIds });
  it('equals an independent recomputation: items = [credit, charge − discount], TAX per item per rate, total never below 0 (2,000 runs)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 500_000 }),
        fc.integer({ min: 0, max: 500_000 }),
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 0, max: 9 }),
        fc.integer({ min: 1, max: 3 * 2_678_400 }),
        fc.integer({ min: 0, max: 3 * 2_678_400 }),
        fc.constantFrom<string[]>([], ['19'], ['7.5'], ['5', '9.975'], ['8.875', '0.0001', '25']),
        fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 10_000 }).map((h) => ({ percent: (h / 100).toFixed(2) })), fc.integer({ min: 1, max: 600_000 }).map((a) => ({ amount: a })), fc.constant({ amount: 500, limited: true })),
        (unitFrom, unitTo, q1, extra, length, elapsedRaw, percents, off) => {
          const elapsed = elapsedRaw % length;
          const input = { from: { description: 'A', unitAmount: unitFrom, quantity: q1 }, to: { description: 'B', unitAmount: Math.max(unitFrom, unitTo), quantity: q1 + extra }, periodStart: new Date(0), periodEnd: new Date(length * 1000), at: new Date(elapsed * 1000) };
          const p = prorate(input);
          if (p.net <= 0) return;
          const discount = off === null ? null : 'percent' in off ? coupon(off.percent) : amountOff(off.amount, 'limited' in off ? ['PRD_other'] : null);
          const { priced, items } = explicitProrationOrderLines(p, taxOf(percents), discount);
          // Independent: the two prorations rounded once each; the coupon on their net (percent half
          // up, amount off at most the net, nothing for a coupon limited to products); items; tax per item.
          const remaining = BigInt(length - elapsed);
          const credit = nearest(-BigInt(unitFrom * q1) * remaining, BigInt(length));
          const charge = nearest(BigInt(input.to.unitAmount * input.to.quantity) * remaining, BigInt(length));
          const net = credit + charge;
          const taken = off === null || 'limited' in off ? 0n : 'percent' in off ? nearest(net * scaled(off.percent), 1000000n) : BigInt(Math.min(off.amount, Number(net)));
          const wantItems = [credit, charge - taken];
          const taxes = percents.map((r) => wantItems.reduce((s, a) => s + nearest(a * scaled(r), 1000000n), 0n));
          const due = Number(net - taken + taxes.reduce((s, t) => s + t, 0n));
          expect(items.map((i) => i.amount)).toEqual(wantItems.map(Number));
          expect(priced.total).toBe(due);
          expect(due).toBeGreaterThanOrEqual(0);
          expect(items.reduce((s, i) => s + i.amount, 0) + Number(taxes.reduce((s, t) => s + t, 0n))).toBe(due);
          expect(priced.lines.reduce((s, l) => s + l.amount, 0)).toBe(priced.total);
          expect(priced.lines.filter((l) => l.kind === 'PRORATION').map((l) => l.amount)).toEqual([Number(credit), Number(charge)]);
          expect(priced.lines.find((l) => l.kind === 'DISCOUNT')?.amount ?? 0).toBe(0 - Number(taken) + 0);
          expect(priced.lines.filter((l) => l.kind === 'TAX').map((l) => l.amount)).toEqual(taxes.map(Number));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('an amount off larger than the proration takes the whole net; the two items then cancel and their taxes too (0 due)', () => {
    const input = { from: { description: 'Basic', unitAmount: 1250, quantity: 2 }, to: { description: 'Basic', unitAmount: 1250, quantity: 4 }, periodStart: new Date(0), periodEnd: new Date(31 * 86400_000), at: new Date(9 * 86400_000) };
    const p = prorate(input);
    const { priced, items } = explicitProrationOrderLines(p, taxOf(['19']), amountOff(100_000));
    expect(items.map((i) => i.amount)).toEqual([p.credit, -p.credit]);
    expect(priced.total).toBe(0);
    expect(priced.lines.map((l) => [l.kind, l.amount])).toEqual([['PRORATION', p.credit], ['PRORATION', p.charge], ['DISCOUNT', -p.net], ['TAX', 0]]);
  });
});

describe('a coupon on the Stripe rail during a period (processorDiscountDuring)', () => {
  const d = (duration: AppliedDiscount['duration'], durationInPeriods: number | null = null) => ({ duration, durationInPeriods });
  it.each([
    ['FOREVER, any period', d('FOREVER'), 7, 0, 1, 'whole'],
    ['ONCE without a trial (Stripe’s once, spent on the first invoice)', d('ONCE'), 0, 0, 1, 'none'],
    ['ONCE after a trial (Stripe’s repeating 1 month, ends inside period 1)', d('ONCE'), 1, 1, 1, 'part'],
    ['REPEATING 3 monthly, period 1', d('REPEATING', 3), 1, 0, 1, 'whole'],
    ['REPEATING 3 monthly, period 2 (ends with it)', d('REPEATING', 3), 2, 0, 1, 'whole'],
    ['REPEATING 3 monthly, period 3', d('REPEATING', 3), 3, 0, 1, 'none'],
    ['REPEATING 2 quarterly, period 1 (ends a month into it)', d('REPEATING', 2), 1, 0, 3, 'part'],
    ['REPEATING 2 quarterly, period 0', d('REPEATING', 2), 0, 0, 3, 'whole'],
    ['REPEATING 1 yearly, period 0', d('REPEATING', 1), 0, 0, 12, 'part'],
  ] as const)('%s', (_name, discount, period, firstCharged, months, want) => {
    expect(processorDiscountDuring(discount, period, firstCharged, months)).toBe(want);
  });
});
