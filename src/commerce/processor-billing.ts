/**
 * Subscriptions whose renewals a processor's billing runs (Stripe Billing): what the processor
 * reports — a renewal invoice paid or failed, the subscription's state now — applied to Kassa's
 * subscription under its row lock, with conditional writes and the outbox, like PaymentFlow does
 * for checkout results. The first order and the subscription itself come from PaymentFlow
 * (applyPaymentResult with `processorSubscription`). Safe to repeat and to reorder.
 */
import type { Clock } from '../kernel/clock.js';
import { addIntervals } from './billing-period.js';
import type { Order, Subscription } from './model.js';
import { presentWebhookOrder } from './order.presenter.js';
import { CARD_SETTLEMENT_DELAY_MS, changePricing, discountEndsBefore, renewalOrder } from './renewal-order.js';
import { amountLine, pricePeriod, type LineInput, type PricedPeriod } from './pricing.js';
import { APPLIED_BALANCE_DESCRIPTION, BALANCE_LINE_DESCRIPTION, negatedPeriod } from './proration.js';
import { perLineTaxInputs, priceWithTax, taxContextOfLines, type ProcessorTaxAmount } from './tax.js';
import { assertWritten, type CommerceStores, type CommerceUnitOfWork } from './stores.js';
import { applyScheduled } from './plan-change.js';
import { presentWebhookSubscription } from './subscription.presenter.js';

/** What the processor's billing says of one subscription now. */
export interface ProcessorSubscriptionState {
  /** INCOMPLETE: its first payment has not gone through (nothing to apply yet). */
  status: 'ACTIVE' | 'PAUSED' | 'CANCELED' | 'ENDED' | 'EXPIRED' | 'INCOMPLETE';
  cancelAtPeriodEnd: boolean;
  canceledAt: Date | null;
  endedAt: Date | null;
  /** The processor's one item (its price and seats), when it has exactly one: see applyProcessorItem. */
  item?: ProcessorItem;
}

/** The price and quantity on a processor subscription's one item (Stripe's `items.data[0]`). */
export interface ProcessorItem {
  /** The processor's price (Stripe `price_…`). */
  processorPriceId: string;
  quantity: number;
  /** The price's unit amount in minor units; null for a price without one (tiers, custom units). */
  unitAmount: number | null;
}

/** One renewal invoice of a processor-billed subscription, as the processor has it now. */
export interface ProcessorRenewal {
  processorSubscriptionId: string;
  outcome: 'paid' | 'failed';
  /** The billing period the invoice pays for. */
  periodStart: Date;
  periodEnd: Date;
  /** The payment (Stripe PaymentIntent) when known: refunds go through it. */
  processorPaymentId: string | null;
  /** That payment's status as the processor reports it (Stripe's PaymentIntent status). */
  processorStatus: string | null;
  /** What the invoice charges (or charged): the subscription's amount unless its price was changed in the processor. */
  amountCents: number;
  /** Payment attempts made so far (Stripe's dunning). */
  attemptCount: number;
  /** The processor's invoice (Stripe `in_…`): paid, it clears a payment action waiting on it. */
  invoiceId?: string;
  /**
   * A metered subscription's closing usage that Kassa added to the invoice (processor-usage.ts):
   * the order's USAGE lines, next to the fee line of `feeCents` (the invoice's subscription line).
   */
  usage?: readonly LineInput[];
  feeCents?: number;
  /**
   * What the processor's invoice took off for its discount (Stripe's `total_discount_amounts`,
   * the sum of its lines' `discount_amounts`): with `usage`, the order's DISCOUNT line is this
   * amount, whatever per-line rounding the processor used (docs/discounts.md).
   */
  discountCents?: number;
  /**
   * With `usage`: the tax the processor's invoice collected per rate (Stripe's `total_taxes`, each
   * line's tax rounded half up and summed): the order's TAX lines are these amounts and
   * `feeCents` is the fee before exclusive tax (docs/tax.md, "Usage invoices on Stripe").
   */
  taxes?: readonly ProcessorTaxAmount[];
  /** How the invoice moved the processor customer's balance (ProcessorBalance); absent: not at all. */
  balance?: ProcessorBalance;
}

