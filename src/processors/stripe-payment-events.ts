/**
 * Stripe's payment events beyond the Checkout Session's own (docs/card-processors.md): a declined
 * attempt (`payment_intent.payment_failed`), refunds (`charge.refunded`, `refund.*`, made through
 * Kassa or in Stripe's Dashboard, and their failures), disputes (`charge.dispute.*`), and the refund of an
 * orphan Checkout Session (one Kassa opened but never stored) that a buyer paid. Like every Stripe
 * event, each reads the object back from Stripe and applies what it is now, through PaymentFlow.
 */
import Stripe from 'stripe';
import type { CheckoutSession, Order, ProviderFailure, RefundReason } from '../commerce/model.js';
import type { ProcessorRefund, RefundFlow } from '../commerce/refund-flow.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Clock } from '../kernel/clock.js';
import { serviceUnavailable } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import { KASSA_ORG_KEY, KASSA_SESSION_KEY, type StripeEventOutcome } from './stripe-metadata.js';
import { INTERACTIVE, withStripeRetries } from './stripe-retry.js';
import { refundStatus } from './stripe-refund-status.js';

/** Stripe's refund reasons Kassa takes; Stripe's own (`expired_uncaptured_charge`, …) are recorded without one. */
const REFUND_REASONS: readonly RefundReason[] = ['requested_by_customer', 'duplicate', 'fraudulent'];

const idOf = (ref: string | { id: string } | null | undefined): string | undefined => (typeof ref === 'string' ? ref : ref?.id);

export class StripePaymentEvents {
  constructor(
    private readonly stripe: Stripe,
    private readonly uow: CommerceUnitOfWork,
    private readonly refunds: RefundFlow,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Whether this deployment has an organization with this id: only then is an orphan Kassa's to refund. */
    private readonly isOwnOrganization: (orgId: string) => Promise<boolean>,
    /** Applies a Checkout Session as it is now (an order its charge event needs may not exist yet). */
    private readonly applyCheckoutSession: (stripeSessionId: string) => Promise<StripeEventOutcome>,
  ) {}

  /**
   * A declined attempt on Stripe's page: the session's `lastError`, written only while it is still
   * open (recordAttemptFailure is conditional on CREATED) and only while the PaymentIntent still
   * asks for another payment method (a later success makes the failure old news).
   */
  async paymentFailed(event: Stripe.PaymentIntentPaymentFailedEvent): Promise<StripeEventOutcome> {
    const intent = await this.readBack('PaymentIntent', () => this.stripe.paymentIntents.retrieve(event.data.object.id));
    const session = intent && (await this.kassaSession(intent.metadata));
    if (!intent || !session) return 'ignored';
    if (!(await this.isSessionsOwnIntent(session, intent.id))) return 'ignored';
    // An asynchronous payment that failed after the session completed: its order fails with the session.
    if (session.status === 'COMPLETE' && session.processorSessionId) return this.applyCheckoutSession(session.processorSessionId);
    const error = intent.last_payment_error;
    if (intent.status !== 'requires_payment_method' || !error) return 'ignored';
    const failure: ProviderFailure = {
      code: error.decline_code ?? error.code ?? 'payment_failed',
      occurredAt: new Date(event.created * 1000).toISOString(),
      operation: 'charge',
      requestId: event.request?.id ?? error.charge ?? intent.id,
    };
    return (await this.uow.stores.sessions.recordAttemptFailure(session.id, failure, this.clock.now())) ? 'applied' : 'ignored';
  }

