import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pricePeriod, type LineInput, type PriceTier, type UsagePricing } from '../../src/commerce/pricing.js';

/**
 * An independent recomputation: every decimal scaled to a fixed 10^12 (the most fraction digits a
 * price may have), quantities to 10^6, tiered prices walked unit by unit, rounding half up done on
 * the scaled integer. Shares no code with src/commerce/pricing.ts.
 */
const PRICE_SCALE = 10n ** 12n;
const QTY_SCALE = 10n ** 6n;
const scaled = (text: string, scale: bigint): bigint => {
  const [whole, fraction = ''] = text.split('.');
  const digits = scale.toString().length - 1;
  return BigInt(whole!) * scale + BigInt((fraction + '0'.repeat(digits)).slice(0, digits) || '0');
};
/** Half up of a non-negative value given at `scale`. */
const roundScaled = (value: bigint, scale: bigint): number => Number((value * 2n + scale) / (2n * scale));

/** Minor units × 10^18 (price scale × quantity scale). */
function referenceUsage(billableMicro: bigint, pricing: UsagePricing): bigint {
  const S = PRICE_SCALE * QTY_SCALE;
  switch (pricing.model) {
    case 'PER_UNIT':
      return billableMicro * scaled(pricing.unitAmount, PRICE_SCALE);
    case 'PACKAGE': {
      const size = BigInt(pricing.packageSize) * QTY_SCALE;
      let packages = 0n;
      for (let covered = 0n; covered < billableMicro; covered += size) packages++;
      return packages * scaled(pricing.packageAmount, PRICE_SCALE) * QTY_SCALE;
    }
    case 'GRADUATED': {
      // Whole units only (the generator gives integers): unit u is priced by the tier holding u.
      const units = Number(billableMicro / QTY_SCALE);
      let total = 0n;
      const touched = new Set<number>();
      for (let u = 1; u <= units; u++) {
        const i = pricing.tiers.findIndex((t) => t.upTo === null || u <= t.upTo);
        total += scaled(pricing.tiers[i]!.unitAmount, PRICE_SCALE) * QTY_SCALE;
        touched.add(i);
      }
      for (const i of touched) total += BigInt(pricing.tiers[i]!.flatAmount ?? 0) * S;
      return total;
    }
    case 'VOLUME': {
      if (billableMicro === 0n) return 0n;
      const units = Number(billableMicro / QTY_SCALE);
      const t = pricing.tiers.find((x) => x.upTo === null || units <= x.upTo)!;
      return billableMicro * scaled(t.unitAmount, PRICE_SCALE) + BigInt(t.flatAmount ?? 0) * S;
    }
  }
}

function referenceTotal(inputs: LineInput[]): { amounts: number[]; total: number } {
  const S = PRICE_SCALE * QTY_SCALE;
  const charges: number[] = [];
  let total = 0;
  const amounts = new Map<LineInput, number>();
  for (const line of inputs) {
    if (line.kind === 'PRICE') amounts.set(line, roundScaled(BigInt(line.quantity) * scaled(line.unitAmount, PRICE_SCALE), PRICE_SCALE));
    else if (line.kind === 'USAGE') {
      const consumed = scaled(String(line.quantity), QTY_SCALE);
      const free = BigInt((line.includedUnits ?? 0) + (line.creditedUnits ?? 0)) * QTY_SCALE;
      const billable = consumed > free ? consumed - free : 0n;
      amounts.set(line, roundScaled(referenceUsage(billable, line.pricing), S));
    } else if (line.kind === 'PRORATION') amounts.set(line, line.amount);
  }
  for (const v of amounts.values()) total += v;
  charges.push(total);
  for (const kind of ['DISCOUNT', 'TAX', 'CREDIT'] as const) {
    for (const line of inputs) {
      if (line.kind !== kind) continue;
      const v = kind === 'TAX' ? line.amount : 0 - Math.min(line.amount, total) || 0;
      amounts.set(line, v);
      total += v;
    }
  }
  return { amounts: inputs.map((l) => amounts.get(l)!), total };
}