/**
 * How an invoice moved its processor customer's balance (issue 39; Stripe's `ending_balance −
 * starting_balance`, a credit being below 0): `move` > 0 the invoice drew that much credit
 * (`amount_due` = total − move), < 0 its total was below 0 and the credit went to the balance
 * (`amount_due` 0). So the invoice's total is the amount charged (or due) + `move`.
 */
export interface ProcessorBalance {
  /** The processor's customer (Stripe `cus_…`), whose balance it is. */
  processorCustomerId: string;
  move: number;
  invoiceId: string | null;
  /**
   * Of `move`, a debit the invoice collected (> 0; Stripe's `starting_balance` above 0, an earlier
   * invoice's amount below the minimum charge): `move` = the credit part − `debit`. Not mirrored.
   */
  debit?: number;
  /**
   * A paid invoice whose amount due was below the processor's minimum charge (> 0): marked paid
   * with nothing charged, the amount due carried to the next invoice as a debit. The invoice's
   * total is then the amount charged + `move` + `carried`.
   */
  carried?: number;
}

/** The total of an invoice whose amount charged is `charged` (issue 39): + the credit it drew (or − the credit it added) + what it carried to the next invoice. */
export const invoiceTotalOf = (charged: number, balance: ProcessorBalance | undefined): number => charged + (balance?.move ?? 0) + (balance?.carried ?? 0);

export const MINIMUM_CARRIED_DESCRIPTION = 'Carried to the next invoice (below Stripe’s minimum charge)';
export const MINIMUM_DEBIT_DESCRIPTION = 'Balance from an earlier invoice (below Stripe’s minimum charge)';

/** A renewal the buyer must complete on the processor's page (Stripe's `invoice.payment_action_required`). */
export interface ProcessorActionRequired {
  processorSubscriptionId: string;
  invoiceId: string;
  /** The processor's hosted page for that invoice (Stripe's `hosted_invoice_url`). */
  url: string;
}

/**
 * A paid invoice of a processor-billed subscription that is not one of its billing periods: a
 * proration after a plan or quantity change made in the processor (Stripe's `subscription_update`),
 * or an invoice made by hand for the subscription (`manual`). A proration comes from Kassa's plan
 * change (SubscriptionService.changePlan, which writes its order at once) or from the processor's
 * dashboard; either is revenue, so each becomes an order.
 */
export interface ProcessorExtraInvoice {
  processorSubscriptionId: string;
  /** The payment (Stripe PaymentIntent), or the invoice itself when it was paid without one: one order per value. */
  processorPaymentId: string;
  processorStatus: string | null;
  amountCents: number;
  /** The final usage Kassa invoiced at a cancel-now (processor-usage.ts): the order's USAGE lines, no fee. */
  usage?: readonly LineInput[];
  /** With `usage`: what the processor's invoice took off for a discount (ProcessorRenewal.discountCents). */
  discountCents?: number;
  /** With `usage`: the tax the processor's invoice collected per rate (ProcessorRenewal.taxes). */
  taxes?: readonly ProcessorTaxAmount[];
  /**
   * A plan or seat change's proration (issue 39): the invoice's proration lines as the processor
   * computed them (Stripe's "Unused time …" credit and "Remaining time …" charge), the order's
   * PRORATION lines when they add up to what was charged.
   */
  prorations?: readonly LineInput[];
  /** The proration lines are the invoice items Kassa sent (Kassa prorated the change itself): its quote's lines stand as written. */
  kassaItems?: boolean;
  /** The processor's invoice (Stripe `in_…`), when known. */
  invoiceId?: string;
  /** How the invoice moved the processor customer's balance (ProcessorBalance). */
  balance?: ProcessorBalance;
}

export type BillingApplied = 'applied' | 'unchanged' | 'unknown';

const TERMINAL: ReadonlySet<Subscription['status']> = new Set(['CANCELED', 'ENDED', 'EXPIRED']);

/**
 * Writes the processor's state onto a subscription locked by the caller. Terminal states never
 * move back (a late `active` after `canceled` changes nothing); an unchanged state writes nothing.
 */
