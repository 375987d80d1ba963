/** Orders: refunds and reads (payment results are applied by commerce/payment-flow.ts). */
import { createHash } from 'node:crypto';
import type { Clock } from '../kernel/clock.js';
import { AppError, conflict, notFound, validationError } from '../kernel/errors.js';
import { assertWritten, type CommerceStores, type CommerceUnitOfWork } from '../commerce/stores.js';
import type { Order, OrderDispute, OrderFilter, OrderRefund, RefundReason } from '../commerce/model.js';
import { countsAsRefunded, recordRefund } from '../commerce/refund-flow.js';
import { resolveWindow, type ListRequest } from '../kernel/list.js';
import { primaryReads, type LagTolerantReads } from '../kernel/lag-tolerant-reads.js';
import { isStripeInvoiceSettlement, isStripePaymentId, type CardRefunds } from '../processors/card-processor.js';

/** A refund's Idempotency-Key is remembered this long (like checkout sessions' keys). */
export const REFUND_IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

/** What the order and customer lists read: on a replica when one is fresh enough for the organization. */
export type ListStores = Pick<CommerceStores, 'orders' | 'customers'>;

export class OrderService {
  private readonly listReads: LagTolerantReads<ListStores>;

  constructor(
    private readonly uow: CommerceUnitOfWork,
    private readonly clock: Clock,
    /** Refunds through Stripe, when it is the card processor. */
    private readonly cardRefunds?: CardRefunds,
    listReads?: LagTolerantReads<ListStores>,
  ) {
    this.listReads = listReads ?? primaryReads({ orders: uow.stores.orders, customers: uow.stores.customers });
  }

  /**
   * Full refund → REFUNDED; partial → stays PAID with amountRefundedCents. The session stays COMPLETE.
   * An order paid through Stripe is refunded there first, under the order's row lock (one refund
   * at a time per order), with an idempotency key naming the refunded total it starts from: a
   * retry after Kassa failed to record a refund Stripe made replays that refund, never a second.
   * A payment transferred to a connected account is refunded with its transfer reversed.
   * The refund is recorded (order_refunds, with its reason) and announced (`order.refunded`) in
   * the transaction that updates the order; a refund Stripe's event already recorded (the same
   * `re_…`, replayed by the idempotency key) is not counted again.
   */
  async refund(orderId: string, amount?: number, reason?: RefundReason): Promise<Order> {
    return this.uow.transaction(async (stores) => {
      const order = await stores.orders.findForUpdate(orderId);
      if (!order) throw notFound('Order');
      return this.refundLocked(stores, order, amount, reason);
    });
  }

  /**
   * The console's refund: the same refund, of an order of `orgId` only (another organization's is
   * 404), once per Idempotency-Key. The key is claimed in the refund's transaction, under the
   * order's row lock, so a repeated request waits for the first and then replays its answer (the
   * order as it is now, `replayed`); a key used for other parameters is IDEMPOTENCY_KEY_REUSED. A
   * refund that fails rolls the claim back with it: the same key may be retried.
   */
  async refundOnce(input: { orgId: string; orderId: string; amount?: number; reason?: RefundReason; idempotencyKey: string }): Promise<{ order: Order; replayed: boolean }> {
    const requestHash = createHash('sha256').update(JSON.stringify([input.orderId, input.amount ?? null, input.reason ?? null])).digest('hex');
    return this.uow.transaction(async (stores) => {
      const order = await stores.orders.findForUpdate(input.orderId);
      if (!order || order.orgId !== input.orgId) throw notFound('Order');
      const now = this.clock.now();
      const expiredBefore = new Date(now.getTime() - REFUND_IDEMPOTENCY_TTL_MS);
      const reused = () => new AppError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used for another refund request; use a new key for a new refund');
      const record = await stores.refunds.findIdempotencyKey(input.orgId, input.idempotencyKey, expiredBefore);
      if (record) {
        if (record.requestHash !== requestHash) throw reused();
        return { order, replayed: true };
      }
      const claimed = await stores.refunds.claimIdempotencyKey({ orgId: input.orgId, key: input.idempotencyKey, requestHash, orderId: order.id, createdAt: now }, expiredBefore);
      // Another order's refund holds the key (the same order's would have waited for this lock).
      if (!claimed) throw reused();
      return { order: await this.refundLocked(stores, order, input.amount, input.reason), replayed: false };
    });
  }

