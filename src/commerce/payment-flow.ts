/**
 * The one "apply a payment result" flow of every rail. Processors only build its input: the
 * sandbox card processor and the hosted page (card), Stripe's events (card), the chain watcher
 * (crypto). In one transaction under the session's row lock: session → order → subscription →
 * webhook event (outbox). Safe to repeat and to race: one order per session, conditional writes.
 */
import type { Clock } from '../kernel/clock.js';
import { newId, randomToken } from '../kernel/ids.js';
import { notFound, validationError } from '../kernel/errors.js';
import { periodEnd } from './billing-period.js';
import type { CheckoutSession, Customer, Order, Subscription } from './model.js';
import { presentWebhookOrder } from './order.presenter.js';
import { assertWritten, type CommerceStores, type CommerceUnitOfWork } from './stores.js';
import { presentWebhookSubscription } from './subscription.presenter.js';
import { CARD_SETTLEMENT_DELAY_MS } from './renewal-order.js';
import { sessionChargeInputs, sessionLineInputs, sessionLines, singleCharge, trialLines } from './order-lines.js';
import { priceWithTax, type TaxContext } from './tax.js';
import { amountLine } from './pricing.js';
import { APPLIED_BALANCE_DESCRIPTION } from './proration.js';

export type PaymentOutcome = 'pending' | 'succeeded' | 'failed';

export interface PaymentResult {
  checkoutSessionId: string;
  outcome: PaymentOutcome;
  processorPaymentId: string;
  /**
   * The payment's status as the processor reports it (Stripe's PaymentIntent status). Omitted, it
   * is the outcome in Stripe's words, as the sandbox reports it (see outcomeProcessorStatus).
   */
  processorStatus?: string;
  /** The processor's reusable payment method (kept for subscription renewals). */
  paymentMethod?: string;
  /** The buyer's e-mail when the session did not carry one. */
  customerEmail?: string;
  /** A subscription the processor's billing renews (Stripe): its id and first billing period. */
  /** `processorPriceId`: the processor's price on its one item, made by Kassa for this plan (Stripe `price_…`). */
  processorSubscription?: { id: string; periodStart: Date; periodEnd: Date; processorPriceId?: string };
  /**
   * The tax the processor chose from the buyer's address (Stripe's `dynamic_tax_rates`, issue 39),
   * for a session created without a location: recorded on the session (its `tax` and `amount`)
   * before its order is written, so the order's TAX lines are what the processor collected.
   * Ignored when the session already has a tax or an order.
   */
  tax?: TaxContext;
}

/** What the chain watcher saw of a transfer matched to a crypto session (see applyCryptoTransfer). */
export interface CryptoTransferResult {
  checkoutSessionId: string;
  event: 'seen' | 'confirmed' | 'removed';
  /** CAIP-2, e.g. `eip155:8453`. */
  chain: string;
  txHash: string;
  /** EIP-55 payer and receiving addresses. */
  fromAddress: string;
  recipient: string;
  /** Token units the transfer carried, and the session's quoted exact amount. */
  valueUnits: number;
  quotedUnits: number;
}

/** An x402 payment Kassa settled on chain as facilitator (see applyX402Settlement). */
export interface X402SettlementResult {
  orgId: string;
  /** CAIP-2, e.g. `eip155:8453`. */
  chain: string;
  txHash: string;
  /** EIP-55 payer and receiving addresses. */
  fromAddress: string;
  recipient: string;
  /** Token units transferred, and the token (`USDC`). */
  valueUnits: number;
  currency: string;
  /** The settlement's id (kept as the processor payment id). */
  settlementId: string;
  /** The catalog product paid for, when the resource is tied to one; else an inline name. */
  product: { productId: string | null; name: string };
}

/** x402 carries no e-mail: a payer is a customer known by its wallet, at a reserved domain that never receives mail. */
export const x402CustomerEmail = (address: string): string => `${address.toLowerCase()}@x402.invalid`;

/** A payment outcome in the words of Stripe's PaymentIntent statuses: how the sandbox reports its payments. */
export function outcomeProcessorStatus(outcome: PaymentOutcome): string {
  return outcome === 'succeeded' ? 'succeeded' : outcome === 'pending' ? 'processing' : 'requires_payment_method';
}