export async function applyProcessorState(stores: CommerceStores, s: Subscription, state: ProcessorSubscriptionState, now: Date): Promise<Subscription> {
  if (TERMINAL.has(s.status) || state.status === 'INCOMPLETE') return s;
  const status = state.status;
  const next: Subscription = {
    ...s,
    status,
    cancelAtPeriodEnd: state.cancelAtPeriodEnd,
    canceledAt: status === 'CANCELED' || status === 'ENDED' || state.cancelAtPeriodEnd ? (state.canceledAt ?? s.canceledAt ?? now) : null,
    pausedAt: status === 'PAUSED' ? (s.pausedAt ?? now) : null,
    endedAt: TERMINAL.has(status) ? (state.endedAt ?? now) : null,
    // An ended subscription has nothing left for the buyer to pay.
    paymentAction: TERMINAL.has(status) ? null : s.paymentAction,
  };
  const same =
    next.status === s.status &&
    next.cancelAtPeriodEnd === s.cancelAtPeriodEnd &&
    next.canceledAt?.getTime() === s.canceledAt?.getTime() &&
    next.pausedAt?.getTime() === s.pausedAt?.getTime() &&
    next.endedAt?.getTime() === s.endedAt?.getTime();
  if (same) return s;
  const written: Subscription = { ...next, updatedAt: now };
  assertWritten(await stores.subscriptions.update(written, s.status), 'subscription');
  const type = status === 'EXPIRED' ? 'subscription.expired' : TERMINAL.has(status) ? 'subscription.ended' : 'subscription.updated';
  await stores.emit({ orgId: s.orgId, type, data: { subscription: presentWebhookSubscription(written) }, previous: { cancelAtPeriodEnd: s.cancelAtPeriodEnd } }, now);
  return written;
}

/**
 * A plan or seat change made in the processor (issue 39: the Stripe Dashboard), read from its item
 * on a subscription locked by the caller, as it is now (the caller read it back under the lock, so
 * an older or repeated event reads the same current item and changes nothing):
 * - the item is the plan Kassa holds (the scheduled change's, once one is scheduled: the processor's
 *   item already has it) — Kassa's own change, already applied, or nothing changed: nothing is
 *   written (a mismatch flag set before is cleared);
 * - the item's price is one Kassa made (`processorPrices`) for another plan, and/or its quantity
 *   differs: the subscription takes that plan and quantity now — `amountCents` is the item's unit
 *   amount × quantity with the first order's tax, as Kassa's own change computes it — a scheduled
 *   change is dropped (the processor's item no longer holds it), and `subscription.updated` is sent
 *   with the plan before (the buyer's "plan changed" e-mail). What the processor charged for the
 *   change arrives as its own invoice (ProcessorExtraInvoice: Stripe's proration lines);
 * - the item's price is one Kassa did not make: no catalog price is invented; the plan stays, the
 *   subscription is flagged (`processorMismatch`, `subscription.updated` once per price read).
 * A subscription started before Kassa recorded its processor prices adopts the item's price as the
 * plan it holds at its first read.
 */
export async function applyProcessorItem(stores: CommerceStores, s: Subscription, item: ProcessorItem, now: Date): Promise<Subscription> {
  if (TERMINAL.has(s.status)) return s;
  const held = s.scheduledChange ?? s;
  let prices = s.processorPrices ?? {};
  if (Object.keys(prices).length === 0) prices = { [item.processorPriceId]: { priceId: held.priceId, productId: held.productId, productName: held.productName } };
  const plan = prices[item.processorPriceId];
  let next: Subscription;
  let previousPlan = false;
  if (!plan || item.unitAmount === null) {
    const same = s.processorMismatch?.processorPriceId === item.processorPriceId && s.processorMismatch.quantity === item.quantity;
    if (same && prices === s.processorPrices) return s;
    next = { ...s, processorPrices: prices, processorMismatch: same ? s.processorMismatch : { reason: 'UNKNOWN_PROCESSOR_PRICE', processorPriceId: item.processorPriceId, quantity: item.quantity, detectedAt: now } };
  } else if (plan.priceId === held.priceId && item.quantity === held.quantity) {
    if (!s.processorMismatch && prices === s.processorPrices) return s;
    next = { ...s, processorPrices: prices, processorMismatch: null };
  } else {
    const { tax } = await changePricing(stores, s);
    const fee = item.unitAmount * item.quantity;
    if (!Number.isSafeInteger(fee)) return s;
    const amountCents = tax ? priceWithTax([{ kind: 'PRICE', description: plan.productName, quantity: item.quantity, unitAmount: String(item.unitAmount) }], tax).total : fee;
    next = { ...s, priceId: plan.priceId, productId: plan.productId, productName: plan.productName, quantity: item.quantity, amountCents, scheduledChange: null, processorPrices: prices, processorMismatch: null };
    previousPlan = true;
  }
  const written: Subscription = { ...next, updatedAt: now };
  assertWritten(await stores.subscriptions.update(written, s.status), 'subscription');
  // The adoption alone (a subscription from before the mapping) is bookkeeping: no event.
  const visible = previousPlan || (s.processorMismatch ?? null) !== (written.processorMismatch ?? null);
  if (visible) {
    await stores.emit(
      {
        orgId: s.orgId,
        type: 'subscription.updated',
        data: { subscription: presentWebhookSubscription(written) },
        previous: { cancelAtPeriodEnd: s.cancelAtPeriodEnd, ...(previousPlan && { plan: { priceId: s.priceId, productName: s.productName, quantity: s.quantity, amountCents: s.amountCents } }) },
      },
      now,
    );
  }
  return written;
}

