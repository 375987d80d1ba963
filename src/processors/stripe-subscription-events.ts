/**
 * Subscriptions on the Stripe card processor (docs/card-processors.md): Stripe Billing owns the
 * renewal schedule. A subscription checkout opens a Checkout Session in `mode: 'subscription'`;
 * Stripe's invoice and subscription events come back here and are applied from the objects read
 * back from Stripe (never the event's copy) through ProcessorBillingFlow. Cancel, pause and resume
 * by the operator or the buyer, and plan and seat changes (issue 39), are made in Stripe first
 * (StripeSubscriptionBilling).
 */
import Stripe from 'stripe';
import type { CheckoutSession } from '../commerce/model.js';
import type { PaymentResult } from '../commerce/payment-flow.js';
import type { BillingApplied, ProcessorBalance, ProcessorBillingFlow, ProcessorExtraInvoice, ProcessorSubscriptionState } from '../commerce/processor-billing.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import { AppError, conflict, serviceUnavailable, validationError } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import type { ProcessorPlanChange, ProcessorSubscriptionBilling, SubscriptionChange } from './card-processor.js';
import type { LineInput } from '../commerce/pricing.js';
import type { ProcessorTaxAmount } from '../commerce/tax.js';
import { INTERACTIVE, withStripeRetries } from './stripe-retry.js';
import type { ProcessorUsageFlow } from '../commerce/processor-usage.js';

/** Metadata on Stripe's objects naming Kassa's (the same keys as stripe-processor.ts). */
const KASSA_SESSION_KEY = 'kassa_checkout_session_id';
const KASSA_ORG_KEY = 'kassa_org_id';
/** Metadata of the invoice Kassa makes for a change it prorates itself (its idempotency key), and of each of its items (its index). */
export const KASSA_PLAN_CHANGE_KEY = 'kassa_plan_change';
export const KASSA_PLAN_CHANGE_LINE_KEY = 'kassa_plan_change_line';

/** Stripe bills at most every three years (3 years, 36 months, 1095 days). */
const MAX_INTERVAL_COUNT = { DAY: 1095, MONTH: 36, YEAR: 3 } as const;

/**
 * `price_data.recurring` of a subscription session's line item, from Kassa's pricing snapshot;
 * undefined for a one-time price. A period Stripe cannot bill is refused before anything is made.
 */
export function stripeRecurring(session: CheckoutSession): Stripe.Checkout.SessionCreateParams.LineItem.PriceData.Recurring | undefined {
  const { pricingType, billingInterval, billingIntervalCount } = session.pricing;
  if (pricingType !== 'SUBSCRIPTION' || !billingInterval) return undefined;
  if (billingIntervalCount > MAX_INTERVAL_COUNT[billingInterval]) {
    throw validationError(
      `Stripe bills subscriptions at most every three years; this price renews every ${billingIntervalCount} ${billingInterval.toLowerCase()}s (at most ${MAX_INTERVAL_COUNT[billingInterval]} on Stripe)`,
    );
  }
  return { interval: billingInterval.toLowerCase() as 'day' | 'month' | 'year', interval_count: billingIntervalCount };
}

const at = (seconds: number | null | undefined) => (seconds == null ? null : new Date(seconds * 1000));
const idOf = (ref: string | { id: string } | null | undefined) => (ref == null ? null : typeof ref === 'string' ? ref : ref.id);

/** The billing period of a Stripe subscription (on its item since API 2025-03-31). */
function periodOf(sub: Stripe.Subscription): { periodStart: Date; periodEnd: Date } {
  const item = sub.items.data[0];
  if (!item) throw new Error(`Stripe subscription ${sub.id} has no item`);
  return { periodStart: new Date(item.current_period_start * 1000), periodEnd: new Date(item.current_period_end * 1000) };
}

/**
 * Kassa's reading of a Stripe subscription's state:
 * | Stripe | Kassa |
 * |---|---|
 * | `active`, `trialing`, `past_due` (Stripe retrying) | ACTIVE (`cancelAtPeriodEnd` as Stripe's) |
 * | any of those with `pause_collection` set, or `paused` | PAUSED |
 * | `canceled` at its period end or `cancel_at` (a scheduled cancellation) | ENDED |
 * | `canceled` by Stripe's dunning (`payment_failed`, `payment_disputed`), `unpaid`, `incomplete_expired` | EXPIRED |
 * | `canceled` otherwise (cancel now) | CANCELED |
 * | `incomplete` (first payment pending) | nothing yet |
 */
