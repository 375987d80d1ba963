import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { downgradeOrderLines, prorate, prorationOrderLines } from '../../src/commerce/proration.js';
import { quotePlanChange, type PlanCatalog } from '../../src/commerce/plan-change.js';
import { discountInputs, type AppliedDiscount } from '../../src/commerce/discounts.js';
import type { TaxContext } from '../../src/commerce/tax.js';
import type { Subscription } from '../../src/commerce/model.js';

/**
 * An independent recomputation of Stripe's default proration: the period and the change in whole
 * seconds, each side's amount × remaining seconds as a scaled integer (10^9 per second of the
 * period's fraction would lose precision, so the division is done on plain integers with the
 * remainder compared twice against the divisor), rounded half away from zero. Shares no code with
 * src/commerce/proration.ts or pricing.ts.
 */
function halfUpDiv(numerator: bigint, divisor: bigint): number {
  const negative = numerator < 0n;
  const n = negative ? -numerator : numerator;
  const q = n / divisor;
  const r = n - q * divisor;
  const rounded = r * 2n >= divisor ? q + 1n : q;
  const v = Number(negative ? -rounded : rounded);
  return v === 0 ? 0 : v;
}

function reference(oldUnit: number, oldQty: number, newUnit: number, newQty: number, startS: number, endS: number, atS: number) {
  const remaining = BigInt(endS - Math.min(Math.max(atS, startS), endS));
  const length = BigInt(endS - startS);
  const credit = halfUpDiv(-BigInt(oldUnit) * BigInt(oldQty) * remaining, length);
  const charge = halfUpDiv(BigInt(newUnit) * BigInt(newQty) * remaining, length);
  return { credit, charge };
}

const BASE = Date.UTC(2026, 0, 1) / 1000;

