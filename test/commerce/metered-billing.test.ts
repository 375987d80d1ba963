/**
 * Metered components at renewal (issue 38 §5, §7), without a database: the closing period's USAGE
 * lines that usageLineInputs + pricePeriod make from a price's components and the meters'
 * quantities equal an independent recomputation (fast-check: random models, tiers, included
 * units and quantities, zero usage included); the API's pricing shape maps both ways; the usage
 * close waits exactly the usage-event grace window.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkMeteredComponents, usageLineInputs, usagePricingFrom, USAGE_CLOSE_DELAY_MS, type MeteredBilling, type MeteredComponent } from '../../src/commerce/metered-billing.js';
import { presentUsagePricing } from '../../src/commerce/order.presenter.js';
import { pricePeriod, type UsagePricing } from '../../src/commerce/pricing.js';
import { PERIOD_GRACE_MS } from '../../src/usage/usage-events.service.js';
import { AppError } from '../../src/kernel/errors.js';

/**
 * The recomputation: fixed point at 10^15 of a minor unit (12 price digits × 3 quantity digits),
 * graduated tiers by interval overlap (max(0, min(q, upTo) − lower)), volume by the tier holding
 * q, packages by ceiling division; rounding half up on the scaled integer. No rationals, no code
 * of src/commerce/pricing.ts.
 */
const P = 12;
const Q = 3;
const SCALE = 10n ** BigInt(P + Q);
const fixed = (text: string, digits: number): bigint => {
  const [w, f = ''] = text.split('.');
  return BigInt(w!) * 10n ** BigInt(digits) + BigInt((f + '0'.repeat(digits)).slice(0, digits) || '0');
};
const milli = (q: number): bigint => fixed(q.toFixed(Q), Q);

function expectedCents(quantity: number, c: MeteredComponent): { cents: number; billableMilli: bigint; tiersApplied: number } {
  const qm = milli(quantity) - BigInt(c.includedUnits) * 1000n;
  const billable = qm > 0n ? qm : 0n;
  let exact = 0n;
  let tiersApplied = 0;
  const p = c.pricing;
  if (p.model === 'PER_UNIT') exact = billable * fixed(p.unitAmount, P);
  else if (p.model === 'PACKAGE') {
    const size = BigInt(p.packageSize) * 1000n;
    const packages = (billable + size - 1n) / size;
    exact = packages * fixed(p.packageAmount, P) * 10n ** BigInt(Q);
  } else if (p.model === 'GRADUATED') {
    let lower = 0n;
    for (const t of p.tiers) {
      const upper = t.upTo === null ? billable : BigInt(t.upTo) * 1000n;
      const inTier = (billable < upper ? billable : upper) - lower;
      if (inTier > 0n) {
        tiersApplied++;
        exact += inTier * fixed(t.unitAmount, P) + BigInt(t.flatAmount ?? 0) * SCALE;
      }
      if (t.upTo === null || billable <= upper) break;
      lower = upper;
    }
  } else {
    if (billable > 0n) {
      const t = p.tiers.find((x) => x.upTo === null || billable <= BigInt(x.upTo) * 1000n)!;
      tiersApplied = 1;
      exact = billable * fixed(t.unitAmount, P) + BigInt(t.flatAmount ?? 0) * SCALE;
    }
  }
  return { cents: Number((exact * 2n + SCALE) / (2n * SCALE)), billableMilli: billable, tiersApplied };
}

const decimal = fc
  .tuple(fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 0, max: 12 }), fc.bigInt({ min: 0n, max: 10n ** 12n - 1n }))
  .map(([w, digits, f]) => (digits === 0 ? String(w) : `${w}.${f.toString().padStart(12, '0').slice(0, digits)}`));
const tiers = fc
  .uniqueArray(fc.integer({ min: 1, max: 5000 }), { minLength: 0, maxLength: 4 })
  .chain((bounds) => {
    const sorted = [...bounds].sort((a, b) => a - b);
    return fc.array(fc.tuple(decimal, fc.option(fc.integer({ min: 0, max: 500 }), { nil: undefined })), { minLength: sorted.length + 1, maxLength: sorted.length + 1 }).map((prices) =>
      prices.map(([unitAmount, flatAmount], i) => ({ upTo: i < sorted.length ? sorted[i]! : null, unitAmount, ...(flatAmount !== undefined ? { flatAmount } : {}) })),
    );
  });
const pricing: fc.Arbitrary<UsagePricing> = fc.oneof(
  decimal.map((unitAmount) => ({ model: 'PER_UNIT' as const, unitAmount })),
  fc.tuple(fc.integer({ min: 1, max: 1000 }), decimal).map(([packageSize, packageAmount]) => ({ model: 'PACKAGE' as const, packageSize, packageAmount })),
  tiers.map((t) => ({ model: 'GRADUATED' as const, tiers: t })),
  tiers.map((t) => ({ model: 'VOLUME' as const, tiers: t })),
);
const quantity = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 0, max: 20_000_000 }).map((m) => m / 1000));

const period = { orgId: 'ORG_a', customerId: 'CUS_a', currentPeriodStart: new Date('2026-11-01T00:00:00Z'), currentPeriodEnd: new Date('2026-12-01T00:00:00Z') };

