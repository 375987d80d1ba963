/**
 * Proration of a plan or quantity change (issue 39, item 3), as Stripe prorates by default
 * (`proration_behavior: create_prorations`, invoiced at once with `always_invoice`): time-based, to
 * the second, over the current period. Pure: no clock, no database.
 *
 * For a change at second `t` of a period [start, end) (all in whole seconds):
 *   remaining = end − t, length = end − start
 *   credit  = −(old unit × old quantity) × remaining / length   ("Unused time on …")
 *   charge  = (new unit × new quantity) × remaining / length    ("Remaining time on …")
 * Each of the two is one PRORATION line, computed exactly and rounded ONCE, half up (half away from
 * zero), to the minor unit — the rule of docs/order-lines.md; the order's total is their sum, and
 * pricePeriod (src/commerce/pricing.ts) adds them up like any other lines. Stripe also writes the
 * two lines (its invoice's "Unused time" credit and "Remaining time" charge), each rounded on its
 * own, so Stripe's invoice for the same change and second is the same two integers.
 */
import { amountLine, pricePeriod, roundHalfUp, type LineInput, type PricedLine, type PricedPeriod } from './pricing.js';
import { perLineTaxInputs, priceWithTax, type TaxContext } from './tax.js';
import { discountDescription, discountInputs, type AppliedDiscount } from './discounts.js';
import { validationError } from '../kernel/errors.js';
import { longDateUtc } from '../kernel/time-zone.js';

/** One side of a change: what a period of the subscription costs, unit × quantity. */
export interface PlanSide {
  /** The product's name, for the line's description. */
  description: string;
  /** Minor units per unit per period (an integer: catalog prices are whole minor units). */
  unitAmount: number;
  quantity: number;
}

export interface ProrationInput {
  from: PlanSide;
  to: PlanSide;
  periodStart: Date;
  periodEnd: Date;
  /** When the change takes effect (Stripe's `proration_date`); truncated to the second. */
  at: Date;
}

export interface Proration {
  /** The two PRORATION lines (credit first, then charge); empty when nothing remains of the period. */
  inputs: LineInput[];
  /** The credit for the unused time of the old plan (≤ 0) and the charge of the new one for the rest (≥ 0). */
  credit: number;
  charge: number;
  /** credit + charge: what the change costs now (negative for a downgrade). */
  net: number;
  /** Seconds left of the period at `at`, and the period's length in seconds. */
  remainingSeconds: number;
  periodSeconds: number;
}

const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

function checkSide(side: PlanSide, what: string): void {
  if (!Number.isSafeInteger(side.unitAmount) || side.unitAmount < 0) throw validationError(`${what}: the unit amount must be a non-negative integer of minor units`);
  if (!Number.isSafeInteger(side.quantity) || side.quantity < 1) throw validationError(`${what}: the quantity must be a positive integer`);
}

/** `amount × remaining / length`, rounded once half up; `sign` −1 for the credit. */
function prorated(amount: bigint, remaining: number, length: number, sign: 1n | -1n): number {
  return roundHalfUp({ n: sign * amount * BigInt(remaining), d: BigInt(length) });
}

export function prorate(input: ProrationInput): Proration {
  checkSide(input.from, 'from');
  checkSide(input.to, 'to');
  const start = seconds(input.periodStart);
  const end = seconds(input.periodEnd);
  const at = Math.min(Math.max(seconds(input.at), start), end);
  const length = end - start;
  const remaining = end - at;
  if (length <= 0 || remaining <= 0) return { inputs: [], credit: 0, charge: 0, net: 0, remainingSeconds: Math.max(0, remaining), periodSeconds: Math.max(0, length) };
  const oldAmount = BigInt(input.from.unitAmount) * BigInt(input.from.quantity);
  const newAmount = BigInt(input.to.unitAmount) * BigInt(input.to.quantity);
  const credit = prorated(oldAmount, remaining, length, -1n);
  const charge = prorated(newAmount, remaining, length, 1n);
  // The period's end as people read it, in UTC ("22 December 2026", docs/order-lines.md): the line is stored once and read everywhere.
  const until = longDateUtc(new Date(end * 1000));
  const inputs: LineInput[] = [
    { kind: 'PRORATION', description: `Unused time on ${input.from.quantity} × ${input.from.description} until ${until}`, amount: credit },
    { kind: 'PRORATION', description: `Remaining time on ${input.to.quantity} × ${input.to.description} until ${until}`, amount: charge },
  ];
  return { inputs, credit, charge, net: credit + charge, remainingSeconds: remaining, periodSeconds: length };
}

/**
 * The order a change charges now: its PRORATION lines, then the subscription's coupon's DISCOUNT
 * (when one covers the period) and its TAX on the net (the proration less the discount), priced by
 * the one hook (priceWithTax → pricePeriod): each TAX line is the net × rate, rounded once, half up
 * (docs/tax.md) — the rule of every order. Without tax or coupon: the two lines, their sum.
 */
