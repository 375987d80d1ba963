/**
 * The order of one renewal period of a subscription, however it was charged (Kassa's renewal job
 * on the sandbox, Stripe Billing's invoice): correlation values come from the initial order.
 */
import type { Order, Subscription } from './model.js';
import type { CommerceStores } from './stores.js';
import { newId } from '../kernel/ids.js';
import { renewalFeeInputs } from './order-lines.js';
import type { LineInput, PricedPeriod } from './pricing.js';
import type { ChangePricing } from './plan-change.js';
import { discountCovers, discountDescription, discountInputs, lastDiscountedPeriod, processorDiscountDuring, type AppliedDiscount } from './discounts.js';
import { pricePeriod } from './pricing.js';
import { priceWithTax, processorTaxInputs, taxContextOfLines, untaxedAmount, type ProcessorTaxAmount } from './tax.js';

/** When a card payment's funds become available to the merchant (sandbox and Stripe alike). */
export const CARD_SETTLEMENT_DELAY_MS = 2 * 24 * 3600 * 1000;

/**
 * A period's fee: the subscription's seats at its unit amount (quantity × unit, issue 39: a plan or
 * seat change moves them) when that is what this period charges; otherwise the first order's lines
 * or one line of the charged amount (renewalFeeInputs).
 */
function feeInputs(initial: Order | undefined, s: Subscription, charged: number, untaxed: number): LineInput[] {
  const quantity = s.quantity ?? 1;
  // `untaxed` is the fee before exclusive tax (the same as `charged` without it).
  if (charged === s.amountCents && quantity >= 1 && untaxed % quantity === 0) {
    return [{ kind: 'PRICE', description: s.productName, productId: s.productId, priceId: s.priceId, quantity, unitAmount: String(untaxed / quantity) }];
  }
  return renewalFeeInputs(initial, s.productName, untaxed, { productId: s.productId, priceId: s.priceId });
}

