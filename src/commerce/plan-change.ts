/**
 * Plan and seat changes of a subscription (issue 39, item 3): which prices a subscription may move
 * to, when the change takes effect, and what it charges now — one quote used by the preview and,
 * under the subscription's row lock, by the change itself (so a preview and the change made from
 * it at the same `prorationDate` are the same lines). The proration arithmetic is proration.ts.
 *
 * Decisions (also in openapi/merchant.yaml `changeSubscription` and docs/plan-changes.md):
 *  - upgrades and same-amount changes take effect at once, prorated and charged now (Stripe's
 *    `create_prorations` invoiced at once, `always_invoice`);
 *  - downgrades (a lower recurring amount) take effect at the period's end, unprorated, by default;
 *    `IMMEDIATE` prorates them at once and carries the credit to the customer's balance, which
 *    the next renewals draw (downgradeOrderLines; on Stripe, Stripe's customer balance, mirrored:
 *    processorDowngradeOrderLines);
 *  - during a free trial nothing was paid, so a change applies at once without proration;
 *  - metered components are billed in arrears at the renewal, split at the change's second
 *    (metered-plan-change.ts): the quote says so (`metered`) and charges the fee's proration only.
 */
import { conflict, validationError } from '../kernel/errors.js';
import type { Subscription, ScheduledPlanChange } from './model.js';
import { amountLine, type LineInput, type PricedLine } from './pricing.js';
import { APPLIED_BALANCE_DESCRIPTION, downgradeOrderLines, explicitProrationOrderLines, processorDowngradeOrderLines, processorProrationOrderLines, prorate, prorationOrderLines, type ProcessorInvoiceItem, type ProrationInput } from './proration.js';
import type { AppliedDiscount } from './discounts.js';
import { priceWithTax, untaxedAmount, type TaxContext } from './tax.js';
import type { BillingInterval } from './billing-period.js';

/** A catalog price as a plan change sees it (read through the catalog module at composition). */
export interface PlanPrice {
  priceId: string;
  productId: string;
  productName: string;
  /** The price's own name (`pricingName`, Stripe's nickname): tells two prices of one product apart where a buyer chooses. */
  priceName?: string;
  unitAmount: number;
  currency: string;
  pricingType: 'ONE_TIME' | 'SUBSCRIPTION';
  billingInterval: BillingInterval | null;
  billingIntervalCount: number;
  provider: string;
  active: boolean;
  flexibleAmount: boolean;
  metered: boolean;
}

export interface PlanCatalog {
  findPrice(orgId: string, priceId: string): Promise<PlanPrice | undefined>;
}

export type ChangeEffective = 'IMMEDIATE' | 'PERIOD_END';

export interface PlanChangeRequest {
  priceId?: string;
  quantity?: number;
  effective?: ChangeEffective;
  prorationDate?: Date;
  expectedAmountDueCents?: number;
  /** The preview's `balanceCreditCents` (an immediate downgrade's credit); 409 when the change would credit anything else. */
  expectedBalanceCreditCents?: number;
}

/**
 * What the subscription's orders carry besides the fee (read by the caller from its first order and
 * checkout session): the first order's tax, and its coupon's DISCOUNT while the coupon covers the
 * current period — the same chain as a renewal (charges → DISCOUNT → TAX, src/commerce/tax.ts).
 */
export interface ChangePricing {
  tax: TaxContext | null;
  /** The coupon's DISCOUNT inputs for the current period's charges; empty when no coupon covers it. */
  discount(charges: readonly LineInput[]): LineInput[];
  /**
   * Set for a subscription a processor bills (Stripe): the change's order is the processor's
   * proration invoice, priced line by line (processorProrationOrderLines) — the percent coupon
   * Stripe's subscription discount reflects in the proration lines (null: none), the tax per line.
   * `explicit`: Kassa prorates the change itself and sends Stripe the amounts as invoice items
   * (explicitProrationOrderLines) — an amount-off coupon, or a coupon ending inside the period;
   * `discount` is then the coupon Kassa's own rule applies (null: none).
   */
  perLine?: { discount: AppliedDiscount | null; refusal?: string; explicit?: boolean };
}