  /**
   * A refund made, changed or failed, whoever made it (Kassa, the Stripe Dashboard, Stripe):
   * `charge.refunded` (about the Charge), `refund.created` / `refund.updated` / `refund.failed` and
   * `charge.refund.updated` (about the Refund). Each reads the charge's refunds back from Stripe
   * with the order locked and applies them (RefundFlow.applyProcessorRefunds): every refund is
   * counted and announced once, a failed one is taken back out.
   */
  async refundsChanged(event: Stripe.ChargeRefundedEvent | Stripe.RefundCreatedEvent | Stripe.RefundUpdatedEvent | Stripe.RefundFailedEvent | Stripe.ChargeRefundUpdatedEvent): Promise<StripeEventOutcome> {
    let chargeId: string | undefined;
    if (event.type === 'charge.refunded') chargeId = event.data.object.id;
    else {
      const refund = await this.readBack('Refund', () => this.stripe.refunds.retrieve(event.data.object.id));
      chargeId = idOf(refund?.charge);
    }
    const charge = chargeId && (await this.readBack('Charge', () => this.stripe.charges.retrieve(chargeId)));
    const order = charge && (await this.orderOf(idOf(charge.payment_intent)));
    if (!charge || !order) return 'ignored';
    const applied = await this.refunds.applyProcessorRefunds(order.id, () => this.refundsOf(charge.id));
    return applied.outcome === 'applied' ? 'applied' : 'ignored';
  }

  /** Every refund of a charge as Stripe has it now, oldest first. */
  private async refundsOf(chargeId: string): Promise<ProcessorRefund[]> {
    const all: Stripe.Refund[] = [];
    try {
      await withStripeRetries(() => this.stripe.refunds.list({ charge: chargeId, limit: 100 }).autoPagingEach((r) => void all.push(r)), INTERACTIVE);
    } catch (err) {
      throw this.unreachable(err, 'list a charge\'s refunds');
    }
    const seen = new Set<string>();
    // Stripe lists newest first: reversed, then ordered by creation (stable within one second).
    return all
      .reverse()
      .filter((r) => !seen.has(r.id) && seen.add(r.id))
      .sort((a, b) => a.created - b.created)
      .map((r) => ({
        processorRefundId: r.id,
        amountCents: r.amount,
        status: refundStatus(r.status),
        reason: REFUND_REASONS.find((known) => known === r.reason) ?? null,
        failureReason: r.failure_reason ?? null,
      }));
  }

  /**
   * Opened, updated or closed (won or lost), a dispute is recorded as the order's dispute and
   * announced (RefundFlow.applyDispute: `order.dispute_created`, `order.dispute_closed`); the
   * order's `disputed` becomes true for good.
   */
  async dispute(event: Stripe.ChargeDisputeCreatedEvent | Stripe.ChargeDisputeUpdatedEvent | Stripe.ChargeDisputeClosedEvent): Promise<StripeEventOutcome> {
    const dispute = await this.readBack('Dispute', () => this.stripe.disputes.retrieve(event.data.object.id));
    if (!dispute) return 'ignored';
    let intentId = idOf(dispute.payment_intent);
    if (!intentId) {
      const charge = await this.readBack('Charge', () => this.stripe.charges.retrieve(idOf(dispute.charge)!));
      intentId = idOf(charge?.payment_intent);
    }
    const order = await this.orderOf(intentId);
    if (!order) return 'ignored';
    const dueBy = dispute.evidence_details?.due_by;
    const applied = await this.refunds.applyDispute(order.id, {
      processorDisputeId: dispute.id,
      amountCents: dispute.amount,
      currency: dispute.currency,
      reason: dispute.reason,
      status: dispute.status,
      evidenceDueBy: dueBy ? new Date(dueBy * 1000) : null,
    });
    return applied.outcome === 'applied' ? 'applied' : 'ignored';
  }