export class ProcessorBillingFlow {
  constructor(
    private readonly uow: CommerceUnitOfWork,
    private readonly clock: Clock,
  ) {}

  /**
   * Reads the processor's state with the subscription row locked and applies it, so of two
   * concurrent syncs the later one reads (and writes) the newer state. `unknown`: no Kassa
   * subscription has this processor id (yet).
   */
  sync(processorSubscriptionId: string, read: () => Promise<ProcessorSubscriptionState>): Promise<BillingApplied> {
    return this.uow.transaction(async (stores) => {
      const s = await this.lockByProcessorId(stores, processorSubscriptionId);
      if (!s) return 'unknown';
      const state = await read();
      const now = this.clock.now();
      const applied = await applyProcessorState(stores, s, state, now);
      // A plan change paid and waiting for its item update (issue 39): the item is Kassa's to set;
      // one already updated whose answer was lost is taken when the change is applied, never as a
      // change made in the Dashboard.
      const waiting = state.item ? await stores.planChanges.find(s.id) : undefined;
      const planned = state.item && !(waiting && !waiting.appliedAt) ? await applyProcessorItem(stores, applied, state.item, now) : applied;
      return planned === s ? 'unchanged' : 'applied';
    });
  }

  /**
   * A renewal invoice paid or failed. One order per billing period (a unique index), whichever
   * invoice event arrives, how often and in which order: `paid` makes it PAID (`order.paid`) and
   * moves the paid-through period forward (`subscription.updated`); `failed` records a FAILED
   * order (`order.failed`, once) and the dunning attempt count. A later `paid` turns a FAILED
   * order PAID, as Kassa's own dunning does.
   */
  applyRenewal(renewal: ProcessorRenewal): Promise<BillingApplied> {
    return this.uow.transaction(async (stores) => {
      const s = await this.lockByProcessorId(stores, renewal.processorSubscriptionId);
      if (!s) return 'unknown';
      const now = this.clock.now();
      let period = periodNumberOf(s, renewal.periodStart);
      // The processor moved the billing cycle (an anchor reset in the Stripe Dashboard): a later
      // period is the next one, and periods are counted from its start from now on.
      const reanchored = period === undefined && renewal.periodEnd.getTime() > s.currentPeriodEnd.getTime();
      if (reanchored) period = s.periodNumber + 1;
      if (period === undefined || period < 1) return 'unchanged';
      const existing = await stores.orders.findSubscriptionPeriod(s.id, period);
      const paid = renewal.outcome === 'paid';
      // A plan change scheduled for the period's end (a downgrade, issue 39; the processor's item
      // already has the new price) is the plan of the periods after it.
      const planned = period > s.periodNumber ? applyScheduled(s) : s;
      let order = existing;
      let changed = false;
      if (!existing) {
        // The order is priced for the invoice's total (what was charged + the credit it drew), then the balance line.
        const total = invoiceTotalOf(renewal.amountCents, renewal.balance);
        order = withBalanceLine(await invoiceOrder(stores, planned, period, paid, { ...renewal, amountCents: total }, now, renewal.usage, renewal.feeCents, renewal.discountCents, renewal.taxes), renewal.balance);
        await stores.orders.insert(order);
        await recordBalanceMove(stores, s, order, renewal.balance, now);
        await stores.emit({ orgId: s.orgId, type: paid ? 'order.paid' : 'order.failed', data: { order: presentWebhookOrder(order, { subscription: s }) } }, now);
        changed = true;
      } else if (paid && (existing.status === 'FAILED' || existing.status === 'PENDING')) {
        order = {
          ...existing,
          status: 'PAID',
          processorPaymentId: renewal.processorPaymentId ?? existing.processorPaymentId,
          processorStatus: renewal.processorStatus ?? existing.processorStatus,
          settledAvailableOn: new Date(now.getTime() + CARD_SETTLEMENT_DELAY_MS),
          updatedAt: now,
        };
        assertWritten(await stores.orders.update(order, existing.status), 'order');
        await stores.emit({ orgId: s.orgId, type: 'order.paid', data: { order: presentWebhookOrder(order, { subscription: s }) } }, now);
        changed = true;
      }

      let next: Subscription = s;
      // The invoice the buyer had to act on is paid (or a later period is): nothing waits for them any more.
      const actionDone = paid && s.paymentAction !== null && (renewal.invoiceId === s.paymentAction.invoiceId || renewal.periodEnd.getTime() > s.currentPeriodEnd.getTime());
      if (paid && renewal.periodEnd.getTime() > s.currentPeriodEnd.getTime() && !TERMINAL.has(s.status)) {
        next = {
          ...planned,
          periodNumber: period,
          currentPeriodStart: renewal.periodStart,
          currentPeriodEnd: renewal.periodEnd,
          nextActionAt: renewal.periodEnd,
          latestOrderId: order!.id,
          failedAttempts: 0,
          paymentAction: null,
          ...(reanchored && { billingAnchor: renewal.periodStart, anchorPeriod: period }),
        };
      } else if (actionDone) {
        next = { ...s, paymentAction: null };
      } else if (!paid && existing?.status !== 'PAID' && period > s.periodNumber && renewal.attemptCount > s.failedAttempts) {
        next = { ...s, failedAttempts: renewal.attemptCount };
      }
      let current: Subscription = s;
      if (next !== s) {
        const written = { ...next, updatedAt: now };
        assertWritten(await stores.subscriptions.update(written, s.status), 'subscription');
        if (paid) await stores.emit({ orgId: s.orgId, type: 'subscription.updated', data: { subscription: presentWebhookSubscription(written) } }, now);
        current = written;
        changed = true;
      }
      // The period's order became PAID here (once per period): the first period after the
      // checkout's coupon ended announces it, as Kassa's own renewals do (issue 39).
      if (paid && changed && existing?.status !== 'PAID' && (await discountEndsBefore(stores, s, period))) {
        await stores.emit({ orgId: s.orgId, type: 'subscription.discount_ended', data: { subscription: presentWebhookSubscription(current) } }, now);
      }
      return changed ? 'applied' : 'unchanged';
    });
  }