export const UNTAXED_PRICING: ChangePricing = { tax: null, discount: () => [] };

/** Who may move the subscription where: the merchant (any eligible price) or a portal buyer (the listed prices, seats if allowed). */
export interface PlanChangeScope {
  priceIds?: readonly string[];
  allowQuantity?: boolean;
}

export interface PlanSideQuote {
  priceId: string | null;
  productId: string | null;
  productName: string;
  /** The price's own name, when it has one (the portal's plan choices: "Keep Studio — Basic"). */
  priceName?: string;
  unitAmount: number;
  quantity: number;
  amount: number;
}

export interface PlanChangeQuote {
  subscriptionId: string;
  /** trial: applied now, nothing charged; immediate: applied now, `lines` charged; scheduled: at period end; unschedule: a scheduled change is dropped. */
  mode: 'trial' | 'immediate' | 'scheduled' | 'unschedule';
  effective: ChangeEffective;
  prorationDate: Date;
  periodStart: Date;
  periodEnd: Date;
  currency: string;
  from: PlanSideQuote;
  to: PlanSideQuote;
  /** The order charged now (PRORATION lines); empty when nothing is charged now. */
  lines: PricedLine[];
  amountDue: number;
  /**
   * An immediate downgrade (issue 39): what its order (total 0, `lines` ending with the BALANCE
   * line) adds to the customer's credit balance; absent or 0 otherwise.
   */
  balanceCredit?: number;
  /**
   * An immediate change that charges something, on the sandbox: what the customer's credit balance
   * pays of it (the CREDIT "Applied balance" line ending `lines`; `amountDue` is what is left for the
   * card). Absent or 0 otherwise (docs/plan-changes.md "Credit balance", "Where it is drawn").
   */
  appliedBalance?: number;
  /**
   * The subscription's stored amount after the change (`amountCents`): the new fee before any
   * coupon, with the first order's exclusive tax on it (docs/tax.md); `to.amount` without exclusive tax.
   */
  nextRenewalAmount: number;
  /**
   * Whether the price left and the price taken have metered components: their usage is not in
   * `amountDue` but billed in arrears at the renewal, split at `prorationDate` when the price changes
   * at once (metered-plan-change.ts). Absent on quotes stored before it (read: none).
   */
  metered?: { from: boolean; to: boolean };
  /**
   * Set when Kassa prorated the change itself on a processor's rail (ChangePricing.perLine.explicit):
   * the invoice items the processor is told to charge (credit, then the charge less the discount),
   * whose per-line tax gives `lines` and `amountDue`.
   */
  processorItems?: ProcessorInvoiceItem[];
}

/** How far back a preview's `prorationDate` is honoured. */
export const PRORATION_DATE_WINDOW_MS = 10 * 60_000;
export const MAX_SEATS = 10_000;

const wholeSecond = (d: Date) => new Date(Math.floor(d.getTime() / 1000) * 1000);

/**
 * The subscription's current side: unit × quantity of its fee (`fee`: the stored amount without its
 * exclusive tax, which is unit × quantity by construction).
 */
export function currentSide(s: Subscription, fee: number = s.amountCents): PlanSideQuote {
  const quantity = s.quantity >= 1 && fee % s.quantity === 0 ? s.quantity : 1;
  return { priceId: s.priceId, productId: s.productId, productName: s.productName, unitAmount: fee / quantity, quantity, amount: fee };
}

/** A fee as the subscription stores it: with the exclusive tax of its context (one PRICE line taxed by the one rule). */
function storedAmount(side: PlanSideQuote, tax: TaxContext | null): number {
  if (!tax) return side.amount;
  return priceWithTax([{ kind: 'PRICE', description: side.productName, quantity: side.quantity, unitAmount: String(side.unitAmount) }], tax).total;
}