  private async refundLocked(stores: CommerceStores, order: Order, amount: number | undefined, reason: RefundReason | undefined): Promise<Order> {
    if (order.status !== 'PAID') throw conflict(`Only PAID orders can be refunded; this order is ${order.status}`);
    const remaining = order.amountCents - order.amountRefundedCents;
    const refundAmount = amount ?? remaining;
    if (refundAmount < 1) throw validationError('amount must be at least 1');
    if (refundAmount > remaining) throw validationError(`amount exceeds the refundable ${remaining} (minor units)`);
    // Recording a refund Stripe never made would show money returned that was not.
    if (isStripeInvoiceSettlement(order.processorPaymentId)) {
      throw conflict(`This order was settled in Stripe without a card payment (${order.processorPaymentId}); refund it in the Stripe Dashboard (a credit note)`);
    }
    if (isStripePaymentId(order.processorPaymentId)) {
      if (!this.cardRefunds) throw conflict('This order was paid through Stripe; it can be refunded only while Stripe is the card processor (STRIPE_SECRET_KEY)');
      const made = await this.cardRefunds.refund({
        processorPaymentId: order.processorPaymentId,
        amount: refundAmount,
        idempotencyKey: await this.refundKey(stores, order),
        reverseTransfer: (await this.connectedAccountPaid(stores, order)) !== null,
        ...(reason && { reason }),
      });
      const known = await stores.refunds.findByProcessorId(made.refundId);
      if (known && !countsAsRefunded(known.status)) throw conflict(`Stripe answered with refund ${made.refundId}, which already ${known.status}; nothing was refunded`);
      if (known) return order;
      const status = made.status ?? 'succeeded';
      // Stripe answered with a refund that already failed: nothing was returned, so nothing is counted.
      if (!countsAsRefunded(status)) throw conflict(`Stripe could not make the refund (${made.failureReason ?? status}); nothing was refunded`);
      const recorded = await recordRefund(stores, order, { amountCents: refundAmount, reason: reason ?? null, status, source: 'kassa', processorRefundId: made.refundId, failureReason: null }, this.clock.now());
      return recorded.order;
    }
    // The sandbox and crypto: the refund is Kassa's record (money is returned outside Kassa).
    return (await recordRefund(stores, order, { amountCents: refundAmount, reason: reason ?? null, status: 'succeeded', source: 'kassa', processorRefundId: null, failureReason: null }, this.clock.now())).order;
  }

  /**
   * The idempotency key of the order's next Stripe refund: the refunded total it starts from (a
   * retry after a crash replays the refund Stripe made), and how many of its refunds failed since
   * (after a failure the total is back where it was, and the same key would replay the failed one).
   */
  private async refundKey(stores: CommerceStores, order: Order): Promise<string> {
    const failed = (await stores.refunds.listForOrder(order.orgId, order.id)).filter((r) => !countsAsRefunded(r.status)).length;
    return `kassa_refund_${order.id}_${order.amountRefundedCents}${failed > 0 ? `_f${failed}` : ''}`;
  }

  /** The order's refunds, oldest first (404 for an order of another organization). */
  async listRefunds(orgId: string, orderId: string): Promise<OrderRefund[]> {
    await this.get(orgId, orderId);
    return this.uow.stores.refunds.listForOrder(orgId, orderId);
  }

  /** The order's disputes, oldest first (404 for an order of another organization). */
  async listDisputes(orgId: string, orderId: string): Promise<OrderDispute[]> {
    await this.get(orgId, orderId);
    return this.uow.stores.disputes.listForOrder(orgId, orderId);
  }

  /**
   * The Stripe connected account the order's payment was transferred to, as its checkout session
   * recorded it (a renewal: its subscription's session), never the organization's binding now.
   */
  private async connectedAccountPaid(stores: CommerceStores, order: Order): Promise<string | null> {
    const sessionId = order.checkoutSessionId ?? (order.subscriptionId ? (await stores.subscriptions.find(order.orgId, order.subscriptionId))?.checkoutSessionId : undefined);
    const session = sessionId ? await stores.sessions.find(order.orgId, sessionId) : undefined;
    return session?.processorAccountId ?? null;
  }

  async get(orgId: string, id: string): Promise<Order> {
    const order = await this.uow.stores.orders.find(orgId, id);
    if (!order) throw notFound('Order');
    return order;
  }

  findBySession(checkoutSessionId: string): Promise<Order | undefined> {
    return this.uow.stores.orders.findBySession(checkoutSessionId);
  }

  /** A page of orders; lists may lag (a replica), except right after the organization's own write. */
  async list(orgId: string, filter: OrderFilter, request: ListRequest) {
    return this.listReads.read(orgId, async ({ orders }) => orders.list(orgId, filter, await resolveWindow(request, (id) => orders.keyset(orgId, id), 'order')));
  }

  async getCustomer(orgId: string, id: string) {
    const customer = await this.uow.stores.customers.findWithOrders(orgId, id);
    if (!customer) throw notFound('Customer');
    return customer;
  }

  /** Sets or removes the merchant's own id of a customer; one another customer holds is a conflict. */
  async updateCustomer(orgId: string, id: string, update: { externalId: string | null }) {
    const customers = this.uow.stores.customers;
    if (!(await customers.findWithOrders(orgId, id))) throw notFound('Customer');
    if (!(await customers.setExternalId(orgId, id, update.externalId))) {
      throw conflict(`Another customer of this organization has externalId ${update.externalId}`);
    }
    return (await customers.findWithOrders(orgId, id))!;
  }

  async listCustomers(orgId: string, filter: { email?: string; externalId?: string }, request: ListRequest) {
    return this.listReads.read(orgId, async ({ customers }) => customers.listWithOrders(orgId, filter, await resolveWindow(request, (id) => customers.keyset(orgId, id), 'customer')));
  }
}