export function prorationOrderLines(p: Proration, extra: { tax?: TaxContext | null; discount?: (charges: readonly LineInput[]) => LineInput[] } = {}): PricedPeriod {
  if (p.net < 0) throw validationError('A change that costs less than nothing is not charged now (see scheduleChange)');
  return priceWithTax([...p.inputs, ...(extra.discount?.(p.inputs) ?? [])], extra.tax ?? null);
}

/** The BALANCE line's description: the downgrade's credit moved to the customer's balance. */
export const BALANCE_LINE_DESCRIPTION = 'Credit added to your balance';

/** The CREDIT line of an order paid (in part) by the customer's credit balance (a renewal; on Stripe any invoice). */
export const APPLIED_BALANCE_DESCRIPTION = 'Applied balance';

const negatedDecimal = (d: string): string => (d.startsWith('-') ? d.slice(1) : /^0(\.0*)?$/.test(d) ? d : `-${d}`);

function negatedLine(l: PricedLine): PricedLine {
  const out: PricedLine = { ...l, exactAmount: negatedDecimal(l.exactAmount), amount: l.amount === 0 ? 0 : -l.amount };
  if (l.tax) out.tax = { ...l.tax, taxableAmount: l.tax.taxableAmount === 0 ? 0 : -l.tax.taxableAmount, taxAmount: l.tax.taxAmount === 0 ? 0 : -l.tax.taxAmount };
  return out;
}

/** A priced period with every line's sign reversed (rounding is symmetric): lines of a total below 0 are priced as their opposite, then negated. */
export function negatedPeriod(p: PricedPeriod): PricedPeriod {
  return { lines: p.lines.map(negatedLine), total: p.total === 0 ? 0 : -p.total };
}

/**
 * The order an immediate downgrade leaves (issue 39; Stripe's invoice of a total below 0, amount
 * due 0, its credit moved to the customer balance): the two PRORATION lines (net < 0), then the
 * coupon and the tax as the **mirror** of an upgrade's — the upgrade's rule (prorationOrderLines:
 * DISCOUNT on the net, TAX on the net less the discount, each rounded once, half up) applied to
 * the net's absolute value, every line's sign reversed. So the credit gives back what the buyer
 * paid for the unused time: a coupon's share is not credited (the DISCOUNT line is ≥ 0) and the
 * exclusive tax on it is (the TAX lines are ≤ 0); a change and its reverse at the same second
 * cancel to the minor unit. Last, one BALANCE line moves the net to the customer's balance, so
 * the order's total is 0 and `credit` (> 0) is what the balance gains.
 */
export function downgradeOrderLines(p: Proration, extra: { tax?: TaxContext | null; discount?: (charges: readonly LineInput[]) => LineInput[] } = {}): { priced: PricedPeriod; credit: number } {
  if (p.net >= 0) throw validationError('Only a change that costs less than nothing leaves a credit');
  const mirrored: LineInput[] = p.inputs.map((l) => ({ ...(l as { kind: 'PRORATION'; description: string; amount: number }), amount: -(l as { amount: number }).amount }));
  const up = priceWithTax([...mirrored, ...(extra.discount?.(mirrored) ?? [])], extra.tax ?? null);
  const credit = up.total;
  const lines = up.lines.map(negatedLine);
  if (credit > 0) {
    lines.push(amountLine('BALANCE', BALANCE_LINE_DESCRIPTION, credit));
  }
  return { priced: { lines, total: 0 }, credit };
}

/**
 * The order a change charges now on the Stripe rail (issue 39): Stripe's proration invoice, line by
 * line, so the preview equals what Stripe collects to the minor unit.
 * - Stripe reflects a subscription's discount in the proration lines' own amounts (proration items
 *   are not discountable; the discount is in their amount). With a percent coupon each line is the
 *   proration of the discounted period amount (amount − amount × percent, that rounded once half
 *   up), rounded once half up. The order shows Kassa's two undiscounted PRORATION lines and one
 *   DISCOUNT of the difference, so its lines read as on the sandbox and add up to Stripe's.
 * - Stripe taxes each invoice line with the subscription's tax rates, each rate's amount rounded
 *   per line, half up (perLineTaxInputs): one TAX line per rate of the per-line sums, on the
 *   discounted lines.
 * `discount`: the percent coupon Stripe's subscription discount holds during the whole remaining
 * period, or null (the cases Stripe's documentation leaves open Kassa prorates itself: explicitProrationOrderLines).
 */