/** The price a scheduled change names, applied at the renewal that starts the next period. */
export function applyScheduled(s: Subscription): Subscription {
  const c = s.scheduledChange;
  if (!c) return s;
  return { ...s, priceId: c.priceId, productId: c.productId, productName: c.productName, amountCents: c.amountCents, quantity: c.quantity, scheduledChange: null };
}

/**
 * `balance`: the customer's credit balance in the subscription's currency that an immediate change
 * charging something draws (the sandbox; on Stripe Stripe applies its own): min(balance, total) as
 * one CREDIT "Applied balance" line after the TAX lines, as a renewal draws it. The caller reads it
 * under the balance row's lock when the change is made, and draws exactly `appliedBalance`.
 */
export async function quotePlanChange(s: Subscription, request: PlanChangeRequest, catalog: PlanCatalog, now: Date, scope: PlanChangeScope = {}, pricing: ChangePricing = UNTAXED_PRICING, balance = 0): Promise<PlanChangeQuote> {
  if (request.priceId === undefined && request.quantity === undefined) throw validationError('Give priceId, quantity or both', { field: 'priceId' });
  if (request.quantity !== undefined && (!Number.isSafeInteger(request.quantity) || request.quantity < 1 || request.quantity > MAX_SEATS)) {
    throw validationError(`quantity must be an integer from 1 to ${MAX_SEATS}`, { field: 'quantity' });
  }
  if (s.status !== 'ACTIVE') throw conflict(`A ${s.status} subscription cannot change its plan`);
  if (s.failedAttempts > 0 || s.paymentAction) throw conflict('A renewal of this subscription is unpaid; its plan can change once it is paid');
  // Past the period's end the renewal is due (or, on Stripe, billed but not yet reported): a change
  // now would prorate nothing and the next period would be billed at the old price.
  if (now.getTime() >= s.currentPeriodEnd.getTime()) throw conflict('This subscription is renewing (its period has ended); change its plan once the renewal is recorded');
  if (scope.priceIds && request.priceId !== undefined && request.priceId !== s.priceId && !scope.priceIds.includes(request.priceId)) {
    throw validationError('This plan cannot be chosen here', { field: 'priceId' });
  }
  if (scope.priceIds && request.quantity !== undefined && request.quantity !== s.quantity && !scope.allowQuantity) throw validationError('The quantity cannot be changed here', { field: 'quantity' });

  // The stored amount carries exclusive tax (docs/tax.md): the side is its fee without it. An amount
  // no fee taxes to exactly (set at a processor) cannot be split into unit × quantity: refused.
  const fee = untaxedAmount(s.amountCents, pricing.tax);
  if (fee === null) throw conflict('The subscription’s amount does not match its tax rates, so its plan cannot change here');
  // Metered components bill usage in arrears at the renewal (metered-plan-change.ts): not refused.
  const current = s.priceId ? await catalog.findPrice(s.orgId, s.priceId) : undefined;
  const meteredFrom = Boolean(current?.metered);
  // The current price's own name too, so a buyer choosing between two prices of one product sees which one they keep.
  const from: PlanSideQuote = { ...currentSide(s, fee), ...(current?.priceName ? { priceName: current.priceName } : {}) };
  let meteredTo = meteredFrom;
  let to: PlanSideQuote;
  const quantity = request.quantity ?? from.quantity;
  if (request.priceId === undefined || request.priceId === s.priceId) {
    to = { ...from, quantity, amount: from.unitAmount * quantity };
  } else {
    const p = await catalog.findPrice(s.orgId, request.priceId);
    if (!p) throw validationError('priceId: no such price in this organization', { field: 'priceId' });
    const why = !p.active
      ? 'the price is inactive'
      : p.pricingType !== 'SUBSCRIPTION' || p.provider !== 'STRIPE'
        ? 'it is not a card subscription price'
        : p.currency.toUpperCase() !== s.currency.toUpperCase()
          ? `it is in ${p.currency}, the subscription in ${s.currency}`
          : p.billingInterval !== s.billingInterval || p.billingIntervalCount !== s.billingIntervalCount
            ? 'its billing interval differs from the subscription’s'
            : p.flexibleAmount
              ? 'it is a pay-what-you-want price'
              : undefined;
    if (why) throw validationError(`priceId: the subscription cannot move to this price: ${why}`, { field: 'priceId' });
    meteredTo = p.metered;
    to = { priceId: p.priceId, productId: p.productId, productName: p.productName, ...(p.priceName ? { priceName: p.priceName } : {}), unitAmount: p.unitAmount, quantity, amount: p.unitAmount * quantity };
  }
  if (!Number.isSafeInteger(to.amount)) throw validationError('quantity: the amount is too large', { field: 'quantity' });

  let at = wholeSecond(now);
  if (request.prorationDate) {
    const d = wholeSecond(request.prorationDate);
    // The period's bounds in whole seconds, as the proration counts them (proration.ts): a period
    // starting mid-second (00:00:00.250) begins at its second (00:00:00), so a preview in its first
    // second — whose prorationDate is that second — stays in the period.
    if (d.getTime() > now.getTime() || d.getTime() < now.getTime() - PRORATION_DATE_WINDOW_MS || d.getTime() < wholeSecond(s.currentPeriodStart).getTime() || d.getTime() >= s.currentPeriodEnd.getTime()) {
      throw validationError('prorationDate must be within the last 10 minutes and in the current period; preview again', { field: 'prorationDate' });
    }
    at = d;
  }
  const base = { subscriptionId: s.id, prorationDate: at, periodStart: s.currentPeriodStart, periodEnd: s.currentPeriodEnd, currency: s.currency, from, to, metered: { from: meteredFrom, to: meteredTo } };
  const same = to.priceId === from.priceId && to.quantity === from.quantity;
  let quote: PlanChangeQuote;
  if (same) {
    if (!s.scheduledChange) throw validationError('The subscription already has this price and quantity', { field: request.priceId !== undefined ? 'priceId' : 'quantity' });
    quote = { ...base, mode: 'unschedule', effective: 'IMMEDIATE', lines: [], amountDue: 0, nextRenewalAmount: s.amountCents };
  } else if (s.periodNumber === 0 && s.trialEnd && s.trialEnd.getTime() > at.getTime()) {
    quote = { ...base, mode: 'trial', effective: 'IMMEDIATE', lines: [], amountDue: 0, nextRenewalAmount: storedAmount(to, pricing.tax) };
  } else {
    const downgrade = to.amount < from.amount;
    const effective = request.effective ?? (downgrade ? 'PERIOD_END' : 'IMMEDIATE');
    // On Stripe Kassa prorates a downgrade as Stripe does (processorDowngradeOrderLines); a coupon Kassa
    // would prorate itself (amount off, ending inside the period) has no credit rule on Stripe yet.
    if (downgrade && effective === 'IMMEDIATE' && pricing.perLine && (pricing.perLine.explicit || pricing.perLine.refusal)) {
      throw conflict('An immediate downgrade of a subscription Stripe bills with an amount-off coupon, or a coupon ending inside this period, is not supported yet; use effective PERIOD_END');
    }
    if (effective === 'PERIOD_END') {
      quote = { ...base, mode: 'scheduled', effective, lines: [], amountDue: 0, nextRenewalAmount: storedAmount(to, pricing.tax) };
    } else {
      const input: ProrationInput = { from: { description: from.productName, unitAmount: from.unitAmount, quantity: from.quantity }, to: { description: to.productName, unitAmount: to.unitAmount, quantity: to.quantity }, periodStart: s.currentPeriodStart, periodEnd: s.currentPeriodEnd, at };
      const proration = prorate(input);
      if (proration.net < 0) {
        // An immediate downgrade: an order of 0 whose net goes to the customer's credit balance (downgradeOrderLines).
        const credited = pricing.perLine ? processorDowngradeOrderLines(input, proration, pricing.tax, pricing.perLine.discount) : downgradeOrderLines(proration, pricing);
        quote = { ...base, mode: 'immediate', effective, lines: credited.priced.lines, amountDue: 0, balanceCredit: credited.credit, nextRenewalAmount: storedAmount(to, pricing.tax) };
        return expectAmount(quote, request);
      }
      if (proration.net > 0 && pricing.perLine?.refusal) throw conflict(pricing.perLine.refusal);
      const explicit = proration.net > 0 && pricing.perLine?.explicit ? explicitProrationOrderLines(proration, pricing.tax, pricing.perLine.discount) : undefined;
      const priced = explicit?.priced ?? (proration.net > 0 ? (pricing.perLine ? processorProrationOrderLines(input, proration, pricing.tax, pricing.perLine.discount) : prorationOrderLines(proration, pricing)) : undefined);
      quote = { ...base, mode: 'immediate', effective, lines: priced?.lines ?? [], amountDue: priced?.total ?? 0, nextRenewalAmount: storedAmount(to, pricing.tax), ...(explicit && { processorItems: explicit.items }) };
      if (!pricing.perLine) quote = withAppliedBalance(quote, balance);
    }
  }
  return expectAmount(quote, request);
}