export async function renewalOrder(
  stores: CommerceStores,
  s: Subscription,
  period: number,
  paid: boolean,
  /** The payment; `amountCents` what the processor's invoice charged, when not the subscription's amount (a price changed in Stripe). */
  payment: { processorPaymentId: string | null; processorStatus: string | null; amountCents?: number },
  now: Date,
  /** The closing period's USAGE lines (src/commerce/metered-billing.ts), charged with the new period's fee. */
  usage: readonly LineInput[] = [],
  /**
   * `fee: false`: the last usage of an ending subscription, no new period's fee. `priced`: lines
   * already priced with the subscription's tax and coupon (a plan change's quote, changePricing).
   * `discount: false`: no coupon (a processor's invoice of an amount Kassa's lines do not give:
   * one line of it). `discountAmount`: the DISCOUNT the processor's invoice took off (Stripe's
   * `total_discount_amounts`), as one DISCOUNT line named after the checkout's coupon, instead of
   * Kassa's own computation (none when 0). `processorTaxes`: the tax the processor's invoice
   * collected per rate (Stripe's `total_taxes`): `charged` is then the fee before exclusive tax
   * (Stripe's line amount) and the TAX lines are those amounts, not Kassa's once-rounded ones
   * (src/commerce/tax.ts processorTaxInputs; docs/tax.md).
   */
  options: { fee?: boolean; priced?: PricedPeriod; discount?: boolean; discountAmount?: number; processorTaxes?: readonly ProcessorTaxAmount[] } = {},
): Promise<Order> {
  const initial = await stores.orders.find(s.orgId, s.initialOrderId);
  const charged = payment.amountCents ?? s.amountCents;
  // A renewal carries the first order's tax (issue 39): the same rates (or reverse charge) on the
  // period's fee and usage less the coupon's DISCOUNT (while it lasts): charges → DISCOUNT → TAX on
  // the discounted amount (src/commerce/tax.ts). `charged` is the subscription's amount: the fee
  // before any discount, exclusive tax included; the fee is found before that tax. An amount that
  // no untaxed fee taxes to exactly (a price changed at the processor) is one untaxed line of that
  // amount, as before tax existed.
  const foundTax = taxContextOfLines(initial?.lines);
  const net = options.processorTaxes ? charged : untaxedAmount(charged, foundTax);
  const tax = net === null ? null : foundTax;
  const fee = options.fee === false ? [] : feeInputs(initial, s, charged, net ?? charged);
  const charges = [...fee, ...usage];
  const discount =
    options.discount === false || options.priced
      ? []
      : options.discountAmount !== undefined
        ? await processorDiscountInputs(stores, s, initial, options.discountAmount)
        : await renewalDiscountInputs(stores, s, initial, period, charges);
  const priced = options.priced ?? (options.processorTaxes ? processorPriced([...charges, ...discount], tax, options.processorTaxes) : priceWithTax([...charges, ...discount], tax));
  return {
    id: newId('ORD'),
    orgId: s.orgId,
    status: paid ? 'PAID' : 'FAILED',
    provider: 'STRIPE',
    amountCents: priced.total,
    lines: priced.lines,
    amountRefundedCents: 0,
    currency: s.currency,
    customerId: s.customerId,
    customerEmail: s.customerEmail,
    productId: s.productId,
    productName: s.productName,
    paymentLinkId: initial?.paymentLinkId ?? null,
    checkoutSessionId: null,
    subscriptionId: s.id,
    originalOrderId: s.initialOrderId,
    // Renewals inherit the correlation values of the initial order.
    merchantReference: initial?.merchantReference ?? null,
    merchantMetadata: initial?.merchantMetadata ?? null,
    note: null,
    disputed: false,
    settledAvailableOn: paid ? new Date(now.getTime() + CARD_SETTLEMENT_DELAY_MS) : null,
    chain: null,
    fromAddress: null,
    txHash: null,
    processorPaymentId: payment.processorPaymentId,
    processorStatus: payment.processorStatus,
    paymentMethod: s.paymentMethod,
    billingPeriod: period,
    createdAt: now,
    updatedAt: now,
  };
}

/**
 * The DISCOUNT line of a renewal (issue 39): the coupon of the checkout that started the
 * subscription, while its duration covers this period (counted from the first period that charges
 * the fee: period 1 after a free trial). None for a subscription started without one.
 */
/**
 * Whether `period` is the first period after the checkout's coupon ended (REPEATING or ONCE): the
 * renewal that bills it announces `subscription.discount_ended` (issue 39).
 */
export async function discountEndsBefore(stores: CommerceStores, s: Subscription, period: number): Promise<boolean> {
  const session = s.checkoutSessionId ? await stores.sessions.find(s.orgId, s.checkoutSessionId) : undefined;
  const discount = session?.pricing.discount;
  if (!discount) return false;
  const last = lastDiscountedPeriod(discount, session.pricing.trialDays ? 1 : 0);
  return last !== null && period === last + 1;
}

/**
 * What a plan change's order carries besides its PRORATION lines (src/commerce/plan-change.ts): the
 * first order's tax, as a renewal carries it, and the checkout's coupon while it covers the current
 * period (`periodNumber`). The quote prices its lines with this, and the change charges those lines.
 */
export async function changePricing(stores: CommerceStores, s: Subscription): Promise<ChangePricing> {
  const initial = await stores.orders.find(s.orgId, s.initialOrderId);
  const tax = taxContextOfLines(initial?.lines);
  const sessionId = initial?.checkoutSessionId ?? s.checkoutSessionId;
  const session = sessionId ? await stores.sessions.find(s.orgId, sessionId) : undefined;
  const discount = session?.pricing.discount;
  const firstCharged = session?.pricing.trialDays ? 1 : 0;
  if (s.processorSubscriptionId) return { tax, discount: () => [], perLine: discount ? processorProrationDiscount(s, discount, firstCharged) : { discount: null } };
  const covers = discount ? discountCovers(discount, s.periodNumber, firstCharged) : false;
  return { tax, discount: (charges) => (covers ? discountInputs(discount, charges) : []) };
}

