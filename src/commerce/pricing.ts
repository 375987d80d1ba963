/**
 * Pricing a period from its lines: the one place an order's total is computed (checkout, renewals,
 * and later plan changes and refunds call it). Pure: no clock, no database.
 *
 * The rounding rule (also in openapi/merchant.yaml `OrderLine` and docs/order-lines.md):
 * unit prices are exact decimals of the minor unit (`"0.004"` = 0.004 cents per token); each line's
 * amount is computed exactly (rational arithmetic on BigInt) and rounded ONCE, half up (half away
 * from zero) to the minor unit; tiers inside a line are not rounded separately. The order's total
 * is the sum of its rounded lines, so the lines always add up to the total.
 *
 * Lines are priced in a fixed order: charges (price, usage, proration), then discounts, then tax,
 * then credits. A credit line covers at most what remains to pay (the total never goes below 0).
 */
import { validationError } from '../kernel/errors.js';

/** A non-negative decimal of minor units (or of units), e.g. `"1500"`, `"0.004"`; at most 12 fraction digits. */
export type Decimal = string;

/** `BALANCE` (issue 39): the part of an immediate downgrade's order carried to the customer's credit balance (≥ 0; never an input of pricePeriod). */
export type LineKind = 'PRICE' | 'USAGE' | 'CREDIT' | 'DISCOUNT' | 'PRORATION' | 'TAX' | 'BALANCE';
export const LINE_KINDS: readonly LineKind[] = ['PRICE', 'USAGE', 'CREDIT', 'DISCOUNT', 'PRORATION', 'TAX', 'BALANCE'];

export interface PriceTier {
  /** Inclusive upper bound of the tier in units; null: no bound (the last tier). */
  upTo: number | null;
  /** Minor units per unit in this tier (decimal). */
  unitAmount: Decimal;
  /** Minor units charged once when any unit falls in this tier (graduated) or when the quantity lands in it (volume). */
  flatAmount?: number;
}

/** How a metered component prices its billable units (those beyond the included and credited ones). */
export type UsagePricing =
  | { model: 'PER_UNIT'; unitAmount: Decimal }
  /** Each started package of `packageSize` units costs `packageAmount` minor units (packages are rounded up). */
  | { model: 'PACKAGE'; packageSize: number; packageAmount: Decimal }
  /** Each unit is priced by the tier it falls in (Stripe's `graduated`). */
  | { model: 'GRADUATED'; tiers: PriceTier[] }
  /** Every unit is priced by the tier the whole quantity falls in (Stripe's `volume`). */
  | { model: 'VOLUME'; tiers: PriceTier[] };

export type LineInput =
  | { kind: 'PRICE'; description: string; productId?: string | null; priceId?: string | null; quantity: number; unitAmount: Decimal }
  | {
      kind: 'USAGE';
      description: string;
      meterId: string;
      /** Units consumed in the period (decimal, e.g. a sum of `llm.cost`). */
      quantity: Decimal | number;
      /** Units the period includes for free. */
      includedUnits?: number;
      /** Units drawn from the customer's prepaid credit. */
      creditedUnits?: number;
      pricing: UsagePricing;
    }
  /** Fixed amounts computed elsewhere (issue 39): a proration is signed, a discount and a credit are given positive and subtracted. */
  | { kind: 'PRORATION' | 'DISCOUNT' | 'CREDIT'; description: string; amount: number }
  /** A tax rate's line (src/commerce/tax.ts): `amount` is what it adds (0 for inclusive or reverse-charged tax), `tax` what it shows. */
  | { kind: 'TAX'; description: string; amount: number; exactAmount?: Decimal; tax?: LineTax };

/** What a TAX line shows (issue 39): the rate applied and the tax it stands for. */
export interface LineTax {
  /** The merchant's tax rate (`TXR_…`); null on a reverse-charge line. */
  rateId: string | null;
  displayName: string;
  /** Percent, decimal text (`"20"`, `"8.875"`); `"0"` on a reverse-charge line. */
  percentage: string;
  /** Included in the charges' prices (the line adds 0, `taxAmount` is the part of the price that is tax) or added on top. */
  inclusive: boolean;
  /** The buyer's country (ISO 3166-1 alpha-2) and region the rate was chosen for. */
  country: string;
  region: string | null;
  /** Minor units the rate was applied to: the sum of the lines before the tax (charges less discounts). */
  taxableAmount: number;
  /** The tax in minor units, rounded once, half up; equal to the line's amount when exclusive. */
  taxAmount: number;
  /** EU reverse charge: no tax charged, the buyer accounts for it (their VAT id is `taxId`). */
  reverseCharge: boolean;
  taxId: string | null;
}