export function stripeSubscriptionState(sub: Stripe.Subscription): ProcessorSubscriptionState {
  // The one item's price and quantity (issue 39: a change made in the Dashboard); none with several items.
  const item = sub.items.data.length === 1 ? sub.items.data[0]! : undefined;
  const base = {
    cancelAtPeriodEnd: sub.cancel_at_period_end,
    canceledAt: at(sub.canceled_at),
    endedAt: at(sub.ended_at),
    ...(item && { item: { processorPriceId: item.price.id, quantity: item.quantity ?? 1, unitAmount: item.price.unit_amount } }),
  };
  switch (sub.status) {
    case 'incomplete':
      return { ...base, status: 'INCOMPLETE' };
    case 'incomplete_expired':
    case 'unpaid':
      return { ...base, status: 'EXPIRED' };
    case 'canceled': {
      const reason = sub.cancellation_details?.reason;
      if (reason === 'payment_failed' || reason === 'payment_disputed') return { ...base, status: 'EXPIRED' };
      // Ended when it was scheduled to (period end, `cancel_at`), not earlier: a cancel-now of a
      // subscription already set to cancel at period end is CANCELED.
      const endedAt = sub.ended_at ?? Number.MAX_SAFE_INTEGER;
      const periodEnd = sub.items.data[0]?.current_period_end ?? Number.MAX_SAFE_INTEGER;
      const scheduled = sub.ended_at !== null && ((sub.cancel_at !== null && endedAt >= sub.cancel_at) || endedAt >= periodEnd);
      return { ...base, status: scheduled ? 'ENDED' : 'CANCELED' };
    }
    case 'paused':
      return { ...base, status: 'PAUSED' };
    default:
      return { ...base, status: sub.pause_collection ? 'PAUSED' : 'ACTIVE' };
  }
}

function unreachable(logger: Logger, err: unknown, what: string, message: string) {
  const stripe = err instanceof Stripe.errors.StripeError ? { type: err.type, code: err.code, statusCode: err.statusCode, requestId: err.requestId } : undefined;
  logger.warn({ err: stripe ? undefined : err, stripe }, `Stripe: could not ${what}`);
  return serviceUnavailable(message);
}

/** Cancel, pause, resume and plan changes made in Stripe Billing; Kassa then applies Stripe’s answer. */
export class StripeSubscriptionBilling implements ProcessorSubscriptionBilling {
  constructor(
    private readonly stripe: Stripe,
    private readonly logger: Logger,
  ) {}

  async change(processorSubscriptionId: string, change: SubscriptionChange, idempotencyKey: string): Promise<ProcessorSubscriptionState> {
    const options = { idempotencyKey };
    try {
      // The idempotency key makes a retried change (after Stripe's 429) safe.
      const answer = await withStripeRetries(
        () =>
          change === 'cancel_now'
            ? this.stripe.subscriptions.cancel(processorSubscriptionId, {}, options)
            : this.stripe.subscriptions.update(
                processorSubscriptionId,
                change === 'cancel_at_period_end'
                  ? { cancel_at_period_end: true }
                  : change === 'keep_renewing'
                    ? { cancel_at_period_end: false }
                    : change === 'pause'
                    ? { pause_collection: { behavior: 'void' } }
                    : { pause_collection: '' },
                options,
              ),
        INTERACTIVE,
      );
      return stripeSubscriptionState(answer);
    } catch (err) {
      if (change === 'cancel_now' && err instanceof Stripe.errors.StripeInvalidRequestError) {
        const canceled = await this.alreadyCanceled(processorSubscriptionId);
        if (canceled) return canceled;
      }
      if (err instanceof Stripe.errors.StripeInvalidRequestError || err instanceof Stripe.errors.StripeIdempotencyError) {
        this.logger.warn({ stripe: { type: err.type, code: err.code, requestId: err.requestId } }, 'Stripe refused a subscription change');
        throw conflict(`Stripe refused the change: ${err.message}`);
      }
      throw unreachable(this.logger, err, `${change} a subscription`, 'Stripe could not be reached to change the subscription; nothing was changed in Kassa, retry');
    }
  }