/**
 * The DISCOUNT line of a processor's invoice (Stripe's `total_discount_amounts`): the amount it took
 * off, described as the checkout's coupon (the Stripe coupon is made from it), or plainly
 * "Discount" for one Kassa does not know (added in the processor's dashboard).
 */
async function processorDiscountInputs(stores: CommerceStores, s: Subscription, initial: Order | undefined, amount: number): Promise<LineInput[]> {
  if (amount <= 0) return [];
  const sessionId = initial?.checkoutSessionId ?? s.checkoutSessionId;
  const session = sessionId ? await stores.sessions.find(s.orgId, sessionId) : undefined;
  const discount = session?.pricing.discount;
  return [{ kind: 'DISCOUNT', description: discount ? discountDescription(discount) : 'Discount', amount }];
}

async function renewalDiscountInputs(stores: CommerceStores, s: Subscription, initial: Order | undefined, period: number, charges: readonly LineInput[]): Promise<LineInput[]> {
  const sessionId = initial?.checkoutSessionId ?? s.checkoutSessionId;
  if (!sessionId) return [];
  const session = await stores.sessions.find(s.orgId, sessionId);
  const discount = session?.pricing.discount;
  if (!discount) return [];
  const firstCharged = session.pricing.trialDays ? 1 : 0;
  return discountCovers(discount, period, firstCharged) ? discountInputs(discount, charges) : [];
}

/**
 * The coupon of a plan change's proration on the Stripe rail (issue 39), by how Stripe's
 * subscription discount stands during the current period (processorDiscountDuring):
 * - a percent coupon lasting the whole period: Stripe reflects it in its proration lines, and
 *   Kassa quotes that (processorProrationOrderLines);
 * - ended (`none`): no discount, Stripe's proration as it is;
 * - an amount-off coupon (Stripe does not document how an amount off is spread over proration
 *   lines) or a discount ending inside the period (Stripe would reflect it or not depending on the
 *   second): Kassa prorates the change itself, by its own rule (the coupon's DISCOUNT while it
 *   covers the period, as on the sandbox), and tells Stripe the exact amounts as invoice items
 *   (`explicit`, explicitProrationOrderLines), so what Stripe collects is Kassa's quote by construction.
 */
function processorProrationDiscount(s: Subscription, discount: AppliedDiscount, firstCharged: number): NonNullable<ChangePricing['perLine']> {
  const months = s.billingInterval === 'MONTH' ? s.billingIntervalCount : s.billingInterval === 'YEAR' ? 12 * s.billingIntervalCount : null;
  const during = processorDiscountDuring(discount, s.periodNumber, firstCharged, months);
  if (during === 'none') return { discount: null };
  if (during === 'part' || discount.percentOff === null) return { discount: discountCovers(discount, s.periodNumber, firstCharged) ? discount : null, explicit: true };
  return { discount };
}

/**
 * Lines priced with the tax the processor collected (processorTaxInputs). Should the processor have
 * charged a rate Kassa's tax does not hold, the TAX lines are left out and the total then misses
 * the charge: the caller (processor-billing.ts invoiceOrder) makes one line of the charged amount.
 */
function processorPriced(inputs: readonly LineInput[], tax: ReturnType<typeof taxContextOfLines>, collected: readonly ProcessorTaxAmount[]): PricedPeriod {
  const own = inputs.filter((l) => l.kind !== 'TAX');
  const beforeTax = pricePeriod(own.filter((l) => l.kind !== 'CREDIT'));
  return pricePeriod([...own, ...(processorTaxInputs(tax, beforeTax.total, collected) ?? [])]);
}
