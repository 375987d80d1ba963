import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { priceWithTax, taxContextOfLines, untaxedAmount, type TaxContext } from '../../src/commerce/tax.js';
import type { LineInput } from '../../src/commerce/pricing.js';
import { euVatCountry, isReverseCharge, parseTaxLocation } from '../../src/tax/tax-location.js';
import { AppError } from '../../src/kernel/errors.js';
import { lineDetail } from '../../src/commerce/order-line-text.js';

/**
 * An independent recomputation of the tax rule (docs/tax.md): percentages scaled to integers of
 * 10^-4 percent, amounts in minor units, half up done by comparing twice the remainder with the
 * divisor. Shares no code with src/commerce/tax.ts or pricing.ts.
 */
const scale4 = (p: string): bigint => {
  const [w, f = ''] = p.split('.');
  return BigInt(w!) * 10000n + BigInt((f + '0000').slice(0, 4));
};
const halfUp = (num: bigint, den: bigint): number => {
  const q = num / den;
  const r = num - q * den;
  return Number(2n * r >= den ? q + 1n : q);
};
function reference(charges: number[], discount: number, credit: number, tax: TaxContext): { taxAdded: number; included: number[]; total: number } {
  const gross = charges.reduce((a, b) => a + b, 0);
  const taxable = gross - Math.min(discount, gross);
  let total = taxable;
  const included: number[] = [];
  if (!tax.reverseCharge) {
    const inclusiveSum = tax.rates.filter((r) => r.inclusive).reduce((s, r) => s + scale4(r.percentage), 0n);
    for (const r of tax.rates) {
      const p = scale4(r.percentage);
      if (r.inclusive) included.push(halfUp(BigInt(taxable) * p, 1000000n + inclusiveSum));
      else {
        const t = halfUp(BigInt(taxable) * p, 1000000n);
        included.push(t);
        total += t;
      }
    }
  }
  total -= Math.min(credit, total);
  return { taxAdded: total - taxable, included, total };
}

const percentage = fc
  .tuple(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 0, max: 9999 }), fc.integer({ min: 0, max: 4 }))
  .map(([w, f, digits]) => (digits === 0 ? String(w) : `${w}.${String(f).padStart(4, '0').slice(0, digits)}`))
  .filter((p) => scale4(p) > 0n && scale4(p) <= 1000000n);

const context = fc.record({
  inclusive: fc.boolean(),
  percentages: fc.array(percentage, { minLength: 1, maxLength: 3 }),
  reverseCharge: fc.integer({ min: 0, max: 4 }).map((n) => n === 0),
}).map(({ inclusive, percentages, reverseCharge }): TaxContext => ({
  location: { country: 'DE', region: null, taxId: reverseCharge ? 'FR40303265045' : null },
  rates: percentages.map((p, i) => ({ rateId: `TXR_${i}`, displayName: 'VAT', percentage: p, inclusive })),
  reverseCharge,
}));