  /**
   * A plan or seat change (issue 39) as Stripe's subscription update of its one item
   * (`items[0][id]`): the new price as `price_data` (Kassa's prices are made inline, as Checkout
   * made the first one; a price of another product gets a Stripe product of its own, created with
   * the change's idempotency key) and/or `quantity`.
   * - `invoice_now`: `proration_behavior: always_invoice` at `proration_date` (the preview's
   *   second, so Stripe prorates exactly what was quoted) with `payment_behavior:
   *   error_if_incomplete`: a declined card is Stripe's 402 and the subscription is not updated
   *   (CONFLICT here). The proration invoice is read back (latest_invoice) with its payment.
   * - `none`: no proration, nothing invoiced now (a downgrade at period end, a trial).
   */
  async changePlan(processorSubscriptionId: string, change: ProcessorPlanChange, idempotencyKey: string): Promise<{ state: ProcessorSubscriptionState; invoice?: ProcessorExtraInvoice } | { state: null; invoice: ProcessorExtraInvoice }> {
    try {
      const current = await withStripeRetries(() => this.stripe.subscriptions.retrieve(processorSubscriptionId), INTERACTIVE);
      const item = current.items.data[0];
      if (!item || current.items.data.length !== 1) throw conflict('This Stripe subscription does not have exactly one item; change it in the Stripe Dashboard');
      const price = await this.itemPrice(item, change, idempotencyKey);
      if (change.proration === 'explicit_items') {
        // Kassa's own proration: charged first as an invoice of Kassa's exact amounts; only once it
        // is paid does the item change (without proration). Declined: the invoice is voided and the
        // subscription was never touched.
        const invoice = await this.invoiceExplicitly(current, item, change, idempotencyKey);
        const payment = paymentOf(invoice);
        const paid: ProcessorExtraInvoice = {
          processorSubscriptionId,
          processorPaymentId: payment?.processorPaymentId ?? invoice.id,
          processorStatus: payment?.processorStatus ?? invoice.status,
          amountCents: invoice.amount_paid,
          prorations: prorationLines(invoice),
          kassaItems: true,
          invoiceId: invoice.id,
          ...balanceMoveOf(invoice),
        };
        let answer: Stripe.Subscription;
        try {
          answer = await withStripeRetries(
            () => this.stripe.subscriptions.update(processorSubscriptionId, { items: [{ id: item.id, ...price, quantity: change.quantity }], proration_behavior: 'none' }, { idempotencyKey }),
            INTERACTIVE,
          );
        } catch (err) {
          // The buyer has paid: the change is recorded as paid and not yet applied, and the item
          // update is made later with the same key (applyPlanItem: the caller's retry, the invoice's
          // `invoice.paid`, the retry job), never answered as "nothing changed".
          const stripe = err instanceof Stripe.errors.StripeError ? { type: err.type, code: err.code, statusCode: err.statusCode, requestId: err.requestId } : undefined;
          this.logger.warn({ err: stripe ? undefined : err, stripe, invoiceId: invoice.id }, 'Stripe: a plan change’s invoice is paid but its item update failed; it is applied later');
          return { state: null, invoice: paid };
        }
        return { state: stripeSubscriptionState(answer), invoice: paid };
      }
      const params: Stripe.SubscriptionUpdateParams = {
        items: [{ id: item.id, ...price, quantity: change.quantity }],
        ...(change.proration === 'invoice_now'
          ? { proration_behavior: 'always_invoice', proration_date: Math.floor(change.prorationDate.getTime() / 1000), payment_behavior: 'error_if_incomplete' }
          : { proration_behavior: 'none' }),
      };
      const answer = await withStripeRetries(() => this.stripe.subscriptions.update(processorSubscriptionId, params, { idempotencyKey }), INTERACTIVE);
      const state = stripeSubscriptionState(answer);
      if (change.proration !== 'invoice_now') return { state };
      const invoiceId = idOf(answer.latest_invoice);
      const invoice = invoiceId ? await withStripeRetries(() => this.stripe.invoices.retrieve(invoiceId, { expand: ['payments', 'payments.data.payment.payment_intent'] }), INTERACTIVE) : undefined;
      if (!invoice || invoice.billing_reason !== 'subscription_update' || invoice.status !== 'paid') return { state };
      const payment = paymentOf(invoice);
      return {
        state,
        invoice: {
          processorSubscriptionId,
          processorPaymentId: payment?.processorPaymentId ?? invoice.id,
          processorStatus: payment?.processorStatus ?? invoice.status,
          amountCents: invoice.amount_paid,
          prorations: prorationLines(invoice),
          invoiceId: invoice.id,
          ...balanceMoveOf(invoice),
        },
      };
    } catch (err) {
      if (err instanceof Stripe.errors.StripeCardError) {
        this.logger.info({ stripe: { type: err.type, code: err.code, declineCode: err.decline_code, requestId: err.requestId } }, 'Stripe declined a plan change’s proration; nothing changed');
        throw conflict('The card was declined: the plan was not changed and nothing was charged');
      }
      if (err instanceof Stripe.errors.StripeInvalidRequestError || err instanceof Stripe.errors.StripeIdempotencyError) {
        this.logger.warn({ stripe: { type: err.type, code: err.code, requestId: err.requestId } }, 'Stripe refused a plan change');
        throw conflict(`Stripe refused the change: ${err.message}`);
      }
      if (err instanceof AppError) throw err;
      throw unreachable(this.logger, err, 'change a subscription’s plan', 'Stripe could not be reached to change the plan; nothing was changed in Kassa, retry');
    }
  }

  /**
   * The item update of an `explicit_items` change whose invoice is paid (ProcessorSubscriptionBilling
   * .applyPlanItem): the subscription read back, the same `items[0]` (the same `price_data`; a new
   * product is the same `${key}_product` replay) and `proration_behavior: none`, with the change's
   * idempotency key, so an update Stripe made whose answer was lost is replayed, not made twice.
   */
  async applyPlanItem(processorSubscriptionId: string, change: ProcessorPlanChange, idempotencyKey: string): Promise<ProcessorSubscriptionState> {
    try {
      const current = await withStripeRetries(() => this.stripe.subscriptions.retrieve(processorSubscriptionId), INTERACTIVE);
      const item = current.items.data[0];
      if (!item || current.items.data.length !== 1) throw conflict('This Stripe subscription does not have exactly one item; change it in the Stripe Dashboard');
      const price = await this.itemPrice(item, change, idempotencyKey);
      const answer = await withStripeRetries(
        () => this.stripe.subscriptions.update(processorSubscriptionId, { items: [{ id: item.id, ...price, quantity: change.quantity }], proration_behavior: 'none' }, { idempotencyKey }),
        INTERACTIVE,
      );
      return stripeSubscriptionState(answer);
    } catch (err) {
      if (err instanceof Stripe.errors.StripeInvalidRequestError || err instanceof Stripe.errors.StripeIdempotencyError) {
        this.logger.warn({ stripe: { type: err.type, code: err.code, requestId: err.requestId } }, 'Stripe refused a paid plan change’s item update');
        throw conflict(`Stripe refused the change: ${err.message}`);
      }
      if (err instanceof AppError) throw err;
      throw unreachable(this.logger, err, 'apply a paid plan change to the subscription item', 'Stripe could not be reached to apply the paid plan change; it is retried');
    }
  }

