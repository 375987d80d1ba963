import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { prorate, prorationOrderLines } from '../../src/commerce/proration.js';

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
});
