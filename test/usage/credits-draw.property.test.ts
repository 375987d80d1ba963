/**
 * The credit draw's arithmetic against an independent recomputation (fast-check): the included
 * units first, then credits, a started unit drawing a whole credit; over a run of periods with
 * grants between them, the balance never goes negative, each period draws what the walk unit by
 * unit says, and each USAGE line priced with its creditedUnits equals the recomputed amount (the
 * billable rest × unit price, rounded once, half up).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { balanceOf, balanceOfParts } from '../../src/commerce/meter-balances.js';
import { creditUnitsWanted } from '../../src/commerce/metered-billing.js';
import { pricePeriod } from '../../src/commerce/pricing.js';

/** Thousandths of a unit: quantities with up to three decimals, as a sum of `llm.cost` may be. */
const SCALE = 1000;

/** Walks the consumption unit by unit (each started unit whole): included, then credit, then overage. */
function walk(milli: number, included: number, credits: number): { fromIncluded: number; fromCredits: number; overageMilli: number } {
  const units = Math.ceil(milli / SCALE);
  let fromIncluded = 0;
  let fromCredits = 0;
  for (let k = 1; k <= units; k++) {
    if (fromIncluded < included) fromIncluded++;
    else if (fromCredits < credits) fromCredits++;
  }
  return { fromIncluded, fromCredits, overageMilli: Math.max(0, milli - included * SCALE - fromCredits * SCALE) };
}

describe('credit draw', () => {
  it('balanceOf equals the unit-by-unit walk', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2_000_000 }), fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 1000 }), fc.boolean(), (milli, included, credits, prepaid) => {
        const consumed = milli / SCALE;
        const expected = walk(milli, included, credits);
        const b = balanceOf({ consumed, included, credits, basis: prepaid ? 'PREPAID' : 'SUBSCRIPTION' });
        expect(b.creditsPending).toBe(expected.fromCredits);
        expect(b.creditsRemaining).toBe(credits - expected.fromCredits);
        expect(b.includedRemaining).toBe(included - expected.fromIncluded);
        expect(b.remainingUnits).toBe(included - expected.fromIncluded + credits - expected.fromCredits);
        expect(Math.round(b.overageUnits * SCALE)).toBe(expected.overageMilli);
        expect(b.exhausted).toBe(prepaid && credits - expected.fromCredits === 0);
        expect(creditUnitsWanted(consumed, included)).toBe(Math.max(0, Math.ceil(milli / SCALE) - included));
      }),
      { numRuns: 500 },
    );
  });

  it('balanceOfParts (a period a metered plan change split) equals a walk of each part against its own included units, credits shared in order; one part is balanceOf', () => {
    const part = fc.record({ milli: fc.integer({ min: 0, max: 200_000 }), included: fc.integer({ min: 0, max: 150 }) });
    fc.assert(
      fc.property(fc.array(part, { minLength: 1, maxLength: 4 }), fc.integer({ min: 0, max: 300 }), (parts, credits) => {
        let left = credits;
        let overMilli = 0;
        let fromCreditsTotal = 0;
        let includedLeftLast = 0;
        for (const p of parts) {
          const units = Math.ceil(p.milli / SCALE);
          const fromIncluded = Math.min(units, p.included);
          const fromCredits = Math.min(left, units - fromIncluded);
          left -= fromCredits;
          fromCreditsTotal += fromCredits;
          overMilli += Math.max(0, p.milli - p.included * SCALE);
          includedLeftLast = p.included - fromIncluded;
        }
        const b = balanceOfParts({ parts: parts.map((p) => ({ consumed: p.milli / SCALE, included: p.included })), credits, basis: 'SUBSCRIPTION' });
        expect(b.creditsPending).toBe(fromCreditsTotal);
        expect(b.creditsRemaining).toBe(credits - fromCreditsTotal);
        expect(b.includedRemaining).toBe(includedLeftLast);
        expect(b.remainingUnits).toBe(includedLeftLast + credits - fromCreditsTotal);
        expect(Math.round(b.overageUnits * SCALE)).toBe(Math.max(0, overMilli - fromCreditsTotal * SCALE));
        expect(b.included).toBe(parts.reduce((t, p) => t + p.included, 0));
        expect(Math.round(b.consumed * SCALE)).toBe(parts.reduce((t, p) => t + p.milli, 0));
        if (parts.length === 1) expect(b).toEqual({ consumed: parts[0]!.milli / SCALE, included: parts[0]!.included, ...balanceOf({ consumed: parts[0]!.milli / SCALE, included: parts[0]!.included, credits, basis: 'SUBSCRIPTION' }) });
      }),
      { numRuns: 1000 },
    );
  });

  it('over periods with grants between them: the balance never goes negative and each USAGE line is the recomputed amount', () => {
    const period = fc.record({ milli: fc.integer({ min: 0, max: 50_000 }), grant: fc.integer({ min: 0, max: 30 }) });
    fc.assert(
      fc.property(fc.array(period, { minLength: 1, maxLength: 12 }), fc.integer({ min: 0, max: 20 }), fc.integer({ min: 1, max: 9 }), (periods, included, unitMilliCents) => {
        let balance = 0;
        let granted = 0;
        let drawnTotal = 0;
        for (const p of periods) {
          balance += p.grant;
          granted += p.grant;
          const quantity = p.milli / SCALE;
          // The ledger draws min(balance, wanted): what drawCredits writes.
          const drawn = Math.min(balance, creditUnitsWanted(quantity, included));
          const expected = walk(p.milli, included, balance);
          expect(drawn).toBe(expected.fromCredits);
          balance -= drawn;
          drawnTotal += drawn;
          expect(balance).toBeGreaterThanOrEqual(0);
          const unitAmount = `0.00${unitMilliCents}`;
          const priced = pricePeriod([{ kind: 'USAGE', description: 'm', meterId: 'MTR_x', quantity, includedUnits: included, creditedUnits: drawn, pricing: { model: 'PER_UNIT', unitAmount } }]);
          // Independent: billable thousandths × unitMilliCents thousandths of a cent, rounded half up once.
          const exactMillionths = expected.overageMilli * unitMilliCents;
          expect(priced.total).toBe(Math.floor((2 * exactMillionths + 1_000_000) / 2_000_000));
          expect(priced.lines[0]!.creditedUnits).toBe(drawn);
        }
        expect(granted - drawnTotal).toBe(balance);
      }),
      { numRuns: 300 },
    );
  });
});