  /** `items[0]`'s new price (`price_data`; a price of another product gets its product, made with `${key}_product`), or none when only the quantity changes. */
  private async itemPrice(item: Stripe.SubscriptionItem, change: ProcessorPlanChange, idempotencyKey: string): Promise<Stripe.SubscriptionUpdateParams.Item | undefined> {
    if (!change.priceChanged) return undefined;
    const product = change.sameProduct
      ? idOf(item.price.product)!
      : (
          await withStripeRetries(
            () => this.stripe.products.create({ name: change.productName, metadata: change.productId ? { kassa_product_id: change.productId } : {} }, { idempotencyKey: `${idempotencyKey}_product` }),
            INTERACTIVE,
          )
        ).id;
    const recurring = { interval: change.interval.toLowerCase() as 'day' | 'month' | 'year', interval_count: change.intervalCount };
    return { price_data: { currency: change.currency.toLowerCase(), product, unit_amount: change.unitAmount, recurring } };
  }

  /**
   * Kassa's own proration of a change (issue 39: an amount-off coupon, a coupon ending inside the
   * period) as a Stripe invoice of the subscription holding exactly Kassa's amounts:
   * `POST /v1/invoices` (`subscription`, `auto_advance: false`, `pending_invoice_items_behavior:
   * exclude` so no other pending item joins, `discounts: ''` so no discount is inherited), one
   * `POST /v1/invoiceitems` per amount (`discountable: false`, the item's tax rates or else the
   * subscription's default ones, so Stripe taxes each line as the quote did), finalize, then
   * `POST /v1/invoices/{id}/pay` (an invoice of 0 is paid at its finalization). An invoice whose
   * total is not Kassa's quote is voided and nothing is charged (CONFLICT); a declined card voids
   * it too (CONFLICT). Every call has its idempotency key, derived from the change's: a retry of
   * the same change replays the same invoice.
   */
  private async invoiceExplicitly(sub: Stripe.Subscription, item: Stripe.SubscriptionItem, change: ProcessorPlanChange, key: string): Promise<Stripe.Invoice> {
    const customer = idOf(sub.customer)!;
    const rates = (item.tax_rates && item.tax_rates.length > 0 ? item.tax_rates : (sub.default_tax_rates ?? [])).map((r) => idOf(r)!);
    const seconds = (d: Date) => Math.floor(d.getTime() / 1000);
    const created = await withStripeRetries(
      () =>
        this.stripe.invoices.create(
          { customer, subscription: sub.id, auto_advance: false, collection_method: 'charge_automatically', pending_invoice_items_behavior: 'exclude', discounts: '', metadata: { [KASSA_PLAN_CHANGE_KEY]: key } },
          { idempotencyKey: `${key}_invoice` },
        ),
      INTERACTIVE,
    );
    let invoice = created;
    if (invoice.status === 'draft') {
      for (const [i, line] of (change.items ?? []).entries()) {
        const params: Stripe.InvoiceItemCreateParams = {
          customer,
          invoice: invoice.id,
          amount: line.amount,
          currency: change.currency.toLowerCase(),
          description: line.description.slice(0, 500),
          discountable: false,
          period: { start: seconds(change.prorationDate), end: seconds(change.periodEnd ?? change.prorationDate) },
          metadata: { [KASSA_PLAN_CHANGE_LINE_KEY]: String(i) },
          ...(rates.length > 0 && { tax_rates: rates }),
        };
        await withStripeRetries(() => this.stripe.invoiceItems.create(params, { idempotencyKey: `${key}_item_${i}` }), INTERACTIVE);
      }
      invoice = await withStripeRetries(() => this.stripe.invoices.finalizeInvoice(invoice.id, { auto_advance: false }, { idempotencyKey: `${key}_finalize` }), INTERACTIVE);
    }
    if (invoice.total !== change.amountDue) {
      await this.voidQuietly(invoice, key);
      this.logger.warn({ invoiceId: invoice.id, quoted: change.amountDue, invoiced: invoice.total }, 'Stripe invoiced a plan change differently from Kassa’s amounts; voided, nothing charged');
      throw conflict('Stripe’s invoice for this change did not come to the previewed amount; nothing was charged. Preview again');
    }
    if (invoice.status === 'open') {
      try {
        await withStripeRetries(() => this.stripe.invoices.pay(invoice.id, {}, { idempotencyKey: `${key}_pay` }), INTERACTIVE);
      } catch (err) {
        if (err instanceof Stripe.errors.StripeCardError) await this.voidQuietly(invoice, key);
        throw err;
      }
    }
    invoice = await withStripeRetries(() => this.stripe.invoices.retrieve(invoice.id, { expand: ['payments', 'payments.data.payment.payment_intent'] }), INTERACTIVE);
    if (invoice.status !== 'paid') throw conflict('Stripe did not collect this change’s invoice; the plan was not changed');
    return invoice;
  }