const decimal = fc
  .tuple(fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 0, max: 999_999 }), fc.integer({ min: 0, max: 6 }))
  .map(([whole, fraction, digits]) => (digits === 0 ? String(whole) : `${whole}.${String(fraction).padStart(6, '0').slice(0, digits)}`));
const tinyDecimal = fc.integer({ min: 1, max: 99_999 }).map((n) => `0.${String(n).padStart(9, '0')}`); // e.g. 0.000004000 cents
const unitAmount = fc.oneof(decimal, tinyDecimal);

const tiers: fc.Arbitrary<PriceTier[]> = fc
  .uniqueArray(fc.integer({ min: 1, max: 3000 }), { minLength: 0, maxLength: 3 })
  .chain((bounds) =>
    fc.tuple(
      ...[...bounds.sort((a, b) => a - b), null].map((upTo) =>
        fc.record({ upTo: fc.constant(upTo), unitAmount, flatAmount: fc.integer({ min: 0, max: 500 }) }),
      ),
    ),
  );

const pricing: fc.Arbitrary<UsagePricing> = fc.oneof(
  fc.record({ model: fc.constant('PER_UNIT' as const), unitAmount }),
  fc.record({ model: fc.constant('PACKAGE' as const), packageSize: fc.integer({ min: 1, max: 2000 }), packageAmount: decimal }),
  fc.record({ model: fc.constant('GRADUATED' as const), tiers }),
  fc.record({ model: fc.constant('VOLUME' as const), tiers }),
);

const usageQuantity = (model: UsagePricing['model']) =>
  model === 'GRADUATED' || model === 'VOLUME'
    ? fc.integer({ min: 0, max: 6000 }).map(String)
    : fc.tuple(fc.integer({ min: 0, max: 3_000_000 }), fc.integer({ min: 0, max: 999_999 })).map(([w, f]) => `${w}.${String(f).padStart(6, '0')}`);

const line: fc.Arbitrary<LineInput> = fc.oneof(
  fc.record({ kind: fc.constant('PRICE' as const), description: fc.constant('Plan'), quantity: fc.integer({ min: 0, max: 100 }), unitAmount }),
  pricing.chain((p) =>
    fc.record({
      kind: fc.constant('USAGE' as const),
      description: fc.constant('Tokens'),
      meterId: fc.constant('MTR_1'),
      quantity: usageQuantity(p.model),
      includedUnits: fc.integer({ min: 0, max: 20_000 }),
      creditedUnits: fc.integer({ min: 0, max: 1000 }),
      pricing: fc.constant(p),
    }),
  ),
  fc.record({ kind: fc.constant('PRORATION' as const), description: fc.constant('Unused time'), amount: fc.integer({ min: 0, max: 10_000 }) }),
  fc.record({ kind: fc.constantFrom('DISCOUNT' as const, 'TAX' as const, 'CREDIT' as const), description: fc.constant('Adjustment'), amount: fc.integer({ min: 0, max: 50_000 }) }),
);