describe('proration (Stripe default: time-based, to the second, one rounding per line)', () => {
  it('matches an independent recomputation; the order lines add up to the net', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.integer({ min: 1, max: 500 }),
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.integer({ min: 1, max: 500 }),
        fc.integer({ min: 0, max: 400 * 86400 }),
        fc.integer({ min: 1, max: 400 * 86400 }),
        fc.double({ min: -0.1, max: 1.1, noNaN: true }),
        fc.integer({ min: 0, max: 999 }),
        (oldUnit, oldQty, newUnit, newQty, startOffset, length, where, ms) => {
          const startS = BASE + startOffset;
          const endS = startS + length;
          const atS = Math.floor(startS + where * length);
          const p = prorate({
            from: { description: 'Old', unitAmount: oldUnit, quantity: oldQty },
            to: { description: 'New', unitAmount: newUnit, quantity: newQty },
            periodStart: new Date(startS * 1000),
            periodEnd: new Date(endS * 1000),
            at: new Date(atS * 1000 + ms),
          });
          const ref = reference(oldUnit, oldQty, newUnit, newQty, startS, endS, atS);
          if (atS >= endS) {
            expect(p.inputs).toEqual([]);
            return;
          }
          expect(p.credit).toBe(ref.credit);
          expect(p.charge).toBe(ref.charge);
          expect(p.net).toBe(ref.credit + ref.charge);
          if (p.net >= 0) {
            const priced = prorationOrderLines(p);
            expect(priced.lines.map((l) => l.amount)).toEqual([ref.credit, ref.charge]);
            expect(priced.total).toBe(ref.credit + ref.charge);
            expect(priced.lines.every((l) => l.kind === 'PRORATION')).toBe(true);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('a worked example: 10.00/month → 30.00/month half way through a 30-day month', () => {
    const start = new Date('2026-04-01T00:00:00Z');
    const end = new Date('2026-05-01T00:00:00Z');
    const p = prorate({ from: { description: 'Basic', unitAmount: 1000, quantity: 1 }, to: { description: 'Pro', unitAmount: 3000, quantity: 1 }, periodStart: start, periodEnd: end, at: new Date('2026-04-16T00:00:00Z') });
    expect([p.credit, p.charge, p.net]).toEqual([-500, 1500, 1000]);
    // The period's end as the pages print it (UTC, "1 May 2026"), not ISO (docs/order-lines.md).
    expect(p.inputs.map((l) => l.description)).toEqual(['Unused time on 1 × Basic until 1 May 2026', 'Remaining time on 1 × Pro until 1 May 2026']);
    // One third of a second short of half: 1000 × 1,296,001 / 2,592,000 = 500.000385… → 500 either way; 1 cent × 1/3 rounds to 0.
    const q = prorate({ from: { description: 'A', unitAmount: 1, quantity: 1 }, to: { description: 'B', unitAmount: 3, quantity: 1 }, periodStart: start, periodEnd: end, at: new Date(start.getTime() + (2_592_000 / 2) * 1000) });
    expect([q.credit, q.charge]).toEqual([-1, 2]); // −0.5 → −1 (half away from zero), 1.5 → 2
  });

  it('seats: 3 → 5 seats of 12.00 with a quarter left', () => {
    const start = new Date('2026-01-01T00:00:00Z');
    const end = new Date('2026-01-05T00:00:00Z');
    const p = prorate({ from: { description: 'Team', unitAmount: 1200, quantity: 3 }, to: { description: 'Team', unitAmount: 1200, quantity: 5 }, periodStart: start, periodEnd: end, at: new Date('2026-01-04T00:00:00Z') });
    expect([p.credit, p.charge, p.net]).toEqual([-900, 1500, 600]);
  });

  it("the line's date is the period end's day in UTC, whatever the zone of the process", () => {
    // 23:30 UTC on 22 December is already the 23rd in Tokyo and still the 22nd in Honolulu: the line says the 22nd.
    const p = prorate({ from: { description: 'Pro', unitAmount: 900, quantity: 1 }, to: { description: 'Team', unitAmount: 2000, quantity: 2 }, periodStart: new Date('2026-11-22T23:30:00Z'), periodEnd: new Date('2026-12-22T23:30:00Z'), at: new Date('2026-12-01T00:00:00Z') });
    expect(p.inputs.map((l) => l.description)).toEqual(['Unused time on 1 × Pro until 22 December 2026', 'Remaining time on 2 × Team until 22 December 2026']);
  });
});

/**
 * Exclusive tax (and a percent coupon) on a plan change, against an independent recomputation:
 * percentages as integers scaled by 10^4, each rate's tax = net × p / 100 rounded half away from
 * zero (halfUpDiv above), no code shared with src/commerce/tax.ts or pricing.ts. The quote must
 * (a) split the stored amount (fee + its tax) back into the old fee, (b) charge PRORATION, the
 * coupon's DISCOUNT on their sum, and one TAX line per rate on what remains, (c) store the new fee
 * with its tax.
 */
const scaled = (p: string) => {
  const [whole, fraction = ''] = p.split('.');
  return BigInt(whole!) * 10000n + BigInt((fraction + '0000').slice(0, 4));
};
const refTax = (amount: number, percentages: string[]) => percentages.map((p) => halfUpDiv(BigInt(amount) * scaled(p), 100n * 10000n));

describe('proration with exclusive tax and a coupon (the quote a change charges)', () => {
  const percentage = fc
    .tuple(fc.integer({ min: 0, max: 99 }), fc.integer({ min: 0, max: 9999 }))
    .filter(([w, f]) => w > 0 || f > 0)
    .map(([w, f]) => (f === 0 ? String(w) : `${w}.${String(f).padStart(4, '0').replace(/0+$/, '')}`));
  it('matches an independent recomputation; preview lines add up; the stored amount keeps its tax', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 0, max: 3_000_000 }),
        fc.integer({ min: 1, max: 50 }),
        fc.array(percentage, { minLength: 1, maxLength: 3 }),
        fc.option(fc.integer({ min: 1, max: 10000 }), { nil: null }),
        fc.integer({ min: 1, max: 366 * 86400 }),
        fc.double({ min: 0, max: 0.999999, noNaN: true }),
        async (oldUnit, oldQty, extra, newQty, percentages, percentOffBasis, length, where) => {
          const newUnit = oldUnit + extra;
          const startS = BASE;
          const endS = startS + length;
          const atS = Math.floor(startS + where * length);
          const oldFee = oldUnit * oldQty;
          const newFee = newUnit * newQty;
          if (newFee < oldFee) return; // downgrades are scheduled, not prorated
          const tax: TaxContext = { location: { country: 'DE', region: null, taxId: null }, reverseCharge: false, rates: percentages.map((p, i) => ({ rateId: `TXR_${i}`, displayName: `T${i}`, percentage: p, inclusive: false })) };
          const coupon: AppliedDiscount | null = percentOffBasis === null ? null : { couponId: 'CPN_1', name: 'C', promotionCodeId: null, code: null, percentOff: (percentOffBasis / 100).toFixed(2), amountOff: null, currency: null, duration: 'FOREVER', durationInPeriods: null, productIds: null };
          const stored = oldFee + refTax(oldFee, percentages).reduce((a, b) => a + b, 0);
          const s = {
            id: 'SUB_1', orgId: 'ORG_1', status: 'ACTIVE', failedAttempts: 0, paymentAction: null, priceId: 'PRC_old', productId: 'PRD_1', productName: 'Plan',
            amountCents: stored, quantity: oldQty, currency: 'EUR', billingInterval: 'MONTH', billingIntervalCount: 1,
            currentPeriodStart: new Date(startS * 1000), currentPeriodEnd: new Date(endS * 1000), periodNumber: 3, trialEnd: null, scheduledChange: null,
          } as unknown as Subscription;
          const price = (priceId: string, unitAmount: number) => ({ priceId, productId: 'PRD_1', productName: 'Plan', unitAmount, currency: 'EUR', pricingType: 'SUBSCRIPTION' as const, billingInterval: 'MONTH' as const, billingIntervalCount: 1, provider: 'STRIPE', active: true, flexibleAmount: false, metered: false });
          const catalog: PlanCatalog = { findPrice: async (_o, id) => (id === 'PRC_old' ? price('PRC_old', oldUnit) : price('PRC_new', newUnit)) };
          if (newFee === oldFee && newQty === oldQty && newUnit === oldUnit) return;
          const q = await quotePlanChange(s, { priceId: 'PRC_new', quantity: newQty }, catalog, new Date(atS * 1000 + 500), {}, { tax, discount: (charges) => discountInputs(coupon, charges) });
          // (a) the old fee recovered from the taxed stored amount
          expect([q.from.unitAmount, q.from.quantity, q.from.amount]).toEqual([oldUnit, oldQty, oldFee]);
          // (c) the new stored amount: new fee + its tax
          expect(q.nextRenewalAmount).toBe(newFee + refTax(newFee, percentages).reduce((a, b) => a + b, 0));
          // (b) the charge now
          const ref = reference(oldUnit, oldQty, newUnit, newQty, startS, endS, atS);
          const net = ref.credit + ref.charge;
          if (net <= 0) {
            expect([q.lines, q.amountDue]).toEqual([[], 0]);
            return;
          }
          const discount = coupon ? halfUpDiv(BigInt(net) * BigInt(percentOffBasis!), 10000n) : 0;
          const taxable = net - discount;
          const taxes = refTax(taxable, percentages);
          const expected: [string, number][] = [['PRORATION', ref.credit], ['PRORATION', ref.charge], ...(discount > 0 ? [['DISCOUNT', -discount] as [string, number]] : []), ...taxes.map((t) => ['TAX', t] as [string, number])];
          expect(q.lines.map((l) => [l.kind, l.amount])).toEqual(expected);
          expect(q.amountDue).toBe(taxable + taxes.reduce((a, b) => a + b, 0));
          expect(q.lines.reduce((sum, l) => sum + l.amount, 0)).toBe(q.amountDue);
          expect(q.lines.filter((l) => l.kind === 'TAX').every((l) => l.tax?.taxableAmount === taxable)).toBe(true);
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('an immediate downgrade’s order (issue 39: the credit to the customer balance)', () => {
  const rate = (p: string): TaxContext => ({ location: { country: 'DE', region: null, taxId: null }, rates: [{ rateId: 'TXR_x', displayName: 'VAT', percentage: p, inclusive: false }], reverseCharge: false });
  it('is the mirror of the reverse upgrade: lines add up to 0, the BALANCE line is the reverse upgrade’s total (2,000 runs)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 0, max: 99_999 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 31 * 86_400 }),
        fc.integer({ min: 0, max: 31 * 86_400 - 1 }),
        fc.option(fc.integer({ min: 1, max: 10_000 }), { freq: 2 }),
        fc.option(fc.constantFrom('19', '7.5', '9.975'), { freq: 2 }),
        (big, smallRaw, qty, length, atRaw, percentHundredths, percentage) => {
          const small = smallRaw % big;
          const at = atRaw % length;
          const discount = percentHundredths === null ? null : ({ couponId: 'CPN_x', promotionCodeId: null, name: 'C', percentOff: String(percentHundredths / 100), amountOff: null, currency: null, duration: 'FOREVER', durationInPeriods: null, productIds: null } as unknown as AppliedDiscount);
          const extra = { tax: percentage ? rate(percentage) : null, discount: (charges: readonly never[]) => discountInputs(discount, charges) };
          const period = { periodStart: new Date(BASE * 1000), periodEnd: new Date((BASE + length) * 1000), at: new Date((BASE + at) * 1000) };
          const down = prorate({ from: { description: 'Big', unitAmount: big, quantity: qty }, to: { description: 'Small', unitAmount: small, quantity: qty }, ...period });
          fc.pre(down.net < 0);
          const up = prorate({ from: { description: 'Small', unitAmount: small, quantity: qty }, to: { description: 'Big', unitAmount: big, quantity: qty }, ...period });
          const { priced, credit } = downgradeOrderLines(down, extra as never);
          expect(priced.total).toBe(0);
          expect(priced.lines.reduce((s, l) => s + l.amount, 0)).toBe(0);
          expect(credit).toBe(prorationOrderLines(up, extra as never).total);
          expect(credit).toBeGreaterThanOrEqual(0);
          expect(priced.lines.slice(0, 2).map((l) => l.amount)).toEqual([down.credit, down.charge]);
          if (credit > 0) expect(priced.lines.at(-1)).toMatchObject({ kind: 'BALANCE', amount: credit });
          for (const l of priced.lines) {
            if (l.kind === 'DISCOUNT') expect(l.amount).toBeGreaterThanOrEqual(0);
            if (l.kind === 'TAX') expect(l.amount).toBeLessThanOrEqual(0);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });
});