  /** Voids an unpaid invoice of a change that will not be made (so Stripe never collects it later); a failure is logged. */
  private async voidQuietly(invoice: Stripe.Invoice, key: string): Promise<void> {
    try {
      if (invoice.status === 'draft') await withStripeRetries(() => this.stripe.invoices.del(invoice.id), INTERACTIVE);
      else if (invoice.status === 'open') await withStripeRetries(() => this.stripe.invoices.voidInvoice(invoice.id, {}, { idempotencyKey: `${key}_void` }), INTERACTIVE);
    } catch (err) {
      this.logger.warn({ invoiceId: invoice.id, stripe: err instanceof Stripe.errors.StripeError ? { type: err.type, code: err.code, requestId: err.requestId } : undefined }, 'Stripe: could not void a plan change’s unpaid invoice');
    }
  }

  /**
   * Cancel now is `DELETE /v1/subscriptions/{id}`, where Stripe ignores idempotency keys: a retry
   * after a lost answer (the SDK's, or the merchant's after a 503) finds the subscription canceled,
   * which Stripe answers as `resource_missing` ("No such subscription"). Read back, a subscription
   * that is canceled is the cancel done: its state is the answer. Undefined when Stripe has no such
   * subscription at all or it is not canceled (a refusal stays a refusal).
   */
  private async alreadyCanceled(processorSubscriptionId: string): Promise<ProcessorSubscriptionState | undefined> {
    let current: Stripe.Subscription;
    try {
      current = await withStripeRetries(() => this.stripe.subscriptions.retrieve(processorSubscriptionId), INTERACTIVE);
    } catch (err) {
      if (err instanceof Stripe.errors.StripeInvalidRequestError) return undefined;
      throw unreachable(this.logger, err, 'read a subscription back after its cancel', 'Stripe could not be reached to confirm the cancel; retry');
    }
    return current.status === 'canceled' ? stripeSubscriptionState(current) : undefined;
  }
}

/** Applies a Stripe Checkout Session (StripeEventService's own path): how a subscription Kassa does not know yet is started. */
export type ApplyCheckoutSession = (stripeCheckoutSessionId: string) => Promise<unknown>;

/** Stripe's invoice and subscription events, and the subscription half of a completed subscription checkout. */
export class StripeSubscriptionEvents {
  constructor(
    private readonly stripe: Stripe,
    private readonly uow: CommerceUnitOfWork,
    private readonly billing: ProcessorBillingFlow,
    private readonly logger: Logger,
    /** Metered subscriptions' usage on their invoices (invoice items on the renewal draft). */
    private readonly usage?: ProcessorUsageFlow,
    /**
     * Applies a plan change of this Stripe subscription that is paid and not yet applied (issue 39,
     * SubscriptionService.applyPendingPlanChangeOf): called when Kassa's change invoice is paid.
     */
    private readonly applyPendingPlanChange?: (processorSubscriptionId: string) => Promise<unknown>,
  ) {}

  /**
   * `invoice.created` of a renewal (`subscription_cycle`) draft: a metered subscription's draft is
   * held until Kassa's grace window has passed, then carries the closing period's usage as invoice
   * items (ProcessorUsageFlow). Other invoices, and subscriptions without metered components,
   * are left to Stripe (it finalizes them about an hour later).
   */
  async applyDraft(invoiceId: string, applyCheckout: ApplyCheckoutSession): Promise<'applied' | 'ignored'> {
    const usage = this.usage;
    if (!usage) return 'ignored';
    const invoice = await this.read(() => this.stripe.invoices.retrieve(invoiceId), 'read an invoice back');
    const subscriptionId = idOf(invoice.parent?.subscription_details?.subscription);
    const line = subscriptionLine(invoice);
    if (!subscriptionId || invoice.billing_reason !== 'subscription_cycle' || !line) return 'ignored';
    const draft = { processorSubscriptionId: subscriptionId, invoiceId: invoice.id, periodStart: new Date(line.period.start * 1000) };
    const apply = async (): Promise<BillingApplied> => {
      const outcome = await usage.renewalDraft(draft);
      return outcome === 'ignored' ? 'unchanged' : outcome;
    };
    const first = await apply();
    return first === 'unchanged' ? 'ignored' : this.known(first, subscriptionId, applyCheckout, apply);
  }