/** What applying a card payment result did (see applyPaymentResult). */
export interface PaymentApplied {
  outcome: 'applied' | 'unchanged' | 'duplicate_payment';
  order: Order;
}

/**
 * The checkout's `customerExternalId` goes to the customer the payment found or created by e-mail,
 * unless that customer has one already or another customer took it meanwhile (the payment never
 * fails for it).
 */
async function withExternalId(stores: CommerceStores, session: CheckoutSession, customer: Customer): Promise<Customer> {
  if (!session.customerExternalId || customer.externalId !== null || !customer.email) return customer;
  return (await stores.customers.attachExternalId(session.orgId, customer.id, session.customerExternalId)) ?? customer;
}

export class PaymentFlow {
  constructor(
    private readonly uow: CommerceUnitOfWork,
    private readonly clock: Clock,
  ) {}

  /**
   * Applies one payment result. Safe to call any number of times, in any order: the session row
   * is locked, there is at most one order per session, and a PAID or REFUNDED order never moves
   * back (a late `pending` or `failed` after `succeeded` changes nothing).
   *
   * `duplicate_payment`: a second, different payment succeeded for a session that is already
   * paid. Nothing changes here; the processor that reported it must refund it.
   */
  applyPaymentResult(result: PaymentResult): Promise<PaymentApplied> {
    return this.uow.transaction(async (stores) => {
      const session = await stores.sessions.findForUpdate(result.checkoutSessionId);
      if (!session) throw notFound('Checkout session');
      return this.applyLocked(stores, session, result);
    });
  }

