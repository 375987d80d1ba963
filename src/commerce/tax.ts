/**
 * Tax on an order (issue 39, item 4): TAX lines from the merchant's tax rates for the buyer's
 * location, and the one hook where order lines get them (`priceWithTax`). Pure: no clock, no
 * database. The rates are chosen by the tax domain (src/tax/) and snapshotted on the checkout
 * session; renewals take them back from the subscription's first order (`taxContextOfLines`).
 *
 * Rules (docs/tax.md, openapi/merchant.yaml `OrderLineTax`):
 * - The taxable amount is the sum of the lines priced before TAX: the charges less the discounts
 *   (whatever other lines precede, so coupons compose), never below 0. Credits come after tax.
 * - Exclusive rate: the TAX line adds `taxable × p / 100`, computed exactly and rounded once,
 *   half up, to the minor unit.
 * - Inclusive rates: the prices already hold the tax; the TAX line adds 0 (the total is
 *   unchanged) and shows the tax included, `taxable × p / (100 + Σ inclusive p)`, rounded once,
 *   half up, in `tax.taxAmount`. Several rates of one location apply side by side to the same
 *   taxable amount (no tax on tax); one location's rates are all inclusive or all exclusive.
 * - EU reverse charge: one TAX line of 0 naming the buyer's VAT id; no rate applies.
 */
import { pricePeriod, roundHalfUp, decimalText, type LineInput, type LineTax, type PricedPeriod } from './pricing.js';

/** A merchant tax rate as the order uses it (a snapshot: archiving or editing the rate later changes no order). */
export interface TaxRateSnapshot {
  rateId: string;
  displayName: string;
  /** Percent as decimal text, 0 < p ≤ 100, at most 4 fraction digits (Stripe's precision). */
  percentage: string;
  inclusive: boolean;
}

/** Where the buyer is, as tax needs it (validated by src/tax/tax-location.ts). */
export interface TaxLocation {
  country: string;
  region: string | null;
  taxId: string | null;
}

/** Everything an order's tax depends on: the buyer's location, the rates that apply there, reverse charge. */
export interface TaxContext {
  location: TaxLocation;
  rates: TaxRateSnapshot[];
  reverseCharge: boolean;
}

const PERCENTAGE = /^(\d{1,3})(?:\.(\d{1,4}))?$/;

/** The percentage as an exact fraction (numerator, denominator of percent); throws on a malformed one. */
export function percentFraction(p: string): { n: bigint; d: bigint } {
  const m = PERCENTAGE.exec(p);
  if (!m) throw new RangeError(`percentage ${JSON.stringify(p)} is not a decimal with at most 4 fraction digits`);
  const fraction = m[2] ?? '';
  const n = BigInt(`${m[1]}${fraction}`);
  const d = 10n ** BigInt(fraction.length);
  if (n <= 0n || n > 100n * d) throw new RangeError(`percentage ${p} must be above 0 and at most 100`);
  return { n, d };
}

const label = (r: TaxRateSnapshot, inclusive: boolean) => `${r.displayName} ${r.percentage}%${inclusive ? ' (included)' : ''}`;