export interface AppliedTier {
  /** 1-based tier index, its bounds, the units priced in it and its exact amount (decimal minor units, unrounded). */
  tier: number;
  upTo: number | null;
  quantity: string;
  unitAmount: Decimal;
  flatAmount: number;
  amount: Decimal;
}

export interface PricedLine {
  kind: LineKind;
  description: string;
  productId: string | null;
  priceId: string | null;
  meterId: string | null;
  /** Units (price: how many; usage: consumed in the period); null for amount lines. */
  quantity: string | null;
  /** Usage only: units included and drawn from credit, and the billable rest. */
  includedUnits: number | null;
  creditedUnits: number | null;
  billableQuantity: string | null;
  /** Minor units per unit (decimal); null for amount lines and for tiered/package usage. */
  unitAmount: Decimal | null;
  pricing: UsagePricing | null;
  tiers: AppliedTier[] | null;
  /** The line's exact amount before its one rounding (decimal minor units, signed). */
  exactAmount: Decimal;
  /** Rounded, signed minor units: credits and discounts are negative. */
  amount: number;
  /** TAX lines (issue 39): the rate and the tax; absent on other lines. */
  tax?: LineTax;
}

export interface PricedPeriod {
  lines: PricedLine[];
  total: number;
}

// ---- exact rationals on BigInt ----

interface Rational {
  n: bigint;
  d: bigint;
}
const ZERO: Rational = { n: 0n, d: 1n };
const gcd = (a: bigint, b: bigint): bigint => {
  a = a < 0n ? -a : a;
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
};
const norm = (n: bigint, d: bigint): Rational => {
  if (d < 0n) [n, d] = [-n, -d];
  const g = gcd(n, d) || 1n;
  return { n: n / g, d: d / g };
};
const add = (a: Rational, b: Rational): Rational => norm(a.n * b.d + b.n * a.d, a.d * b.d);
const sub = (a: Rational, b: Rational): Rational => norm(a.n * b.d - b.n * a.d, a.d * b.d);
const mul = (a: Rational, b: Rational): Rational => norm(a.n * b.n, a.d * b.d);
const cmp = (a: Rational, b: Rational): number => {
  const x = a.n * b.d - b.n * a.d;
  return x < 0n ? -1 : x > 0n ? 1 : 0;
};
const min = (a: Rational, b: Rational): Rational => (cmp(a, b) <= 0 ? a : b);
const max = (a: Rational, b: Rational): Rational => (cmp(a, b) >= 0 ? a : b);
const int = (v: number | bigint): Rational => ({ n: BigInt(v), d: 1n });

const DECIMAL = /^(\d{1,15})(?:\.(\d{1,12}))?$/;

/** Parses a non-negative decimal (string, or a finite number written without exponent). */
export function parseDecimal(value: Decimal | number, what: string): Rational {
  let text = typeof value === 'number' ? numberText(value) : value;
  const m = DECIMAL.exec(text);
  if (!m) throw validationError(`${what} must be a non-negative decimal with at most 12 fraction digits (got ${JSON.stringify(value)})`);
  const fraction = m[2] ?? '';
  text = `${m[1]}${fraction}`;
  return norm(BigInt(text), 10n ** BigInt(fraction.length));
}

function numberText(n: number): string {
  if (!Number.isFinite(n) || n < 0) return String(n);
  // The shortest decimal that reads back as n, i.e. what was written (11734.738), not toFixed's
  // binary expansion (11734.737999999999, which rounds a half down).
  const shortest = String(n);
  if (/^\d+(?:\.\d{1,12})?$/.test(shortest)) return shortest;
  // A float sum's tail past 12 fraction digits (0.30000000000000004), or exponent notation: 12 digits.
  return n.toFixed(12).replace(/\.?0+$/, '');
}