  private async applyLocked(stores: CommerceStores, locked: CheckoutSession, result: PaymentResult): Promise<PaymentApplied> {
    const now = this.clock.now();
    const existing = await stores.orders.findBySession(locked.id);
    let session = locked;
    if (!existing && result.tax && !session.tax) {
      // The buyer's location and the rate the processor chose (issue 39): the session's tax from
      // now on, under its lock, before the order is priced from it.
      const amount = priceWithTax(sessionLineInputs(session), result.tax).total;
      assertWritten(await stores.sessions.setProcessorTax(session.id, result.tax, amount, now), 'checkout session');
      session = { ...session, tax: result.tax, amount, updatedAt: now };
    }
    if (!existing) {
      if (result.outcome === 'failed') {
        throw new Error('a failed payment without an accepted one has no order; record it as the session lastError');
      }
      const customer = session.customerId
        ? await stores.customers.find(session.orgId, session.customerId)
        : await withExternalId(
            stores,
            session,
            await stores.customers.findOrCreateByEmail({
              id: newId('CUS'),
              orgId: session.orgId,
              email: (session.customerEmail ?? result.customerEmail ?? '').trim(),
              externalId: null,
              createdAt: now,
            }),
          );
      if (!customer || !customer.email) throw validationError('An e-mail address is required to pay');
      const paid = result.outcome === 'succeeded';
      const drawn = session.pricing.balance;
      // A checkout the customer's balance covers whole (issue 39): PAID at 0 with no card payment and
      // no payment id (the card was only checked, for 0, and is saved for the renewals).
      const coveredWhole = drawn !== undefined && drawn.amountCents > 0 && drawn.amountCents === session.amount;
      let order = orderForSession(session, customer, now, {
        status: paid ? 'PAID' : 'PENDING',
        settledAvailableOn: paid && session.provider === 'STRIPE' && !coveredWhole ? new Date(now.getTime() + CARD_SETTLEMENT_DELAY_MS) : null,
        processorPaymentId: coveredWhole ? null : result.processorPaymentId,
        processorStatus: result.processorStatus ?? outcomeProcessorStatus(result.outcome),
        paymentMethod: result.paymentMethod ?? null,
      });
      // A late payment (the session expired while the card was charged, and the expiry gave the
      // balance's draw back, RESTORED): the draw is taken again under the balance row's lock, for the
      // order under a new id (the reserved one already holds its APPLIED and RESTORED entries). The
      // order keeps the CREDIT line the buyer was shown and charged for (docs/plan-changes.md).
      if (drawn && session.status === 'EXPIRED') {
        order = { ...order, id: newId('ORD') };
        await stores.balances.apply({ orgId: session.orgId, customerId: customer.id, currency: session.currency, wanted: drawn.amountCents, orderId: order.id, subscriptionId: null, at: now });
      }
      await stores.orders.insert(order);
      // A late payment (the session expired while the card was charged) takes back the redemption
      // the expiry gave back: the order carries the discount (issue 39). Under the session's lock,
      // as the expiry's release, so one of the two comes first and the other sees it.
      if (session.pricing.discount && session.status === 'EXPIRED') await stores.redemptions.takeBack(session.id, now);
      assertWritten(await stores.sessions.update({ ...session, status: 'COMPLETE', customerId: customer.id, customerEmail: customer.email, updatedAt: now }, session.status), 'checkout session');
      const { order: linked, subscription } = paid ? await this.startSubscription(stores, session, order, now, result.processorSubscription) : { order };
      if (paid) await grantCredits(stores, session, linked, now);
      await stores.emit({ orgId: linked.orgId, type: paid ? 'order.paid' : 'order.pending', data: { order: presentWebhookOrder(linked, { subscription }) } }, now);
      return { outcome: 'applied', order: linked };
    }

    const next = nextStatus(existing.status, result.outcome);
    if (!next) {
      const secondPayment =
        result.outcome === 'succeeded' && (existing.status === 'PAID' || existing.status === 'REFUNDED') && existing.processorPaymentId !== result.processorPaymentId;
      // A repeated, late or out-of-order result of the same payment changes nothing either.
      return { outcome: secondPayment ? 'duplicate_payment' : 'unchanged', order: existing };
    }
    const order: Order = {
      ...existing,
      status: next,
      processorPaymentId: result.processorPaymentId,
      // Written with the status change it explains, under the same conditional write: a stale
      // result (one that changes no status) never overwrites a newer processor status.
      processorStatus: result.processorStatus ?? outcomeProcessorStatus(result.outcome),
      settledAvailableOn:
        next === 'PAID' && existing.provider === 'STRIPE' ? new Date(now.getTime() + CARD_SETTLEMENT_DELAY_MS) : existing.settledAvailableOn,
      updatedAt: now,
    };
    assertWritten(await stores.orders.update(order, existing.status), 'order');
    // A checkout's payment that failed after it was accepted (issue 39): the balance it drew is given back.
    if (next === 'FAILED') await stores.balances.restore(order.id, now);
    const sessionStatus = next === 'FAILED' ? 'FAILED' : 'COMPLETE';
    if (session.status !== sessionStatus) assertWritten(await stores.sessions.update({ ...session, status: sessionStatus, updatedAt: now }, session.status), 'checkout session');
    const { order: linked, subscription } = next === 'PAID' ? await this.startSubscription(stores, session, order, now, result.processorSubscription) : { order };
    if (next === 'PAID') await grantCredits(stores, session, linked, now);
    await stores.emit(
      { orgId: linked.orgId, type: next === 'PAID' ? 'order.paid' : 'order.failed', data: { order: presentWebhookOrder(linked, { subscription }) } },
      now,
    );
    return { outcome: 'applied', order: linked };
  }

  /**
   * The processor closed its checkout unpaid (Stripe's `checkout.session.expired`): an open
   * session becomes EXPIRED; a session in any other status (paid meanwhile) is left as it is.
   */
  expireUnpaid(checkoutSessionId: string): Promise<CheckoutSession> {
    return this.uow.transaction(async (stores) => {
      const session = await stores.sessions.findForUpdate(checkoutSessionId);
      if (!session) throw notFound('Checkout session');
      if (session.status !== 'CREATED') return session;
      const expired: CheckoutSession = { ...session, status: 'EXPIRED', updatedAt: this.clock.now() };
      assertWritten(await stores.sessions.update(expired, 'CREATED'), 'checkout session');
      await stores.redemptions.releaseUnpaid([expired.id], expired.updatedAt);
      await restoreUnpaidDraw(stores, expired, expired.updatedAt);
      return expired;
    });
  }