  /**
   * A paid invoice outside the billing periods (ProcessorExtraInvoice): a PAID order for its
   * amount, linked to the subscription and its first order like a renewal but with no billing
   * period (`order.paid`). One order per payment, checked under the subscription's row lock, so
   * a repeated or concurrent event finds the order the first one made. The subscription's period
   * and amount are not changed (its renewals carry their own invoices' amounts).
   */
  applyExtraInvoice(invoice: ProcessorExtraInvoice): Promise<BillingApplied> {
    return this.uow.transaction(async (stores) => {
      const s = await this.lockByProcessorId(stores, invoice.processorSubscriptionId);
      if (!s) return 'unknown';
      return (await insertExtraInvoiceOrder(stores, s, invoice, this.clock.now())) ? 'applied' : 'unchanged';
    });
  }

  /**
   * A renewal invoice waits for the buyer (3-D Secure): the subscription records the invoice and
   * the processor's page for it and `subscription.action_required` is emitted, once per invoice.
   * It stays ACTIVE (the processor keeps retrying; the renewal order is FAILED until paid). Paid
   * (applyRenewal) or ended (applyProcessorState), the action is cleared.
   */
  applyActionRequired(action: ProcessorActionRequired): Promise<BillingApplied> {
    return this.uow.transaction(async (stores) => {
      const s = await this.lockByProcessorId(stores, action.processorSubscriptionId);
      if (!s) return 'unknown';
      if (TERMINAL.has(s.status) || (s.paymentAction?.invoiceId === action.invoiceId && s.paymentAction.url === action.url)) return 'unchanged';
      const now = this.clock.now();
      const written: Subscription = { ...s, paymentAction: { invoiceId: action.invoiceId, url: action.url, requiredAt: s.paymentAction?.invoiceId === action.invoiceId ? s.paymentAction.requiredAt : now }, updatedAt: now };
      assertWritten(await stores.subscriptions.update(written, s.status), 'subscription');
      await stores.emit({ orgId: s.orgId, type: 'subscription.action_required', data: { subscription: presentWebhookSubscription(written) } }, now);
      return 'applied';
    });
  }