/** Exact decimal text of a rational whose denominator divides a power of ten; else 12 digits, rounded half up. */
export function decimalText(r: Rational): string {
  const negative = r.n < 0n;
  const n = negative ? -r.n : r.n;
  let scale = 0;
  let d = r.d;
  while (d % 10n === 0n) {
    d /= 10n;
    scale++;
  }
  let digits: bigint;
  if (d === 1n) digits = n * 10n ** 0n;
  else {
    scale = 12;
    digits = (n * 10n ** 12n * 2n + r.d) / (2n * r.d);
  }
  const s = digits.toString().padStart(scale + 1, '0');
  const text = scale === 0 ? s : `${s.slice(0, -scale)}.${s.slice(-scale)}`.replace(/\.?0+$/, '');
  return negative && text !== '0' ? `-${text}` : text;
}

/** The one rounding: half up (half away from zero) to an integer number of minor units. */
export function roundHalfUp(r: Rational): number {
  const negative = r.n < 0n;
  const n = negative ? -r.n : r.n;
  const rounded = (2n * n + r.d) / (2n * r.d);
  const value = Number(negative ? -rounded : rounded);
  if (!Number.isSafeInteger(value)) throw validationError('A line amount is too large');
  return value === 0 ? 0 : value;
}

const nonNegativeInteger = (v: number | undefined, what: string): number => {
  const x = v ?? 0;
  if (!Number.isSafeInteger(x) || x < 0) throw validationError(`${what} must be a non-negative integer`);
  return x;
};

function checkTiers(tiers: PriceTier[]): void {
  if (tiers.length === 0) throw validationError('A tiered price needs at least one tier');
  tiers.forEach((t, i) => {
    const last = i === tiers.length - 1;
    if (last !== (t.upTo === null)) throw validationError('Only the last tier has no upper bound (upTo null)');
    if (t.upTo !== null) {
      nonNegativeInteger(t.upTo, 'tiers[].upTo');
      const prev = i > 0 ? tiers[i - 1]!.upTo! : 0;
      if (t.upTo <= prev) throw validationError('tiers[].upTo must increase');
    }
    nonNegativeInteger(t.flatAmount, 'tiers[].flatAmount');
  });
}

/** Prices billable units with a usage model: the exact amount and, for tiered models, the tiers applied. */
export function priceUsage(billable: Rational, pricing: UsagePricing): { amount: Rational; tiers: AppliedTier[] | null } {
  switch (pricing.model) {
    case 'PER_UNIT':
      return { amount: mul(billable, parseDecimal(pricing.unitAmount, 'unitAmount')), tiers: null };
    case 'PACKAGE': {
      const size = nonNegativeInteger(pricing.packageSize, 'packageSize');
      if (size < 1) throw validationError('packageSize must be at least 1');
      // Started packages count whole: ceil(billable / size).
      const q = billable.n / (billable.d * BigInt(size));
      const packages = q * billable.d * BigInt(size) === billable.n ? q : q + 1n;
      return { amount: mul(int(packages), parseDecimal(pricing.packageAmount, 'packageAmount')), tiers: null };
    }
    case 'GRADUATED': {
      checkTiers(pricing.tiers);
      const applied: AppliedTier[] = [];
      let total = ZERO;
      let lower = ZERO;
      for (const [i, t] of pricing.tiers.entries()) {
        if (cmp(billable, lower) <= 0) break;
        const upper = t.upTo === null ? billable : min(billable, int(t.upTo));
        const units = sub(upper, lower);
        const flat = t.flatAmount ?? 0;
        const amount = add(mul(units, parseDecimal(t.unitAmount, 'tiers[].unitAmount')), int(flat));
        applied.push({ tier: i + 1, upTo: t.upTo, quantity: decimalText(units), unitAmount: t.unitAmount, flatAmount: flat, amount: decimalText(amount) });
        total = add(total, amount);
        if (t.upTo === null) break;
        lower = int(t.upTo);
      }
      return { amount: total, tiers: applied };
    }
    case 'VOLUME': {
      checkTiers(pricing.tiers);
      if (billable.n === 0n) return { amount: ZERO, tiers: [] };
      const index = pricing.tiers.findIndex((t) => t.upTo === null || cmp(billable, int(t.upTo)) <= 0);
      const t = pricing.tiers[index]!;
      const flat = t.flatAmount ?? 0;
      const amount = add(mul(billable, parseDecimal(t.unitAmount, 'tiers[].unitAmount')), int(flat));
      return { amount, tiers: [{ tier: index + 1, upTo: t.upTo, quantity: decimalText(billable), unitAmount: t.unitAmount, flatAmount: flat, amount: decimalText(amount) }] };
    }
  }
}