  /**
   * Applies what the chain watcher saw of one ERC-20 transfer matched to a crypto session. Safe to
   * repeat and to race (the session row is locked; one order per session; a transaction hash is on
   * at most one order, by a unique index):
   * - `seen`: creates the order PENDING (`order.pending`), or re-attaches a FAILED one (after a
   *   reorganization); the session becomes COMPLETE unless it is already EXPIRED (a late payment).
   * - `confirmed`: PENDING → PAID (`order.paid`), or UNDERPAID (`order.failed`) when less than the
   *   quote arrived (the session then becomes FAILED, unless EXPIRED).
   * - `removed` (reorganized away before confirmation): PENDING → FAILED (`order.failed`); the
   *   session is payable again (CREATED) until its expiry.
   * Returns `duplicate` when the session was already paid by another transfer (no order change).
   */
  applyCryptoTransfer(result: CryptoTransferResult): Promise<{ outcome: 'applied' | 'unchanged' | 'duplicate'; order?: Order }> {
    return this.uow.transaction(async (stores) => {
      const session = await stores.sessions.findForUpdate(result.checkoutSessionId);
      if (!session) throw notFound('Checkout session');
      const now = this.clock.now();
      const existing = await stores.orders.findBySession(session.id);
      const sameTx = existing?.chain === result.chain && existing?.txHash === result.txHash;
      const emit = (order: Order, type: 'order.pending' | 'order.paid' | 'order.failed') =>
        stores.emit({ orgId: order.orgId, type, data: { order: presentWebhookOrder(order, { recipient: result.recipient }) } }, now);

      if (result.event === 'seen') {
        if (existing && sameTx && existing.status !== 'FAILED') return { outcome: 'unchanged', order: existing };
        if (existing && existing.status !== 'FAILED') return { outcome: 'duplicate', order: existing };
        const customer = session.customerId
          ? await stores.customers.find(session.orgId, session.customerId)
          : session.customerEmail
            ? await withExternalId(stores, session, await stores.customers.findOrCreateByEmail({ id: newId('CUS'), orgId: session.orgId, email: session.customerEmail, externalId: null, createdAt: now }))
            : undefined;
        // Quotes are issued only to sessions with a customer, so this is a broken invariant, not a buyer error.
        if (!customer) throw new Error(`crypto session ${session.id} has a matched transfer but no customer`);
        const attached = { chain: result.chain, fromAddress: result.fromAddress, txHash: result.txHash, amountReceivedCents: result.valueUnits };
        let order: Order;
        if (existing) {
          order = { ...existing, ...attached, status: 'PENDING', updatedAt: now };
          assertWritten(await stores.orders.update(order, existing.status), 'order');
        } else {
          order = orderForSession(session, customer, now, { status: 'PENDING', ...attached });
          await stores.orders.insert(order);
        }
        const open = session.status === 'CREATED' && session.expiresAt.getTime() > now.getTime();
        const sessionStatus = open ? 'COMPLETE' : session.status === 'CREATED' ? 'EXPIRED' : session.status;
        assertWritten(
          await stores.sessions.update({ ...session, status: sessionStatus, customerId: customer.id, customerEmail: customer.email, updatedAt: now }, session.status),
          'checkout session',
        );
        await emit(order, 'order.pending');
        return { outcome: 'applied', order };
      }

      if (!existing || !sameTx || existing.status !== 'PENDING') return { outcome: 'unchanged', order: existing };
      if (result.event === 'confirmed') {
        const paid = result.valueUnits >= result.quotedUnits;
        const order: Order = { ...existing, status: paid ? 'PAID' : 'UNDERPAID', amountReceivedCents: result.valueUnits, updatedAt: now };
        assertWritten(await stores.orders.update(order, 'PENDING'), 'order');
        if (!paid && session.status === 'COMPLETE') assertWritten(await stores.sessions.update({ ...session, status: 'FAILED', updatedAt: now }, 'COMPLETE'), 'checkout session');
        if (paid) await grantCredits(stores, session, order, now);
        await emit(order, paid ? 'order.paid' : 'order.failed');
        return { outcome: 'applied', order };
      }
      // removed: the transfer is no longer on the chain; the buyer can pay again while the session lives.
      const order: Order = { ...existing, status: 'FAILED', updatedAt: now };
      assertWritten(await stores.orders.update(order, 'PENDING'), 'order');
      if (session.status === 'COMPLETE') {
        const reopened = session.expiresAt.getTime() > now.getTime() ? 'CREATED' : 'EXPIRED';
        assertWritten(await stores.sessions.update({ ...session, status: reopened, updatedAt: now }, 'COMPLETE'), 'checkout session');
      }
      await emit(order, 'order.failed');
      return { outcome: 'applied', order };
    });
  }