  private async lockByProcessorId(stores: CommerceStores, processorSubscriptionId: string): Promise<Subscription | undefined> {
    const found = await stores.subscriptions.findByProcessorSubscription(processorSubscriptionId);
    return found && (await stores.subscriptions.lock(found.id));
  }
}

/**
 * The PAID order of a processor's invoice outside the billing periods (ProcessorExtraInvoice) and
 * its `order.paid`, written on a subscription the caller locked; undefined when the payment has
 * its order already (one order per payment: the plan change that made the invoice and the
 * invoice's `invoice.paid` write it once between them). A proration's order has the invoice's
 * proration lines as PRORATION lines when they add up to the amount paid; otherwise (an invoice
 * edited in the processor's dashboard) one line of that amount.
 */
export async function insertExtraInvoiceOrder(stores: CommerceStores, s: Subscription, charged: ProcessorExtraInvoice, now: Date, quotedWithBalance?: PricedPeriod): Promise<Order | undefined> {
  if (await stores.orders.findByProcessorPaymentId(charged.processorPaymentId)) return undefined;
  // Priced for the invoice's total (what was charged + the balance it moved); the balance line is added last.
  const invoice: ProcessorExtraInvoice = { ...charged, amountCents: invoiceTotalOf(charged.amountCents, charged.balance) };
  const quoted = quotedWithBalance && withoutBalanceLines(quotedWithBalance);
  const credit = invoice.amountCents < 0;
  let order: Order | undefined;
  if (quoted && invoice.prorations && invoice.prorations.length > 0 && quoted.total === invoice.amountCents) {
    // The plan change's quote (PRORATION, DISCOUNT, TAX priced as Stripe prices its invoice) when
    // Stripe collected exactly it: the order is the preview, with Stripe's descriptions of its proration lines.
    const stripeTexts = invoice.prorations.map((l) => l.description);
    let i = 0;
    const lines = invoice.kassaItems ? quoted.lines : quoted.lines.map((l) => (l.kind === 'PRORATION' ? { ...l, description: stripeTexts[i++] ?? l.description } : l));
    const own = await renewalOrder(stores, s, 0, true, { ...invoice, amountCents: 0 }, now, [], { fee: false, priced: { lines, total: quoted.total } });
    order = { ...own, billingPeriod: null };
  }
  if (!order && invoice.prorations && invoice.prorations.length > 0) {
    // Stripe's proration lines as Stripe taxed them: each rate per line, rounded per line (the
    // first order's rates; Stripe's lines already hold any discount): an invoice Kassa did not make
    // (a change in the Dashboard), or whose answer was lost.
    const initial = await stores.orders.find(s.orgId, s.initialOrderId);
    const amounts = invoice.prorations.map((l) => (l as { amount: number }).amount);
    // An invoice below 0 (a downgrade's credit) is priced as its opposite, then negated: a period's total is never below 0.
    const perLine = credit
      ? negatedPeriod(pricePeriod([...negatedInputs(invoice.prorations), ...perLineTaxInputs(taxContextOfLines(initial?.lines), amounts.map((a) => -a))]))
      : pricePeriod([...invoice.prorations, ...perLineTaxInputs(taxContextOfLines(initial?.lines), amounts)]);
    if (perLine.total === invoice.amountCents) {
      const own = await renewalOrder(stores, s, 0, true, { ...invoice, amountCents: 0 }, now, [], { fee: false, priced: perLine });
      order = { ...own, billingPeriod: null };
    }
  }
  if (!order && credit) {
    // Stripe's proration lines alone, or (an invoice edited in Stripe) one line of its total.
    const plain = invoice.prorations && invoice.prorations.length > 0 ? negatedPeriod(pricePeriod(negatedInputs(invoice.prorations))) : undefined;
    const priced = plain && plain.total === invoice.amountCents ? plain : { lines: [amountLine('PRORATION', 'Credit for a plan change', invoice.amountCents)], total: invoice.amountCents };
    order = { ...(await renewalOrder(stores, s, 0, true, { ...invoice, amountCents: 0 }, now, [], { fee: false, priced })), billingPeriod: null };
  }
  if (!order && invoice.prorations && invoice.prorations.length > 0) {
    const itemized = await renewalOrder(stores, s, 0, true, { ...invoice, amountCents: 0 }, now, invoice.prorations, { fee: false });
    if (itemized.amountCents === invoice.amountCents) order = { ...itemized, billingPeriod: null };
    else {
      // Without the first order's tax and coupon (the processor did not apply them to this invoice): the lines alone.
      const plain = pricePeriod(invoice.prorations);
      if (plain.total === invoice.amountCents) order = { ...itemized, amountCents: plain.total, lines: plain.lines, billingPeriod: null };
    }
  }
  order ??= { ...(await invoiceOrder(stores, s, 0, true, invoice, now, invoice.usage, 0, invoice.discountCents, invoice.taxes)), billingPeriod: null };
  order = withBalanceLine(order, charged.balance);
  await stores.orders.insert(order);
  await recordBalanceMove(stores, s, order, charged.balance, now);
  await stores.emit({ orgId: s.orgId, type: 'order.paid', data: { order: presentWebhookOrder(order, { subscription: s }) } }, now);
  return order;
}