/** The TAX line inputs for a taxable amount (minor units). Empty without a context or a rate. */
export function taxLineInputs(tax: TaxContext | null | undefined, taxableAmount: number): LineInput[] {
  if (!tax) return [];
  const base = Math.max(0, taxableAmount);
  const where = { country: tax.location.country, region: tax.location.region };
  if (tax.reverseCharge) {
    const detail: LineTax = { rateId: null, displayName: 'Reverse charge', percentage: '0', inclusive: false, ...where, taxableAmount: base, taxAmount: 0, reverseCharge: true, taxId: tax.location.taxId };
    return [{ kind: 'TAX', description: `Reverse charge: VAT to be accounted for by the customer (VAT id ${tax.location.taxId})`, amount: 0, exactAmount: '0', tax: detail }];
  }
  const fractions = tax.rates.map((r) => percentFraction(r.percentage));
  // Σ of the inclusive percentages, as one fraction over a common denominator (10^4).
  const SCALE = 10000n;
  const inclusiveSum = tax.rates.reduce((sum, r, i) => (r.inclusive ? sum + (fractions[i]!.n * SCALE) / fractions[i]!.d : sum), 0n);
  return tax.rates.map((r, i) => {
    const f = fractions[i]!;
    // exclusive: base·p/100; inclusive: base·p/(100 + Σp), p = n/d.
    const exact = r.inclusive
      ? { n: BigInt(base) * ((f.n * SCALE) / f.d), d: 100n * SCALE + inclusiveSum }
      : { n: BigInt(base) * f.n, d: 100n * f.d };
    const taxAmount = roundHalfUp(exact);
    const detail: LineTax = { rateId: r.rateId, displayName: r.displayName, percentage: r.percentage, inclusive: r.inclusive, ...where, taxableAmount: base, taxAmount, reverseCharge: false, taxId: tax.location.taxId };
    return r.inclusive
      ? { kind: 'TAX' as const, description: label(r, true), amount: 0, exactAmount: '0', tax: detail }
      : { kind: 'TAX' as const, description: label(r, false), amount: taxAmount, exactAmount: decimalText(exact), tax: detail };
  });
}

/**
 * The TAX line inputs of an invoice taxed line by line, as Stripe taxes an invoice with tax rates
 * (issue 39, Stripe rail): each rate's tax is computed on each line's own amount and rounded per
 * line, half up (half away from zero: a credit line's tax is minus the tax of its absolute amount),
 * and the rate's TAX line is the sum of those rounded amounts. `taxableAmount` is the lines' sum.
 * One line gives the same as taxLineInputs; two or more may differ from it by the roundings.
 * Reverse charge: the one line of 0, as taxLineInputs.
 */
export function perLineTaxInputs(tax: TaxContext | null | undefined, lineAmounts: readonly number[]): LineInput[] {
  if (!tax) return [];
  const taxable = lineAmounts.reduce((s, a) => s + a, 0);
  if (tax.reverseCharge || tax.rates.length === 0) return taxLineInputs(tax, taxable);
  const perLine = lineAmounts.map((a) => ({ sign: a < 0 ? -1 : 1, lines: taxLineInputs(tax, Math.abs(a)) }));
  const where = { country: tax.location.country, region: tax.location.region };
  return tax.rates.map((r, i) => {
    const taxAmount = perLine.reduce((s, l) => s + l.sign * (l.lines[i] as { tax: LineTax }).tax.taxAmount, 0);
    const detail: LineTax = { rateId: r.rateId, displayName: r.displayName, percentage: r.percentage, inclusive: r.inclusive, ...where, taxableAmount: Math.max(0, taxable), taxAmount, reverseCharge: false, taxId: tax.location.taxId };
    return r.inclusive
      ? { kind: 'TAX' as const, description: label(r, true), amount: 0, exactAmount: '0', tax: detail }
      : { kind: 'TAX' as const, description: label(r, false), amount: taxAmount, exactAmount: String(taxAmount), tax: detail };
  });
}

/** One rate's tax as a processor's invoice collected it (Stripe's `total_taxes`: per rate, the sum of each line's rounded tax). */
export interface ProcessorTaxAmount {
  /** The Kassa tax rate the processor's rate stands for (Stripe: its metadata `kassa_tax_rate_id`); null when unknown. */
  kassaRateId: string | null;
  amount: number;
}

/**
 * The TAX line inputs of an invoice the processor taxed itself (Stripe's usage invoices, issue 38
 * §7): one per rate of the order's tax context, its amount what the processor collected for that
 * rate (Stripe rounds each line's tax, half up, and sums them: Kassa does not recompute it, so the
 * order equals the charge). `taxableAmount` is the lines' sum before tax. Reverse charge, or no
 * rate: as taxLineInputs. Null when the processor charged a rate the context does not hold (the
 * caller then makes one line of the charged amount).
 */