describe('pricePeriod', () => {
  it('the lines sum to the total, and each line equals an independent recomputation, to the minor unit', () => {
    fc.assert(
      fc.property(fc.array(line, { minLength: 1, maxLength: 6 }), (inputs) => {
        const priced = pricePeriod(inputs);
        expect(priced.lines.reduce((s, l) => s + l.amount, 0)).toBe(priced.total);
        const reference = referenceTotal(inputs);
        expect(priced.total).toBe(reference.total);
        expect(priced.total).toBeGreaterThanOrEqual(0);
        // Same multiset of line amounts per kind (pricePeriod orders lines by group).
        for (const kind of ['PRICE', 'USAGE', 'PRORATION', 'DISCOUNT', 'TAX', 'CREDIT'] as const) {
          const mine = priced.lines.filter((l) => l.kind === kind).map((l) => l.amount);
          const theirs = inputs.map((l, i) => [l, reference.amounts[i]] as const).filter(([l]) => l.kind === kind).map(([, a]) => a);
          expect(mine).toEqual(theirs);
        }
      }),
      { numRuns: 400 },
    );
  });

  it("prices Stripe's example: 0.04 USD per 1,000 tokens, 10,000 included, rounded once per line half up", () => {
    const usage = (quantity: string): LineInput => ({
      kind: 'USAGE',
      description: 'Tokens',
      meterId: 'MTR_tokens',
      quantity,
      includedUnits: 10_000,
      pricing: { model: 'PER_UNIT', unitAmount: '0.004' },
    });
    const fee: LineInput = { kind: 'PRICE', description: 'Pro plan', quantity: 1, unitAmount: '1500' };
    // 1,234,567 − 10,000 = 1,224,567 tokens × 0.004 = 4,898.268 cents → 4,898.
    expect(pricePeriod([fee, usage('1234567')])).toMatchObject({ total: 1500 + 4898, lines: [{ amount: 1500 }, { amount: 4898, exactAmount: '4898.268', billableQuantity: '1224567' }] });
    // 10,125 tokens: 125 billable × 0.004 = 0.5 cents → 1 (half up).
    expect(pricePeriod([usage('10125')]).total).toBe(1);
    // Under the included units: a zero line, not a negative one.
    expect(pricePeriod([usage('9000')]).lines[0]).toMatchObject({ amount: 0, billableQuantity: '0' });
  });

  it('rounds package counts up and shows the tiers a graduated price applied', () => {
    expect(pricePeriod([{ kind: 'USAGE', description: 'Req', meterId: 'M', quantity: 2001, pricing: { model: 'PACKAGE', packageSize: 1000, packageAmount: '50' } }]).total).toBe(150);
    const graduated = pricePeriod([
      {
        kind: 'USAGE',
        description: 'Req',
        meterId: 'M',
        quantity: 150,
        pricing: { model: 'GRADUATED', tiers: [{ upTo: 100, unitAmount: '0.5' }, { upTo: null, unitAmount: '0.25', flatAmount: 10 }] },
      },
    ]);
    expect(graduated.total).toBe(50 + 12.5 + 10 + 0.5); // 73 (72.5 rounded half up, once)
    expect(graduated.lines[0]!.tiers).toEqual([
      { tier: 1, upTo: 100, quantity: '100', unitAmount: '0.5', flatAmount: 0, amount: '50' },
      { tier: 2, upTo: null, quantity: '50', unitAmount: '0.25', flatAmount: 10, amount: '22.5' },
    ]);
  });

  it('reads a quantity given as a number as the decimal it was written as, not its binary expansion', () => {
    // 11734.738 is 11734.73799999999937… as a double: toFixed(12) read it as 11734.737999999999 and
    // 11734.738 × 3750 = 44,005,267.5 rounded down (found by metered-billing.test.ts's property).
    const line = pricePeriod([{ kind: 'USAGE', description: 'Req', meterId: 'M', quantity: 11734.738, pricing: { model: 'PER_UNIT', unitAmount: '3750' } }]).lines[0]!;
    expect(line).toMatchObject({ quantity: '11734.738', billableQuantity: '11734.738', amount: 44_005_268 });
    // A sum that floating point left with more than 12 fraction digits is still read to 12.
    expect(pricePeriod([{ kind: 'USAGE', description: 'Req', meterId: 'M', quantity: 0.1 + 0.2, pricing: { model: 'PER_UNIT', unitAmount: '10' } }]).lines[0]).toMatchObject({ quantity: '0.3', amount: 3 });
    expect(pricePeriod([{ kind: 'USAGE', description: 'Req', meterId: 'M', quantity: 5e-7, pricing: { model: 'PER_UNIT', unitAmount: '1' } }]).lines[0]).toMatchObject({ quantity: '0.0000005' });
  });

  it('refuses malformed prices with a clear error', () => {
    expect(() => pricePeriod([{ kind: 'PRICE', description: 'x', quantity: 1, unitAmount: '-1' }])).toThrow(/non-negative decimal/);
    expect(() => pricePeriod([{ kind: 'PRICE', description: 'x', quantity: 1, unitAmount: '0.0000000000001' }])).toThrow(/12 fraction digits/);
    expect(() =>
      pricePeriod([{ kind: 'USAGE', description: 'x', meterId: 'M', quantity: 1, pricing: { model: 'GRADUATED', tiers: [{ upTo: 5, unitAmount: '1' }] } }]),
    ).toThrow(/last tier/);
  });
});