  /**
   * Records a settled x402 payment as a PAID order (provider CRYPTO, no checkout session) and
   * emits `order.paid`, in one transaction. Safe to repeat and to race: a transaction hash is on
   * at most one order (unique index), and an existing order for it is returned unchanged — unless
   * a reorganization had failed it (see applyX402Removed) and its transaction is back on the
   * chain: then it is PAID again (`order.paid`), as the watcher re-attaches a reappeared transfer.
   */
  applyX402Settlement(result: X402SettlementResult): Promise<{ outcome: 'applied' | 'unchanged'; order: Order }> {
    return this.uow.transaction(async (stores) => {
      const found = await stores.orders.findByChainTx(result.chain, result.txHash);
      const existing = found && (await stores.orders.findForUpdate(found.id));
      const now = this.clock.now();
      if (existing?.status === 'FAILED') {
        const order: Order = { ...existing, status: 'PAID', updatedAt: now };
        assertWritten(await stores.orders.update(order, 'FAILED'), 'order');
        await stores.emit({ orgId: order.orgId, type: 'order.paid', data: { order: presentWebhookOrder(order, { recipient: result.recipient }) } }, now);
        return { outcome: 'applied', order };
      }
      if (existing) return { outcome: 'unchanged', order: existing };
      const customer = await stores.customers.findOrCreateByEmail({
        id: newId('CUS'),
        orgId: result.orgId,
        email: x402CustomerEmail(result.fromAddress),
        externalId: null,
        createdAt: now,
      });
      const priced = singleCharge(result.product.name, result.valueUnits, { productId: result.product.productId });
      const order: Order = {
        id: newId('ORD'),
        orgId: result.orgId,
        status: 'PAID',
        provider: 'CRYPTO',
        amountCents: priced.total,
        amountRefundedCents: 0,
        currency: result.currency,
        customerId: customer.id,
        customerEmail: customer.email,
        productId: result.product.productId,
        productName: result.product.name,
        paymentLinkId: null,
        checkoutSessionId: null,
        subscriptionId: null,
        originalOrderId: null,
        merchantReference: null,
        merchantMetadata: null,
        note: null,
        disputed: false,
        settledAvailableOn: null,
        chain: result.chain,
        fromAddress: result.fromAddress,
        txHash: result.txHash,
        amountReceivedCents: result.valueUnits,
        processorPaymentId: result.settlementId,
        processorStatus: null,
        paymentMethod: null,
        billingPeriod: null,
        lines: priced.lines,
        createdAt: now,
        updatedAt: now,
      };
      // A concurrent settle of the same transaction may have inserted it since the read above.
      if (!(await stores.orders.insertUnlessTxRecorded(order))) {
        return { outcome: 'unchanged', order: (await stores.orders.findByChainTx(result.chain, result.txHash))! };
      }
      await stores.emit({ orgId: order.orgId, type: 'order.paid', data: { order: presentWebhookOrder(order, { recipient: result.recipient }) } }, now);
      return { outcome: 'applied', order };
    });
  }

  /**
   * An x402 settlement's transaction is no longer on the canonical chain (a reorganization): its
   * PAID order becomes FAILED (`order.failed`), as a crypto checkout's vanished transfer fails its
   * order; it is PAID again if the transaction comes back (applyX402Settlement). Any other status
   * (refunded, failed already) is left as it is. Under the order's row lock.
   */
  applyX402Removed(result: { chain: string; txHash: string; recipient: string }): Promise<{ outcome: 'applied' | 'unchanged'; order?: Order }> {
    return this.uow.transaction(async (stores) => {
      const found = await stores.orders.findByChainTx(result.chain, result.txHash);
      const existing = found && (await stores.orders.findForUpdate(found.id));
      if (!existing || existing.status !== 'PAID') return { outcome: 'unchanged' as const, ...(existing ? { order: existing } : {}) };
      const now = this.clock.now();
      const order: Order = { ...existing, status: 'FAILED', updatedAt: now };
      assertWritten(await stores.orders.update(order, 'PAID'), 'order');
      await stores.emit({ orgId: order.orgId, type: 'order.failed', data: { order: presentWebhookOrder(order, { recipient: result.recipient }) } }, now);
      return { outcome: 'applied' as const, order };
    });
  }