const ORDER: Record<LineKind, number> = { PRICE: 0, USAGE: 0, PRORATION: 0, DISCOUNT: 1, TAX: 2, CREDIT: 3, BALANCE: 4 };

/** A line that is only an amount: no product, price, meter, quantity or pricing (DISCOUNT, TAX, CREDIT, BALANCE). */
export const amountLine = (kind: LineKind, description: string, amount: number): PricedLine => ({ ...blank(kind, description), exactAmount: String(amount), amount });

const blank = (kind: LineKind, description: string): Omit<PricedLine, 'exactAmount' | 'amount'> => ({
  kind,
  description,
  productId: null,
  priceId: null,
  meterId: null,
  quantity: null,
  includedUnits: null,
  creditedUnits: null,
  billableQuantity: null,
  unitAmount: null,
  pricing: null,
  tiers: null,
});

/**
 * Prices a period: each line rounded once (half up), the total the sum of the rounded lines.
 * Lines keep their given order within a group (charges, discounts, tax, credits).
 */
export function pricePeriod(inputs: readonly LineInput[]): PricedPeriod {
  const sorted = inputs.map((line, i) => ({ line, i })).sort((a, b) => ORDER[a.line.kind] - ORDER[b.line.kind] || a.i - b.i);
  const lines: PricedLine[] = [];
  let total = 0;
  for (const { line } of sorted) {
    let priced: PricedLine;
    switch (line.kind) {
      case 'PRICE': {
        const quantity = nonNegativeInteger(line.quantity, 'quantity');
        const exact = mul(int(quantity), parseDecimal(line.unitAmount, 'unitAmount'));
        priced = {
          ...blank('PRICE', line.description),
          productId: line.productId ?? null,
          priceId: line.priceId ?? null,
          quantity: String(quantity),
          unitAmount: line.unitAmount,
          exactAmount: decimalText(exact),
          amount: roundHalfUp(exact),
        };
        break;
      }
      case 'USAGE': {
        const consumed = parseDecimal(line.quantity, 'quantity');
        const included = nonNegativeInteger(line.includedUnits, 'includedUnits');
        const credited = nonNegativeInteger(line.creditedUnits, 'creditedUnits');
        const billable = max(ZERO, sub(consumed, int(included + credited)));
        const { amount: exact, tiers } = priceUsage(billable, line.pricing);
        priced = {
          ...blank('USAGE', line.description),
          meterId: line.meterId,
          quantity: decimalText(consumed),
          includedUnits: included,
          creditedUnits: credited,
          billableQuantity: decimalText(billable),
          unitAmount: line.pricing.model === 'PER_UNIT' ? line.pricing.unitAmount : null,
          pricing: line.pricing,
          tiers,
          exactAmount: decimalText(exact),
          amount: roundHalfUp(exact),
        };
        break;
      }
      case 'PRORATION': {
        if (!Number.isSafeInteger(line.amount)) throw validationError(`A ${line.kind} line's amount must be an integer`);
        priced = { ...blank(line.kind, line.description), exactAmount: String(line.amount), amount: line.amount };
        break;
      }
      case 'TAX': {
        if (!Number.isSafeInteger(line.amount) || line.amount < 0) throw validationError(`A TAX line's amount must be an integer ≥ 0`);
        priced = { ...blank('TAX', line.description), exactAmount: line.exactAmount ?? String(line.amount), amount: line.amount, ...(line.tax ? { tax: line.tax } : {}) };
        break;
      }
      case 'DISCOUNT':
      case 'CREDIT': {
        const wanted = nonNegativeInteger(line.amount, `A ${line.kind} line's amount`);
        // Never below zero: a discount or a credit covers at most what remains to pay.
        const applied = Math.min(wanted, Math.max(0, total));
        priced = { ...blank(line.kind, line.description), exactAmount: String(-applied), amount: applied === 0 ? 0 : -applied };
        break;
      }
    }
    lines.push(priced);
    total += priced.amount;
  }
  if (!Number.isSafeInteger(total) || total < 0) throw validationError('The period total must be a non-negative integer of minor units');
  return { lines, total };
}