  /**
   * What a completed subscription checkout adds to its payment result: the Stripe subscription
   * and its first period, and the first invoice's PaymentIntent (refunds go through it).
   */
  async firstPayment(session: Stripe.Checkout.Session): Promise<Pick<PaymentResult, 'processorPaymentId' | 'processorStatus' | 'processorSubscription'> | undefined> {
    const subscriptionId = idOf(session.subscription);
    if (!subscriptionId) return undefined;
    const sub = await this.read(() => this.stripe.subscriptions.retrieve(subscriptionId), 'read a subscription back');
    const invoiceId = idOf(session.invoice) ?? idOf(sub.latest_invoice);
    const invoice = invoiceId ? await this.readInvoice(invoiceId) : undefined;
    // The first invoice's period, not the subscription's current one: Stripe may have renewed it since.
    const line = invoice && subscriptionLine(invoice);
    const period = line ? { periodStart: new Date(line.period.start * 1000), periodEnd: new Date(line.period.end * 1000) } : periodOf(sub);
    const payment = invoice && paymentOf(invoice);
    // An invoice Stripe settled without a PaymentIntent names the payment itself, with its own status.
    const processorStatus = payment ? payment.processorStatus : invoice?.status;
    return {
      processorPaymentId: payment?.processorPaymentId ?? invoiceId ?? subscriptionId,
      ...(processorStatus && { processorStatus }),
      processorSubscription: { id: sub.id, ...period, ...(sub.items.data.length === 1 && { processorPriceId: sub.items.data[0]!.price.id }) },
    };
  }

  /**
   * `invoice.paid` / `invoice.payment_failed`, as the invoice is now:
   * - a renewal (`subscription_cycle`) becomes the period's renewal order, for the invoice's amount;
   * - the first invoice (`subscription_create`) is the checkout's order (checkout.session.completed);
   * - any other invoice of the subscription (`subscription_update` prorations after a plan change,
   *   Kassa's — whose order exists already — or one in Stripe's Dashboard, `manual`,
   *   `subscription_threshold`, …) becomes an order of its own once
   *   it is paid with money (ProcessorBillingFlow.applyExtraInvoice); unpaid or zero ones are
   *   ignored with a log line (Stripe sends `invoice.paid` again when it collects one).
   * Invoices without a subscription (one-off Dashboard invoices) are not Kassa's and are ignored.
   */
  async applyInvoice(invoiceId: string, applyCheckout: ApplyCheckoutSession): Promise<'applied' | 'ignored'> {
    const invoice = await this.readInvoice(invoiceId);
    const subscriptionId = idOf(invoice.parent?.subscription_details?.subscription);
    if (!subscriptionId || invoice.billing_reason === 'subscription_create') return 'ignored';
    const payment = paymentOf(invoice);
    if (invoice.billing_reason !== 'subscription_cycle') {
      // An invoice paid by the customer's balance, or whose credit went to it, is an order too (its balance line says so).
      if (invoice.status !== 'paid' || (invoice.amount_paid <= 0 && !balanceMoveOf(invoice).balance)) {
        this.logger.info({ invoiceId, billingReason: invoice.billing_reason, invoiceStatus: invoice.status }, 'Stripe: an invoice outside the billing cycle with nothing paid is not an order');
        return 'ignored';
      }
      const final = await this.usage?.linesOf(invoice.id);
      const extra = {
        processorSubscriptionId: subscriptionId,
        processorPaymentId: payment?.processorPaymentId ?? invoice.id,
        processorStatus: payment?.processorStatus ?? invoice.status,
        amountCents: invoice.amount_paid,
        // Usage Kassa invoiced on its own: a cancel-now's final usage, or a MISSED renewal draft's make-up.
        ...((final?.kind === 'FINAL' || final?.kind === 'MAKEUP') && { usage: final.lines, discountCents: discountTaken(invoice), taxes: await this.taxesCollected(invoice) }),
        // A plan or seat change's proration (Kassa's change, or one made in the Dashboard): its lines.
        ...((invoice.billing_reason === 'subscription_update' || invoice.metadata?.[KASSA_PLAN_CHANGE_KEY] !== undefined) && { prorations: prorationLines(invoice) }),
        ...balanceMoveOf(invoice),
      };
      const applied = await this.known(await this.billing.applyExtraInvoice(extra), subscriptionId, applyCheckout, () => this.billing.applyExtraInvoice(extra));
      // Kassa's own change invoice, paid: a change still waiting for its item update is applied now
      // (it never throws: a failure leaves it to the retry job).
      if (invoice.metadata?.[KASSA_PLAN_CHANGE_KEY] !== undefined && this.applyPendingPlanChange) await this.applyPendingPlanChange(subscriptionId);
      return applied;
    }
    // Open after an attempt: Stripe is retrying; uncollectible: Stripe's dunning gave up on it.
    const outcome = invoice.status === 'paid' ? 'paid' : (invoice.status === 'open' && invoice.attempted) || invoice.status === 'uncollectible' ? 'failed' : undefined;
    const line = subscriptionLine(invoice);
    if (!outcome || !line) return 'ignored';
    // The closing period's usage Kassa added to this invoice (ProcessorUsageFlow), for the order's lines.
    let usage = await this.usage?.linesOf(invoice.id);
    if (this.usage && !usage) {
      // A metered subscription's renewal finalized without Kassa's items (its invoice.created never
      // handled, or handled after Stripe's finalization): recorded MISSED before the period moves on,
      // and the closing period's usage goes on an invoice of its own (ProcessorUsageFlow.makeUp).
      // The renewal itself is recorded whatever happens to the make-up (Stripe collected it): a
      // make-up Stripe refuses (a subscription canceled meanwhile) is logged, not retried forever.
      try {
        await this.usage.renewalDraft({ processorSubscriptionId: subscriptionId, invoiceId: invoice.id, periodStart: new Date(line.period.start * 1000) });
      } catch (err) {
        this.logger.error({ err, invoiceId: invoice.id, subscriptionId }, 'Stripe: the usage of a renewal finalized without Kassa\'s items could not be invoiced on its own; the renewal is recorded without it');
      }
      usage = await this.usage.linesOf(invoice.id);
    }
    const renewal = {
      processorSubscriptionId: subscriptionId,
      outcome,
      periodStart: new Date(line.period.start * 1000),
      periodEnd: new Date(line.period.end * 1000),
      processorPaymentId: payment?.processorPaymentId ?? invoice.id,
      processorStatus: payment?.processorStatus ?? invoice.status,
      amountCents: outcome === 'paid' ? invoice.amount_paid : invoice.amount_due,
      attemptCount: invoice.attempt_count,
      invoiceId: invoice.id,
      ...balanceMoveOf(invoice),
      ...(usage?.kind === 'RENEWAL' && {
        usage: usage.lines,
        feeCents: invoice.lines.data.filter((l) => l.parent?.subscription_item_details).reduce((sum, l) => sum + l.amount, 0),
        // What Stripe took off, spread over the fee and usage lines and rounded per line: the order's DISCOUNT.
        discountCents: discountTaken(invoice),
        // What Stripe taxed, per rate (each line's tax rounded on its line): the order's TAX lines.
        taxes: await this.taxesCollected(invoice),
      }),
    } as const;
    return this.known(await this.billing.applyRenewal(renewal), subscriptionId, applyCheckout, () => this.billing.applyRenewal(renewal));
  }

