/**
 * The lines of the orders commerce writes, priced by commerce/pricing.ts (the order's amount is
 * their total): a checkout's purchase, a renewal's period, a one-off charge.
 */
import type { CheckoutSession, Order } from './model.js';
import { pricePeriod, type LineInput, type PricedPeriod } from './pricing.js';
import { discountInputs } from './discounts.js';
import { priceWithTax } from './tax.js';

/** One fixed line of `amount` minor units (quantity 1). */
export function singleCharge(description: string, amount: number, ids: { productId?: string | null; priceId?: string | null } = {}): PricedPeriod {
  return pricePeriod([{ kind: 'PRICE', description, productId: ids.productId ?? null, priceId: ids.priceId ?? null, quantity: 1, unitAmount: String(amount) }]);
}

/** What a checkout session charges: its price × quantity, less its discount (the session's amount is this total). */
export function sessionLineInputs(session: Pick<CheckoutSession, 'quantity' | 'pricing' | 'product'>): LineInput[] {
  const charges = sessionChargeInputs(session);
  return [...charges, ...discountInputs(session.pricing.discount, charges)];
}

/** The session's charges before any discount: what a subscription it starts charges each period. */
export function sessionChargeInputs(session: Pick<CheckoutSession, 'quantity' | 'pricing' | 'product'>): LineInput[] {
  return [
    {
      kind: 'PRICE',
      description: session.product.name,
      productId: session.product.productId,
      priceId: session.pricing.pricingId,
      quantity: session.quantity,
      unitAmount: String(session.pricing.amount),
    },
  ];
}

/** A session's lines; a session whose stored amount is not its price × quantity (none is made so) is charged as one line of its amount. */
export function sessionLines(session: Pick<CheckoutSession, 'amount' | 'quantity' | 'pricing' | 'product' | 'tax'>): PricedPeriod {
  const priced = priceWithTax(sessionLineInputs(session), session.tax);
  if (priced.total === session.amount) return priced;
  return singleCharge(session.product.name, session.amount, { productId: session.product.productId, priceId: session.pricing.pricingId });
}

/**
 * A renewal's fixed fee: the first order's price lines again (same quantity and unit amount) when
 * they add up to what this period charges; else one line of that amount (a price changed at the
 * processor). Metered components are added by the caller (issue 38, item 5).
 */
export function renewalFeeInputs(first: Pick<Order, 'lines'> | undefined, description: string, amount: number, ids: { productId: string | null; priceId: string | null }): LineInput[] {
  const fees = (first?.lines ?? []).filter((l) => l.kind === 'PRICE' && l.quantity !== null && l.unitAmount !== null);
  const inputs: Extract<LineInput, { kind: 'PRICE' }>[] = fees.map((l) => ({ kind: 'PRICE', description: l.description, productId: l.productId, priceId: l.priceId, quantity: Number(l.quantity), unitAmount: l.unitAmount! }));
  if (inputs.length > 0 && pricePeriod(inputs).total === amount) return inputs;
  // A free trial's order (issue 39) holds the quantity at unit 0: the first paid period charges that
  // quantity at the price's unit (the period's amount split evenly, when it splits in minor units).
  const trial = inputs.length === 1 && inputs[0]!.unitAmount === '0' ? inputs[0]! : undefined;
  if (trial && trial.quantity > 0 && Number.isInteger(trial.quantity) && amount % trial.quantity === 0) {
    return [{ kind: 'PRICE', description, productId: ids.productId ?? trial.productId, priceId: ids.priceId ?? trial.priceId, quantity: trial.quantity, unitAmount: String(amount / trial.quantity) }];
  }
  return [{ kind: 'PRICE', description, productId: ids.productId, priceId: ids.priceId, quantity: 1, unitAmount: String(amount) }];
}

/**
 * The order of a checkout that starts a free trial (issue 39): nothing is charged, as Stripe's $0
 * first invoice; one PRICE line at unit amount 0 × the session's quantity names the trial.
 */
export function trialLines(session: Pick<CheckoutSession, 'quantity' | 'product' | 'pricing' | 'tax'>, days: number): PricedPeriod {
  // The session's tax rides along (a TAX line of 0 on 0): the renewals take their rates from it.
  return priceWithTax([
    {
      kind: 'PRICE',
      description: `Free trial of ${session.product.name} (${days} day${days === 1 ? '' : 's'})`,
      productId: session.product.productId,
      priceId: session.pricing.pricingId,
      quantity: session.quantity,
      unitAmount: '0',
    },
  ], session.tax);
}