  /**
   * Called inside the payment-result transaction when the first order of a SUBSCRIPTION checkout
   * becomes PAID: creates the subscription (once per session) and links the order to it. One the
   * processor's billing renews starts on the processor's first period (its renewals arrive as
   * events; Kassa's renewal job leaves it alone). Returns the subscription too, for the order's
   * webhook payload (`providerSubscriptionId`).
   */
  private async startSubscription(
    stores: CommerceStores,
    session: CheckoutSession,
    order: Order,
    now: Date,
    processor?: PaymentResult['processorSubscription'],
  ): Promise<{ order: Order; subscription?: Subscription }> {
    if (session.pricing.pricingType !== 'SUBSCRIPTION' || !session.pricing.billingInterval) return { order };
    const started = await stores.subscriptions.findBySession(session.id);
    if (started) return { order, subscription: started };
    const base = {
      billingAnchor: processor?.periodStart ?? now,
      anchorPeriod: 0,
      billingInterval: session.pricing.billingInterval,
      billingIntervalCount: session.pricing.billingIntervalCount,
    };
    const trial = trialOf(session, now);
    // A trial is period 0; the paid periods are counted from its end (period 1 starts at trialEnd).
    if (trial && !processor) Object.assign(base, { billingAnchor: trial.end, anchorPeriod: 1 });
    const currentPeriodEnd = processor?.periodEnd ?? trial?.end ?? periodEnd(base, 0);
    // The recurring charge is the session's total (unit amount × quantity) before any discount,
    // with the session's tax on it: each renewal applies the checkout's coupon for its own periods
    // and taxes the discounted amount (commerce/renewal-order.ts).
    const recurring = session.pricing.discount ? priceWithTax(sessionChargeInputs(session), session.tax).total : session.amount;
    const seatsBase = session.pricing.discount || session.tax ? priceWithTax(sessionChargeInputs(session), null).total : session.amount;
    const subscription: Subscription = {
      ...base,
      id: newId('SUB'),
      orgId: session.orgId,
      status: 'ACTIVE',
      provider: 'STRIPE',
      customerId: order.customerId,
      customerEmail: order.customerEmail,
      productId: session.product.productId,
      productName: session.product.name,
      priceId: session.pricing.pricingId,
      amountCents: recurring,
      // Seats: the session's quantity when its charges before discount and tax are unit × quantity
      // (always, but for a pay-what-you-want amount).
      quantity: session.quantity >= 1 && seatsBase % session.quantity === 0 ? session.quantity : 1,
      scheduledChange: null,
      currency: session.currency,
      currentPeriodStart: processor?.periodStart ?? now,
      currentPeriodEnd,
      trialEnd: trial ? (processor?.periodEnd ?? trial.end) : null,
      periodNumber: 0,
      cancelAtPeriodEnd: false,
      canceledAt: null,
      endedAt: null,
      pausedAt: null,
      nextActionAt: currentPeriodEnd,
      failedAttempts: 0,
      initialOrderId: order.id,
      latestOrderId: order.id,
      checkoutSessionId: session.id,
      paymentMethod: order.paymentMethod ?? 'none',
      manageToken: randomToken(32),
      processorSubscriptionId: processor?.id ?? null,
      paymentAction: null,
      // The processor's price Kassa made for this plan (issue 39): its item naming it is Kassa's plan.
      processorPrices: processor?.processorPriceId ? { [processor.processorPriceId]: { priceId: session.pricing.pricingId, productId: session.product.productId, productName: session.product.name } } : null,
      processorMismatch: null,
      createdAt: now,
      updatedAt: now,
    };
    await stores.subscriptions.insert(subscription);
    const linked: Order = { ...order, subscriptionId: subscription.id, billingPeriod: 0 };
    assertWritten(await stores.orders.update(linked, order.status), 'order');
    await stores.emit({ orgId: subscription.orgId, type: 'subscription.created', data: { subscription: presentWebhookSubscription(subscription) } }, now);
    return { order: linked, subscription };
  }
}