/** The quote with the customer's credit balance paying what it can of its total (a last CREDIT line; never below 0). */
function withAppliedBalance(quote: PlanChangeQuote, balance: number): PlanChangeQuote {
  const drawn = Math.min(Math.max(0, balance), quote.amountDue);
  if (drawn <= 0) return quote;
  return { ...quote, lines: [...quote.lines, amountLine('CREDIT', APPLIED_BALANCE_DESCRIPTION, -drawn)], amountDue: quote.amountDue - drawn, appliedBalance: drawn };
}

/** `expectedAmountDueCents` (the preview's amount due) and, for a downgrade, `expectedBalanceCreditCents` must match the quote: else 409, nothing changed. */
function expectAmount(quote: PlanChangeQuote, request: PlanChangeRequest): PlanChangeQuote {
  if (request.expectedAmountDueCents !== undefined && request.expectedAmountDueCents !== quote.amountDue) {
    throw conflict(`The subscription changed since the preview: this change now costs ${quote.amountDue} (not ${request.expectedAmountDueCents}); nothing was charged. Preview again.`);
  }
  if (request.expectedBalanceCreditCents !== undefined && request.expectedBalanceCreditCents !== (quote.balanceCredit ?? 0)) {
    throw conflict(`The subscription changed since the preview: this change now credits ${quote.balanceCredit ?? 0} (not ${request.expectedBalanceCreditCents}) to the balance; nothing was changed. Preview again.`);
  }
  return quote;
}

/** The subscription as the quote leaves it (without the proration order: the caller charges and links it). */
export function changedSubscription(s: Subscription, q: PlanChangeQuote, now: Date): Subscription {
  switch (q.mode) {
    case 'unschedule':
      return { ...s, scheduledChange: null, updatedAt: now };
    case 'scheduled': {
      const change: ScheduledPlanChange = { priceId: q.to.priceId, productId: q.to.productId, productName: q.to.productName, amountCents: q.nextRenewalAmount, quantity: q.to.quantity, requestedAt: now };
      return { ...s, scheduledChange: change, updatedAt: now };
    }
    case 'trial':
    case 'immediate':
      return { ...s, priceId: q.to.priceId, productId: q.to.productId, productName: q.to.productName, amountCents: q.nextRenewalAmount, quantity: q.to.quantity, scheduledChange: null, updatedAt: now };
  }
}