/** Line inputs with their amounts' signs reversed (negatedPeriod prices them back). */
function negatedInputs(inputs: readonly LineInput[]): LineInput[] {
  return inputs.map((l) => ({ ...l, amount: -(l as { amount: number }).amount }) as LineInput);
}

/** A quote's lines without its BALANCE line (the processor's invoice reports that move itself), and their total. */
function withoutBalanceLines(quoted: PricedPeriod): PricedPeriod {
  const carried = quoted.lines.filter((l) => l.kind === 'BALANCE').reduce((sum, l) => sum + l.amount, 0);
  return carried === 0 ? quoted : { lines: quoted.lines.filter((l) => l.kind !== 'BALANCE'), total: quoted.total - carried };
}

/**
 * An order priced for its invoice's total, with the line of the processor balance's move (issue 39):
 * a credit drawn is a CREDIT "Applied balance" line, a credit added (a total below 0) a BALANCE
 * line; the order's total is then what the processor charged.
 */
function withBalanceLine(order: Order, balance: ProcessorBalance | undefined): Order {
  if (!balance) return order;
  const debit = balance.debit ?? 0;
  const credit = balance.move + debit;
  const carried = balance.carried ?? 0;
  const lines = [
    ...(credit > 0 ? [amountLine('CREDIT', APPLIED_BALANCE_DESCRIPTION, -credit)] : credit < 0 ? [amountLine('BALANCE', BALANCE_LINE_DESCRIPTION, -credit)] : []),
    // Stripe's minimum charge (docs/plan-changes.md): a debit an earlier small invoice left, collected here …
    ...(debit > 0 ? [amountLine('BALANCE', MINIMUM_DEBIT_DESCRIPTION, debit)] : []),
    // … and this invoice's own amount below the minimum, carried to the next one (nothing charged now).
    ...(carried > 0 ? [amountLine('CREDIT', MINIMUM_CARRIED_DESCRIPTION, -carried)] : []),
  ];
  if (lines.length === 0) return order;
  return { ...order, lines: [...order.lines, ...lines], amountCents: order.amountCents - credit + debit - carried };
}