export function processorProrationOrderLines(input: ProrationInput, p: Proration, tax: TaxContext | null, discount: AppliedDiscount | null): PricedPeriod {
  if (p.net < 0) throw validationError('A change that costs less than nothing is not charged now (see scheduleChange)');
  let net = p;
  if (discount) {
    if (discount.percentOff === null) throw validationError('Only a percent coupon is reflected in a Stripe proration here');
    const [whole, fraction = ''] = discount.percentOff.split('.');
    const percent = { n: BigInt(`${whole}${fraction}`), d: 10n ** BigInt(fraction.length) * 100n };
    const discounted = (side: PlanSide): PlanSide => {
      const amount = BigInt(side.unitAmount) * BigInt(side.quantity);
      return { description: side.description, unitAmount: Number(amount) - roundHalfUp({ n: amount * percent.n, d: percent.d }), quantity: 1 };
    };
    net = prorate({ ...input, from: discounted(input.from), to: discounted(input.to) });
  }
  const off = p.net - net.net;
  const charges: LineInput[] =
    off > 0 ? [...p.inputs, { kind: 'DISCOUNT', description: discountDescription(discount!), amount: off }] : off === 0 ? p.inputs : net.inputs.map((l, i) => ({ ...l, description: p.inputs[i]!.description }));
  return pricePeriod([...charges, ...perLineTaxInputs(tax, [net.credit, net.charge])]);
}

/**
 * An immediate downgrade on the Stripe rail (issue 39): Stripe's proration invoice of a total below
 * 0, line by line — the credit for the unused time and the charge for the rest, each the discounted
 * period amount prorated (a percent coupon Stripe holds is reflected in both amounts), taxed per line
 * — which Stripe finalizes with `amount_due` 0 and moves to the customer's balance. It is the
 * reverse upgrade's invoice (processorProrationOrderLines; its rounding is symmetric) with every
 * sign reversed, so the coupon's share of the unused time is a DISCOUNT ≥ 0 (not credited) and the
 * tax on the credit TAX ≤ 0, as on the sandbox; then one BALANCE line of the credit, total 0.
 */
export function processorDowngradeOrderLines(input: ProrationInput, p: Proration, tax: TaxContext | null, discount: AppliedDiscount | null): { priced: PricedPeriod; credit: number } {
  if (p.net >= 0) throw validationError('Only a change that costs less than nothing leaves a credit');
  const reverse: ProrationInput = { ...input, from: input.to, to: input.from };
  const up = processorProrationOrderLines(reverse, prorate(reverse), tax, discount);
  // The reverse's lines are [unused time on the new plan, remaining time on the old]; negated they
  // are this change's charge and credit: credit first, with this change's descriptions.
  const negated = up.lines.map(negatedLine);
  const prorations = negated.filter((l) => l.kind === 'PRORATION');
  const rest = negated.filter((l) => l.kind !== 'PRORATION');
  const [charge, credit] = prorations;
  const ordered = [{ ...credit!, description: p.inputs[0]!.description }, { ...charge!, description: p.inputs[1]!.description }, ...rest];
  const lines = up.total > 0 ? [...ordered, amountLine('BALANCE', BALANCE_LINE_DESCRIPTION, up.total)] : ordered;
  return { priced: { lines, total: 0 }, credit: up.total };
}

/** One invoice item Kassa sends the processor for a change it prorates itself (explicitProrationOrderLines). */
export interface ProcessorInvoiceItem {
  description: string;
  /** Minor units; negative for the credit. */
  amount: number;
}

/**
 * The order a change charges now on the Stripe rail when Kassa prorates it itself (issue 39): an
 * amount-off coupon Stripe still holds, or a coupon whose Stripe discount ends inside the current
 * period — cases where Stripe's own proration of a discount is not documented exactly. Kassa's rule
 * (the sandbox's): the two PRORATION lines (prorate), the coupon's DISCOUNT on their net while the
 * coupon covers the period (discountInputs: percent rounded once half up, amount off at most the
 * net; a coupon limited to products takes nothing off), then TAX. Stripe is told the exact amounts
 * as two invoice items, `discountable: false`, each with the subscription's tax rates:
 *   1. the credit for the unused time (≤ 0),
 *   2. the charge for the rest of the period less the DISCOUNT (≥ the credit's absolute value, as
 *      the discount is at most the net, so the invoice is never below 0).
 * Stripe taxes each invoice line per rate, rounded per line (perLineTaxInputs), so the TAX lines
 * are the per-line sums over these two items, and Stripe's `amount_paid` = this total by
 * construction: the invoice holds no amount Stripe computed itself.
 */
export function explicitProrationOrderLines(p: Proration, tax: TaxContext | null, discount: AppliedDiscount | null): { priced: PricedPeriod; items: ProcessorInvoiceItem[] } {
  if (p.net < 0) throw validationError('A change that costs less than nothing is not charged now (see scheduleChange)');
  const discountLines = discount ? discountInputs(discount, p.inputs) : [];
  const off = discountLines.reduce((s, l) => s + (l as { amount: number }).amount, 0);
  const [credit, charge] = [p.inputs[0]!, p.inputs[1]!];
  const items: ProcessorInvoiceItem[] = [
    { description: credit.description, amount: p.credit },
    { description: off > 0 ? `${charge.description}, less ${discountLines[0]!.description}` : charge.description, amount: p.charge - off },
  ];
  return { priced: pricePeriod([...p.inputs, ...discountLines, ...perLineTaxInputs(tax, items.map((i) => i.amount))]), items };
}