  /**
   * A paid Checkout Session that Kassa opened but does not have: its create timed out after Stripe
   * made it (the merchant's retry opened another), or it lost a concurrent create and could not be
   * expired. Nobody was given its page, but if it was paid anyway the buyer is refunded in full,
   * once (idempotency key per Checkout Session). Sessions of other integrations, or of another
   * Kassa deployment on the same Stripe account (an organization not found here), are left alone.
   */
  async refundOrphan(current: Stripe.Checkout.Session): Promise<StripeEventOutcome> {
    const orgId = current.metadata?.[KASSA_ORG_KEY];
    if (!orgId || !current.metadata?.[KASSA_SESSION_KEY] || !(await this.isOwnOrganization(orgId))) return 'ignored';
    const intentId = idOf(current.payment_intent);
    // Still open, expired unpaid, or an asynchronous payment still processing (its success event comes later).
    if (current.status !== 'complete' || current.payment_status !== 'paid' || !intentId) return 'ignored';
    try {
      const refund = await withStripeRetries(
        () => this.stripe.refunds.create({ payment_intent: intentId, metadata: { [KASSA_ORG_KEY]: orgId, reason: 'kassa_orphan_checkout' } }, { idempotencyKey: `kassa_orphan_refund_${current.id}` }),
        INTERACTIVE,
      );
      this.logger.warn({ stripeSessionId: current.id, refundId: refund.id, orgId }, 'Stripe: refunded a paid Checkout Session Kassa never stored (orphan of a failed create)');
      return 'applied';
    } catch (err) {
      // Already refunded in full (in the Dashboard, say): nothing is left to give back.
      if (err instanceof Stripe.errors.StripeInvalidRequestError && err.code === 'charge_already_refunded') return 'applied';
      throw this.unreachable(err, 'refund an orphan Checkout Session');
    }
  }

  /** The order a PaymentIntent paid; when Kassa has not applied its Checkout Session yet (events out of order), it is applied first. */
  private async orderOf(intentId: string | undefined): Promise<Order | undefined> {
    if (!intentId) return undefined;
    const order = await this.uow.stores.orders.findByProcessorPaymentId(intentId);
    if (order) return order;
    const intent = await this.readBack('PaymentIntent', () => this.stripe.paymentIntents.retrieve(intentId));
    const session = intent && (await this.kassaSession(intent.metadata));
    if (!session?.processorSessionId) return undefined;
    await this.applyCheckoutSession(session.processorSessionId);
    return this.uow.stores.orders.findByProcessorPaymentId(intentId);
  }

  /**
   * Metadata is whatever the maker of a PaymentIntent wrote (another integration on the account,
   * a call to Stripe's API by hand): an intent is a session's own only when the session's Checkout
   * Session, read back from Stripe, names it as its PaymentIntent.
   */
  private async isSessionsOwnIntent(session: CheckoutSession, intentId: string): Promise<boolean> {
    const checkout = session.processorSessionId ? await this.readBack('Checkout Session', () => this.stripe.checkout.sessions.retrieve(session.processorSessionId!)) : undefined;
    if (idOf(checkout?.payment_intent) === intentId) return true;
    this.logger.warn({ paymentIntentId: intentId, checkoutSessionId: session.id }, "Stripe: a PaymentIntent's metadata names a Kassa session it does not belong to; ignored");
    return false;
  }

  private async kassaSession(metadata: Stripe.Metadata | null | undefined): Promise<CheckoutSession | undefined> {
    const id = metadata?.[KASSA_SESSION_KEY];
    const orgId = metadata?.[KASSA_ORG_KEY];
    return id && orgId ? this.uow.stores.sessions.find(orgId, id) : undefined;
  }

  /** The object as Stripe has it now; undefined when Stripe has no such object (another account's event). */
  private async readBack<T>(what: string, read: () => Promise<T>): Promise<T | undefined> {
    try {
      return await withStripeRetries(read, INTERACTIVE);
    } catch (err) {
      if (err instanceof Stripe.errors.StripeInvalidRequestError && err.code === 'resource_missing') return undefined;
      throw this.unreachable(err, `read a ${what} back`);
    }
  }

  private unreachable(err: unknown, what: string) {
    const stripe = err instanceof Stripe.errors.StripeError ? { type: err.type, code: err.code, statusCode: err.statusCode, requestId: err.requestId } : undefined;
    this.logger.warn({ err: stripe ? undefined : err, stripe }, `Stripe: could not ${what}; the event is applied when Stripe redelivers it or reconciliation reads it`);
    return serviceUnavailable(`Stripe could not be reached to ${what}; redeliver the event`);
  }
}