describe('metered components at renewal', () => {
  it('the USAGE lines (one per component, in order, zero usage included) equal an independent recomputation, and the total is the sum of the lines', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ pricing, includedUnits: fc.integer({ min: 0, max: 3000 }), quantity }), { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 1, max: 99_999_999 }),
        async (specs, fee) => {
          const components: MeteredComponent[] = specs.map((s, i) => ({ meterId: `MTR_${i}`, pricing: s.pricing, includedUnits: s.includedUnits }));
          const asked: Array<[string, Date, Date]> = [];
          const billing: MeteredBilling = {
            componentsOf: async () => components,
            meters: { find: async (_org, id) => ({ id, name: `Meter ${id}`, archived: false }) },
            quantities: {
              quantity: async (_org, meterId, _customer, start, end) => {
                asked.push([meterId, start, end]);
                return specs[Number(meterId.slice(4))]!.quantity;
              },
            },
          };
          const usage = await usageLineInputs(billing, period, components);
          const priced = pricePeriod([{ kind: 'PRICE', description: 'Plan', quantity: 1, unitAmount: String(fee) }, ...usage]);
          // The closing period is asked of each meter, once.
          expect(asked).toEqual(components.map((c) => [c.meterId, period.currentPeriodStart, period.currentPeriodEnd]));
          expect(priced.lines.map((l) => l.kind)).toEqual(['PRICE', ...components.map(() => 'USAGE')]);
          let sum = fee;
          components.forEach((c, i) => {
            const line = priced.lines[i + 1]!;
            const want = expectedCents(specs[i]!.quantity, c);
            expect(line).toMatchObject({ meterId: c.meterId, description: `Meter ${c.meterId}`, includedUnits: c.includedUnits, amount: want.cents });
            expect(milli(Number(line.billableQuantity))).toBe(want.billableMilli);
            expect(milli(Number(line.quantity))).toBe(milli(specs[i]!.quantity));
            if (c.pricing.model === 'GRADUATED' || c.pricing.model === 'VOLUME') expect(line.tiers).toHaveLength(want.tiersApplied);
            else expect(line.tiers).toBeNull();
            sum += want.cents;
          });
          expect(priced.total).toBe(sum);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('the API pricing shape maps to pricing.ts and back', () => {
    fc.assert(
      fc.property(pricing, (p) => {
        // A flat amount of 0 is shown as none (the same price).
        const normal = 'tiers' in p ? { ...p, tiers: p.tiers.map(({ flatAmount, ...t }) => (flatAmount ? { ...t, flatAmount } : t)) } : p;
        expect(usagePricingFrom(presentUsagePricing(p), 'pricing')).toEqual(normal);
      }),
    );
  });

  it('a pricing without the fields of its model, or with another model\'s, is 400 naming the field', () => {
    const field = (f: () => unknown) => {
      try {
        f();
      } catch (error) {
        expect(error).toBeInstanceOf(AppError);
        return (error as AppError).options.details;
      }
      throw new Error('no error');
    };
    expect(field(() => usagePricingFrom({ model: 'PER_UNIT' }, 'meteredComponents[0].pricing'))).toEqual({ field: 'meteredComponents[0].pricing.unitAmountDecimal' });
    expect(field(() => usagePricingFrom({ model: 'PACKAGE', packageSize: 10, packageAmountDecimal: '5', unitAmountDecimal: '1' }, 'p'))).toEqual({ field: 'p.unitAmountDecimal' });
    expect(field(() => usagePricingFrom({ model: 'GRADUATED' }, 'p'))).toEqual({ field: 'p.tiers' });
  });

  it('checks components: a meter missing (or another organization\'s), archived, or named twice, and tiers that do not price', async () => {
    const meters = { find: async (_org: string, id: string) => (id === 'MTR_ok' ? { id, name: 'Tokens', archived: false } : id === 'MTR_old' ? { id, name: 'Old', archived: true } : undefined) };
    const perUnit = { model: 'PER_UNIT' as const, unitAmountDecimal: '0.004' };
    await expect(checkMeteredComponents('ORG_a', [{ meterId: 'MTR_ok', includedUnits: 10_000, pricing: perUnit }], meters)).resolves.toEqual([{ meterId: 'MTR_ok', includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmount: '0.004' } }]);
    await expect(checkMeteredComponents('ORG_a', [{ meterId: 'MTR_other', pricing: perUnit }], meters)).rejects.toMatchObject({ code: 'VALIDATION_ERROR', options: { details: { field: 'meteredComponents[0].meterId' } } });
    await expect(checkMeteredComponents('ORG_a', [{ meterId: 'MTR_old', pricing: perUnit }], meters)).rejects.toThrow(/archived/);
    await expect(checkMeteredComponents('ORG_a', [{ meterId: 'MTR_ok', pricing: perUnit }, { meterId: 'MTR_ok', pricing: perUnit }], meters)).rejects.toMatchObject({ options: { details: { field: 'meteredComponents[1].meterId' } } });
    await expect(
      checkMeteredComponents('ORG_a', [{ meterId: 'MTR_ok', pricing: { model: 'GRADUATED', tiers: [{ upTo: 10, unitAmountDecimal: '1' }, { upTo: 5, unitAmountDecimal: '1' }, { upTo: null, unitAmountDecimal: '1' }] } }], meters),
    ).rejects.toThrow(/upTo must increase/);
  });

  it('the usage close waits exactly the usage-event grace window', () => {
    expect(USAGE_CLOSE_DELAY_MS).toBe(PERIOD_GRACE_MS);
  });
});