export function processorTaxInputs(tax: TaxContext | null | undefined, taxableAmount: number, collected: readonly ProcessorTaxAmount[]): LineInput[] | null {
  if (!tax || tax.reverseCharge || tax.rates.length === 0) return collected.some((t) => t.amount !== 0) ? null : taxLineInputs(tax, taxableAmount);
  if (collected.some((t) => !tax.rates.some((r) => r.rateId === t.kassaRateId))) return null;
  const where = { country: tax.location.country, region: tax.location.region };
  return tax.rates.map((r) => {
    const taxAmount = collected.filter((t) => t.kassaRateId === r.rateId).reduce((s, t) => s + t.amount, 0);
    const detail: LineTax = { rateId: r.rateId, displayName: r.displayName, percentage: r.percentage, inclusive: r.inclusive, ...where, taxableAmount: Math.max(0, taxableAmount), taxAmount, reverseCharge: false, taxId: tax.location.taxId };
    return r.inclusive
      ? { kind: 'TAX' as const, description: label(r, true), amount: 0, exactAmount: '0', tax: detail }
      : { kind: 'TAX' as const, description: label(r, false), amount: taxAmount, exactAmount: String(taxAmount), tax: detail };
  });
}

/**
 * THE hook: prices a period's lines with its tax. The lines before tax (charges, then discounts,
 * whoever adds them) are priced first; their total is the taxable amount; the TAX lines are
 * added and the whole is priced again by the one pricing function (same lines, same rounding).
 */
export function priceWithTax(inputs: readonly LineInput[], tax: TaxContext | null | undefined): PricedPeriod {
  const own = inputs.filter((l) => l.kind !== 'TAX');
  if (!tax) return pricePeriod(own);
  const beforeTax = pricePeriod(own.filter((l) => l.kind !== 'CREDIT'));
  return pricePeriod([...own, ...taxLineInputs(tax, beforeTax.total)]);
}

/** The tax context an order's TAX lines were priced with (a renewal charges the same tax); null without TAX lines. */
export function taxContextOfLines(lines: readonly { kind: string; tax?: LineTax | null }[] | undefined): TaxContext | null {
  const taxed = (lines ?? []).filter((l) => l.kind === 'TAX' && l.tax).map((l) => l.tax!);
  if (taxed.length === 0) return null;
  const first = taxed[0]!;
  const location: TaxLocation = { country: first.country, region: first.region, taxId: first.taxId };
  if (taxed.some((t) => t.reverseCharge)) return { location, rates: [], reverseCharge: true };
  return {
    location,
    rates: taxed.map((t) => ({ rateId: t.rateId ?? '', displayName: t.displayName, percentage: t.percentage, inclusive: t.inclusive })),
    reverseCharge: false,
  };
}

/**
 * The taxable amount that, taxed, totals `gross` (a subscription stores what it charges per
 * period, tax included): gross itself when the tax adds nothing (inclusive, reverse charge);
 * otherwise found next to gross·100/(100 + Σp). Null when no amount taxes to exactly `gross`.
 */
export function untaxedAmount(gross: number, tax: TaxContext | null | undefined): number | null {
  if (!tax || tax.reverseCharge) return gross;
  const exclusive = tax.rates.filter((r) => !r.inclusive);
  if (exclusive.length === 0) return gross;
  const SCALE = 10000n;
  const sum = exclusive.reduce((s, r) => {
    const f = percentFraction(r.percentage);
    return s + (f.n * SCALE) / f.d;
  }, 0n);
  const guess = Number((BigInt(gross) * 100n * SCALE) / (100n * SCALE + sum));
  for (let delta = -3; delta <= 3; delta++) {
    const base = guess + delta;
    if (base < 0) continue;
    const total = base + taxLineInputs(tax, base).reduce((s, l) => s + (l as { amount: number }).amount, 0);
    if (total === gross) return base;
  }
  return null;
}

/** Exported for the tax domain's validation: a well-formed percentage string. */
export const isPercentage = (p: string): boolean => {
  try {
    percentFraction(p);
    return true;
  } catch {
    return false;
  }
};