  /**
   * `invoice.payment_action_required`: a renewal's off-session charge needs the buyer (3-D
   * Secure). While the invoice, read back, is still open with a hosted page, the subscription
   * records that page for the buyer (ProcessorBillingFlow.applyActionRequired); an invoice paid
   * or voided since, or the first invoice (Checkout asks the buyer itself), changes nothing.
   */
  async applyActionRequired(invoiceId: string, applyCheckout: ApplyCheckoutSession): Promise<'applied' | 'ignored'> {
    const invoice = await this.readInvoice(invoiceId);
    const subscriptionId = idOf(invoice.parent?.subscription_details?.subscription);
    if (!subscriptionId || invoice.billing_reason === 'subscription_create' || invoice.status !== 'open' || !invoice.hosted_invoice_url) return 'ignored';
    const action = { processorSubscriptionId: subscriptionId, invoiceId: invoice.id, url: invoice.hosted_invoice_url };
    return this.known(await this.billing.applyActionRequired(action), subscriptionId, applyCheckout, () => this.billing.applyActionRequired(action));
  }

  /**
   * The tax an invoice collected per rate (`total_taxes`: Stripe's sum of each line's tax, each
   * rounded on its line), each Stripe rate read back for the Kassa rate it stands for (its
   * metadata `kassa_tax_rate_id`, set when Kassa made it). A rate Kassa did not make (added in the
   * Dashboard) names none: the order is then one line of the amount paid.
   */
  private async taxesCollected(invoice: Stripe.Invoice): Promise<ProcessorTaxAmount[]> {
    const kassaIds = new Map<string, string | null>();
    const out: ProcessorTaxAmount[] = [];
    for (const t of invoice.total_taxes ?? []) {
      const ref = t.tax_rate_details?.tax_rate;
      const rateId = typeof ref === 'string' ? ref : (ref as { id?: string } | null | undefined)?.id;
      if (!rateId) {
        out.push({ kassaRateId: null, amount: t.amount });
        continue;
      }
      if (!kassaIds.has(rateId)) {
        const rate = await this.read(() => this.stripe.taxRates.retrieve(rateId), 'read a tax rate back');
        kassaIds.set(rateId, rate.metadata?.kassa_tax_rate_id ?? null);
      }
      out.push({ kassaRateId: kassaIds.get(rateId)!, amount: t.amount });
    }
    return out;
  }

  /** An invoice as Stripe has it now, with its payments and their PaymentIntents (the order's payment and its status). */
  private readInvoice(invoiceId: string): Promise<Stripe.Invoice> {
    return this.read(() => this.stripe.invoices.retrieve(invoiceId, { expand: ['payments', 'payments.data.payment.payment_intent'] }), 'read an invoice back');
  }

  /** `customer.subscription.updated` / `.deleted`: Kassa's subscription takes Stripe's state, read back under its row lock. */
  async applySubscription(subscriptionId: string, applyCheckout: ApplyCheckoutSession): Promise<'applied' | 'ignored'> {
    const sync = () => this.billing.sync(subscriptionId, async () => stripeSubscriptionState(await this.read(() => this.stripe.subscriptions.retrieve(subscriptionId), 'read a subscription back')));
    return this.known(await sync(), subscriptionId, applyCheckout, sync);
  }