describe('tax lines (src/commerce/tax.ts)', () => {
  it('match an independent recomputation, and the lines add up to the total, to the minor unit', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ quantity: fc.integer({ min: 1, max: 50 }), unit: fc.integer({ min: 0, max: 1_000_000 }) }), { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 0, max: 20_000_000 }),
        fc.integer({ min: 0, max: 20_000_000 }),
        context,
        (prices, discount, credit, tax) => {
          const inputs: LineInput[] = [
            ...prices.map((p, i): LineInput => ({ kind: 'PRICE', description: `p${i}`, quantity: p.quantity, unitAmount: String(p.unit) })),
            ...(discount > 0 ? [{ kind: 'DISCOUNT' as const, description: 'coupon', amount: discount }] : []),
            ...(credit > 0 ? [{ kind: 'CREDIT' as const, description: 'credit', amount: credit }] : []),
          ];
          const priced = priceWithTax(inputs, tax);
          const want = reference(prices.map((p) => p.quantity * p.unit), discount, credit, tax);
          expect(priced.total).toBe(want.total);
          expect(priced.lines.reduce((s, l) => s + l.amount, 0)).toBe(priced.total);
          // Lines in the contract's order: charges, DISCOUNT, TAX, CREDIT.
          const order = { PRICE: 0, USAGE: 0, PRORATION: 0, DISCOUNT: 1, TAX: 2, CREDIT: 3, BALANCE: 4 } as const;
          const ranks = priced.lines.map((l) => order[l.kind]);
          expect([...ranks].sort((a, b) => a - b)).toEqual(ranks);
          const taxLines = priced.lines.filter((l) => l.kind === 'TAX');
          if (tax.reverseCharge) {
            expect(taxLines).toHaveLength(1);
            expect(taxLines[0]!.amount).toBe(0);
            expect(taxLines[0]!.tax!.reverseCharge).toBe(true);
          } else {
            expect(taxLines.map((l) => l.tax!.taxAmount)).toEqual(want.included);
            // Inclusive lines add nothing; exclusive lines add their tax.
            for (const l of taxLines) expect(l.amount).toBe(l.tax!.inclusive ? 0 : l.tax!.taxAmount);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('shows rounding at the half: 19 % of 50 cents is 9.5 → 10; 19 % included in 119 cents is 19', () => {
    const tax = (inclusive: boolean): TaxContext => ({ location: { country: 'DE', region: null, taxId: null }, rates: [{ rateId: 'TXR_1', displayName: 'VAT', percentage: '19', inclusive }], reverseCharge: false });
    const ex = priceWithTax([{ kind: 'PRICE', description: 'x', quantity: 1, unitAmount: '50' }], tax(false));
    expect(ex.lines.map((l) => [l.kind, l.description, l.exactAmount, l.amount])).toEqual([
      ['PRICE', 'x', '50', 50],
      ['TAX', 'VAT 19%', '9.5', 10],
    ]);
    expect(ex.total).toBe(60);
    const inc = priceWithTax([{ kind: 'PRICE', description: 'x', quantity: 1, unitAmount: '119' }], tax(true));
    expect(inc.total).toBe(119);
    expect(inc.lines[1]).toMatchObject({ kind: 'TAX', description: 'VAT 19% (included)', amount: 0, tax: { taxAmount: 19, taxableAmount: 119, inclusive: true } });
  });

  it('receipts and e-mails say what a TAX line stands for', () => {
    const ctx = (inclusive: boolean): TaxContext => ({ location: { country: 'DE', region: null, taxId: null }, rates: [{ rateId: 'TXR_1', displayName: 'VAT', percentage: '19', inclusive }], reverseCharge: false });
    const ex = priceWithTax([{ kind: 'PRICE', description: 'x', quantity: 1, unitAmount: '3000' }], ctx(false)).lines[1]!;
    expect(lineDetail(ex, 'EUR')).toBe('19% of €30.00');
    const inc = priceWithTax([{ kind: 'PRICE', description: 'x', quantity: 1, unitAmount: '1190' }], ctx(true)).lines[1]!;
    expect(lineDetail(inc, 'EUR')).toBe('€1.90 included in €11.90');
    const rc = priceWithTax([{ kind: 'PRICE', description: 'x', quantity: 1, unitAmount: '1000' }], { location: { country: 'FR', region: null, taxId: 'FR40303265045' }, rates: [], reverseCharge: true }).lines[1]!;
    expect(lineDetail(rc, 'EUR')).toBe('VAT id FR40303265045');
  });

  it('renewals: the context comes back from the lines, and untaxedAmount inverts the tax', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), context, (net, tax) => {
        const priced = priceWithTax([{ kind: 'PRICE', description: 'plan', quantity: 1, unitAmount: String(net) }], tax);
        const again = taxContextOfLines(priced.lines)!;
        expect(again.reverseCharge).toBe(tax.reverseCharge);
        expect(priceWithTax([{ kind: 'PRICE', description: 'plan', quantity: 1, unitAmount: String(net) }], again).total).toBe(priced.total);
        const base = untaxedAmount(priced.total, again);
        expect(base).not.toBeNull();
        // Any base that taxes to the same total is as good (rounding can map two to one total).
        expect(priceWithTax([{ kind: 'PRICE', description: 'plan', quantity: 1, unitAmount: String(base) }], again).total).toBe(priced.total);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('buyer tax location (src/tax/tax-location.ts)', () => {
  const bad = (fn: () => unknown, field: string) => {
    try {
      fn();
    } catch (e) {
      expect(e).toBeInstanceOf(AppError);
      expect((e as AppError).code).toBe('VALIDATION_ERROR');
      expect((e as Error).message).toContain(field);
      return;
    }
    throw new Error('expected a 400');
  };

  it('normalizes a good location', () => {
    expect(parseTaxLocation({ country: 'us', region: 'US-ca' }, 'b')).toEqual({ country: 'US', region: 'CA', taxId: null });
    expect(parseTaxLocation({ country: 'DE', taxId: 'de 136 695 976' }, 'b')).toEqual({ country: 'DE', region: null, taxId: 'DE136695976' });
    expect(parseTaxLocation({ country: 'GR', taxId: 'EL094259216' }, 'b').taxId).toBe('EL094259216');
    expect(parseTaxLocation({ country: 'CA', taxId: '123456789RT0001' }, 'b').taxId).toBe('123456789RT0001');
  });

  it('names the bad field', () => {
    bad(() => parseTaxLocation({ country: 'XX' }, 'body.customerTax'), 'body.customerTax.country');
    bad(() => parseTaxLocation({ country: 'Germany' }, 'body.customerTax'), 'body.customerTax.country');
    bad(() => parseTaxLocation({ country: 'US', region: 'California' }, 'body.customerTax'), 'body.customerTax.region');
    bad(() => parseTaxLocation({ country: 'DE', taxId: 'DE136695977' }, 'body.customerTax'), 'body.customerTax.taxId'); // check digit off
    bad(() => parseTaxLocation({ country: 'DE', taxId: 'FR40303265045' }, 'body.customerTax'), 'body.customerTax.taxId'); // another state's id
    bad(() => parseTaxLocation({ country: 'US', taxId: '<script>' }, 'body.customerTax'), 'body.customerTax.taxId');
  });

  it('recognizes EU VAT ids per member state (format and check digits; no registry)', () => {
    for (const [id, country] of [
      ['ATU13585627', 'AT'], ['BE0411905847', 'BE'], ['DE136695976', 'DE'], ['FR40303265045', 'FR'], ['NL004495445B01', 'NL'],
      ['IT00743110157', 'IT'], ['ESA28015865', 'ES'], ['EL094259216', 'GR'], ['IE6388047V', 'IE'], ['PL5260001246', 'PL'],
    ] as const) expect(euVatCountry(id), id).toBe(country);
    for (const id of ['DE123', 'XX123456789', 'GB980780684', 'ATU13585628']) expect(euVatCountry(id), id).toBeNull();
  });

  it('reverse charge: an EU merchant, a VAT id of another member state', () => {
    const fr = { country: 'FR', region: null, taxId: 'FR40303265045' };
    expect(isReverseCharge(fr, 'DE')).toBe(true);
    expect(isReverseCharge(fr, 'FR')).toBe(false); // same state: domestic VAT
    expect(isReverseCharge(fr, null)).toBe(false); // merchant's country unknown
    expect(isReverseCharge(fr, 'US')).toBe(false); // not an EU merchant
    expect(isReverseCharge({ ...fr, taxId: null }, 'DE')).toBe(false); // a consumer
  });
});