/**
 * A credit pack's grant (issue 38): the session's `grantsUnits` × quantity units of the meter to the
 * order's customer, in the transaction that makes the order PAID. Exactly once per order (the
 * ledger's unique (order, GRANT) entry): a repeated, late or concurrent payment result grants
 * nothing more.
 */
async function grantCredits(stores: CommerceStores, session: CheckoutSession, order: Order, now: Date): Promise<void> {
  const grant = session.pricing.grantsUnits;
  if (!grant) return;
  await stores.credits.grant({ orgId: order.orgId, customerId: order.customerId, meterId: grant.meterId, units: grant.units * session.quantity, orderId: order.id, at: now });
}

/**
 * The customer's balance a checkout drew when its payment started (issue 39), given back when the
 * session ends unpaid (expired): `RESTORED`, once, in the caller's transaction under the session's
 * row lock — unless an order other than FAILED holds the session (its payment used the draw).
 */
export async function restoreUnpaidDraw(stores: CommerceStores, session: Pick<CheckoutSession, 'id' | 'pricing'>, at: Date): Promise<void> {
  const drawOrderId = session.pricing.balance?.orderId;
  if (!drawOrderId) return;
  const order = await stores.orders.findBySession(session.id);
  if (order && order.status !== 'FAILED') return;
  await stores.balances.restore(drawOrderId, at);
}

/**
 * A new order paying a checkout session's purchase snapshot; `fields` sets the rail-specific parts.
 * A session that drew the customer's balance (issue 39) gets the order id reserved for the draw and
 * ends with the `CREDIT` "Applied balance" line (charges → DISCOUNT → TAX → CREDIT, as renewals).
 */
function orderForSession(session: CheckoutSession, customer: Customer, now: Date, fields: Pick<Order, 'status'> & Partial<Order>): Order {
  const trial = trialOf(session, now);
  const priced = trial ? trialLines(session, trial.days) : sessionLines(session);
  const drawn = trial ? undefined : session.pricing.balance;
  const lines = drawn ? [...priced.lines, amountLine('CREDIT', APPLIED_BALANCE_DESCRIPTION, -drawn.amountCents)] : priced.lines;
  return {
    id: drawn?.orderId ?? newId('ORD'),
    orgId: session.orgId,
    provider: session.provider,
    amountCents: priced.total - (drawn?.amountCents ?? 0),
    lines,
    amountRefundedCents: 0,
    currency: session.currency,
    customerId: customer.id,
    customerEmail: customer.email,
    productId: session.product.productId,
    productName: session.product.name,
    paymentLinkId: session.paymentLinkId,
    checkoutSessionId: session.id,
    subscriptionId: null,
    originalOrderId: null,
    merchantReference: session.merchantReference,
    merchantMetadata: session.metadata,
    note: null,
    disputed: false,
    settledAvailableOn: null,
    chain: null,
    fromAddress: null,
    txHash: null,
    processorPaymentId: null,
    processorStatus: null,
    paymentMethod: null,
    billingPeriod: null,
    createdAt: now,
    updatedAt: now,
    ...fields,
  };
}

const DAY_MS = 24 * 3600 * 1000;

/** A checkout's free trial (issue 39): its days and its end, counted from the checkout's payment. */
export function trialOf(session: Pick<CheckoutSession, 'pricing'>, now: Date): { days: number; end: Date } | undefined {
  const days = session.pricing.pricingType === 'SUBSCRIPTION' ? (session.pricing.trialDays ?? 0) : 0;
  return days > 0 ? { days, end: new Date(now.getTime() + days * DAY_MS) } : undefined;
}

/** Order transitions a payment result may cause; undefined = no change. */
function nextStatus(current: Order['status'], outcome: PaymentOutcome): Order['status'] | undefined {
  switch (current) {
    case 'PENDING':
      return outcome === 'succeeded' ? 'PAID' : outcome === 'failed' ? 'FAILED' : undefined;
    case 'FAILED':
      // A processor can report success after an earlier failure (a retried asynchronous payment).
      return outcome === 'succeeded' ? 'PAID' : undefined;
    default:
      // PAID, REFUNDED, UNDERPAID: protected against duplicates and regression.
      return undefined;
  }
}