  /**
   * A subscription event that arrived before its checkout's: the checkout is applied first (it
   * starts Kassa's subscription), then the event. Stripe subscriptions Kassa did not create
   * (another integration on the same account) are ignored.
   */
  private async known(applied: BillingApplied, subscriptionId: string, applyCheckout: ApplyCheckoutSession, again: () => Promise<BillingApplied>): Promise<'applied' | 'ignored'> {
    if (applied !== 'unknown') return 'applied';
    const sub = await this.read(() => this.stripe.subscriptions.retrieve(subscriptionId), 'read a subscription back');
    const kassaId = sub.metadata?.[KASSA_SESSION_KEY];
    const orgId = sub.metadata?.[KASSA_ORG_KEY];
    const session = kassaId && orgId ? await this.uow.stores.sessions.find(orgId, kassaId) : undefined;
    if (!session?.processorSessionId) return 'ignored';
    await applyCheckout(session.processorSessionId);
    return (await again()) === 'unknown' ? 'ignored' : 'applied';
  }

  private async read<T>(call: () => Promise<T>, what: string): Promise<T> {
    try {
      return await withStripeRetries(call, INTERACTIVE);
    } catch (err) {
      throw unreachable(this.logger, err, what, 'Stripe could not be reached to read the object back; redeliver the event');
    }
  }
}

/**
 * A proration invoice's proration lines (`parent.subscription_item_details.proration`, Stripe's
 * recommended way to find them) as PRORATION line inputs, Stripe's descriptions and amounts.
 */
export function prorationLines(invoice: Stripe.Invoice): LineInput[] {
  return invoice.lines.data
    // Stripe's own proration lines, or the invoice items of a change Kassa prorated itself.
    .filter((l) => l.parent?.subscription_item_details?.proration === true || l.metadata?.[KASSA_PLAN_CHANGE_LINE_KEY] !== undefined)
    .map((l) => ({ kind: 'PRORATION' as const, description: l.description ?? 'Proration', amount: l.amount }));
}

/**
 * How a finalized invoice moved its customer's balance (issue 39): Stripe applies a customer's
 * credit to any invoice it finalizes and puts a total below 0 into the balance, and reports both as
 * `ending_balance − starting_balance` (a credit being below 0). Nothing before finalization (null).
 */
export function balanceMoveOf(invoice: Stripe.Invoice): { balance?: ProcessorBalance } {
  const customer = idOf(invoice.customer);
  if (!customer || invoice.ending_balance === null || invoice.ending_balance === undefined) return {};
  const starting = invoice.starting_balance ?? 0;
  const move = invoice.ending_balance - starting;
  // Stripe's minimum charge (docs/plan-changes.md): a debit collected (a starting balance above 0,
  // left by an earlier invoice below the minimum), and a paid invoice that charged less than it
  // was due with nothing remaining — marked paid below the minimum, its amount due carried on.
  const debit = Math.max(0, starting) - Math.max(0, invoice.ending_balance);
  const carried = invoice.status === 'paid' && invoice.amount_remaining === 0 && invoice.amount_paid < invoice.amount_due ? invoice.amount_due - invoice.amount_paid : 0;
  if (move === 0 && carried === 0) return {};
  return { balance: { processorCustomerId: customer, move, invoiceId: invoice.id, ...(debit > 0 && { debit }), ...(carried > 0 && { carried }) } };
}

/** The invoice line of the subscription's item: its period is the billing period paid (the invoice's own period is not). */
function subscriptionLine(invoice: Stripe.Invoice): Stripe.InvoiceLineItem | undefined {
  return invoice.lines.data.find((l) => l.parent?.subscription_item_details) ?? invoice.lines.data[0];
}

/**
 * The PaymentIntent that paid a paid invoice, or the latest attempt of an unpaid one (`payments`
 * and their PaymentIntents expanded), and its status. Undefined when that payment is no
 * PaymentIntent: a paid invoice settled otherwise (marked paid out of band, a payment record).
 */
function paymentOf(invoice: Stripe.Invoice): { processorPaymentId: string; processorStatus: string | null } | undefined {
  const payments = invoice.payments?.data ?? [];
  const chosen = invoice.status === 'paid' ? payments.find((p) => p.status === 'paid') : payments[payments.length - 1];
  const intent = chosen?.payment.payment_intent;
  if (!intent) return undefined;
  return typeof intent === 'string' ? { processorPaymentId: intent, processorStatus: null } : { processorPaymentId: intent.id, processorStatus: intent.status };
}

/**
 * What an invoice's discounts took off in all: `total_discount_amounts` (Stripe's sum of every
 * line's `discount_amounts`, each line's share rounded by Stripe), the order's DISCOUNT line.
 */
function discountTaken(invoice: Stripe.Invoice): number {
  return (invoice.total_discount_amounts ?? []).reduce((sum, d) => sum + d.amount, 0);
}