/** The move recorded in Kassa's mirror of the processor customer's balance, in the order's transaction (once per order). */
async function recordBalanceMove(stores: CommerceStores, s: Subscription, order: Order, balance: ProcessorBalance | undefined, now: Date): Promise<void> {
  // The mirror holds credits only: a debit (Stripe's minimum charge) is not mirrored.
  const credit = balance ? balance.move + (balance.debit ?? 0) : 0;
  if (!balance || credit === 0) return;
  await stores.processorBalances.record({ orgId: s.orgId, customerId: s.customerId, processorCustomerId: balance.processorCustomerId, currency: s.currency, move: credit, orderId: order.id, subscriptionId: s.id, processorInvoiceId: balance.invoiceId, at: now });
}

/**
 * The order of a processor's invoice. With Kassa's usage lines on it: the fee line (`feeCents`,
 * none when 0), the USAGE lines priced by pricePeriod — the amounts Kassa added as invoice items —
 * and, when the processor discounted the invoice, one DISCOUNT line of what it took off
 * (`discountCents`: Stripe spreads a coupon over the invoice's lines and rounds each line's share,
 * so Kassa's own once-rounded figure may differ by a cent per line; the buyer paid Stripe's), then
 * the first order's tax rates with the amounts the processor collected per rate (`taxes`: Stripe
 * taxes each line and rounds per line). So the lines add up to what the processor charged. Should they not (the
 * invoice was edited in the processor's dashboard, a customer balance was applied, or the
 * processor's per-line tax rounding differs), the order is one line of the invoice's amount, as
 * without usage: an order's total is always what was charged.
 */
async function invoiceOrder(
  stores: CommerceStores,
  s: Subscription,
  period: number,
  paid: boolean,
  payment: { processorPaymentId: string | null; processorStatus: string | null; amountCents: number },
  now: Date,
  usage: readonly LineInput[] | undefined,
  feeCents: number | undefined,
  discountCents?: number,
  taxes?: readonly ProcessorTaxAmount[],
): Promise<Order> {
  if (usage && usage.length > 0 && feeCents !== undefined) {
    const itemized = await renewalOrder(stores, s, period, paid, { ...payment, amountCents: feeCents }, now, usage, {
      fee: feeCents > 0,
      ...(discountCents !== undefined && { discountAmount: discountCents }),
      ...(taxes !== undefined && { processorTaxes: taxes }),
    });
    if (itemized.amountCents === payment.amountCents) return itemized;
  }
  const own = period >= 1 ? await discountedRenewal(stores, s, period, paid, payment, now) : undefined;
  if (own) return own;
  return renewalOrder(stores, s, period, paid, payment, now, [], { discount: false });
}

/**
 * A renewal whose invoice the processor discounted (issue 39: the checkout's coupon, a Stripe
 * coupon on Stripe): Kassa's own lines for the period — the subscription's fee, the coupon's
 * DISCOUNT while it covers the period, the tax — when they add up to what the processor charged.
 * Undefined otherwise (no coupon on this period, or another amount): the caller makes one line of
 * the charged amount, without a DISCOUNT, so an order's total is always what was charged.
 */
async function discountedRenewal(
  stores: CommerceStores,
  s: Subscription,
  period: number,
  paid: boolean,
  payment: { processorPaymentId: string | null; processorStatus: string | null; amountCents: number },
  now: Date,
): Promise<Order | undefined> {
  const own = await renewalOrder(stores, s, period, paid, { processorPaymentId: payment.processorPaymentId, processorStatus: payment.processorStatus }, now);
  return own.lines.some((l) => l.kind === 'DISCOUNT') && own.amountCents === payment.amountCents ? own : undefined;
}

/**
 * The Kassa period number of a billing period starting at `start`: periods are counted from the
 * billing anchor (the processor's first period start) with the same calendar arithmetic as
 * Stripe's (month ends clamp), so each invoice maps to one period whatever order they arrive in.
 */
function periodNumberOf(s: Subscription, start: Date): number | undefined {
  const target = Math.floor(start.getTime() / 1000);
  for (let n = 0; n <= 100_000; n++) {
    const at = Math.floor(addIntervals(s.billingAnchor, s.billingInterval, s.billingIntervalCount, n).getTime() / 1000);
    if (at === target) return s.anchorPeriod + n;
    if (at > target) return undefined;
  }
  return undefined;
}

