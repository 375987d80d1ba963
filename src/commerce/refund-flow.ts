/**
 * Refunds and disputes of an order after its payment (issue 28): each is recorded once as an
 * object (keyed by the processor's id) and announced once by a webhook event in the same
 * transaction — `order.refunded`, `order.refund_failed`, `order.dispute_created`,
 * `order.dispute_closed`. Kassa's own refunds (OrderService) and the processor's reports (Stripe's
 * refund and dispute events) meet here, under the order's row lock, so a refund Kassa made and
 * Stripe's event about it count once whichever lands first.
 */
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import { notFound } from '../kernel/errors.js';
import { DISPUTE_CLOSED, type Order, type OrderDispute, type OrderRefund, type RefundReason, type RefundStatus } from './model.js';
import { presentDispute, presentRefund, presentWebhookOrder } from './order.presenter.js';
import { assertWritten, type CommerceStores, type CommerceUnitOfWork } from './stores.js';

/** A refund as the processor reports it now (Stripe's Refund, read back). */
export interface ProcessorRefund {
  processorRefundId: string;
  amountCents: number;
  status: RefundStatus;
  reason: RefundReason | null;
  failureReason: string | null;
}

/** A dispute as the processor reports it now (Stripe's Dispute, read back). */
export interface ProcessorDispute {
  processorDisputeId: string;
  amountCents: number;
  currency: string;
  reason: string;
  status: string;
  evidenceDueBy: Date | null;
}

/** Refunds in these statuses count in the order's refunded total (Stripe's `amount_refunded` counts pending ones too). */
export const countsAsRefunded = (status: RefundStatus): boolean => status === 'pending' || status === 'succeeded';

/** The order's status for a refunded total: REFUNDED at the full amount, PAID below it. */
const statusFor = (order: Order, refunded: number): Order['status'] => (refunded >= order.amountCents ? 'REFUNDED' : 'PAID');

/**
 * Records a new refund of `order` (locked by the caller) and emits `order.refunded`: the refunded
 * total grows by its amount (when it counts) and the order follows. Returns the order after it.
 */
export async function recordRefund(
  stores: CommerceStores,
  order: Order,
  refund: Pick<OrderRefund, 'amountCents' | 'reason' | 'status' | 'source' | 'processorRefundId' | 'failureReason'>,
  now: Date,
): Promise<{ order: Order; refund: OrderRefund }> {
  const row: OrderRefund = { ...refund, id: newId('RFD'), orgId: order.orgId, orderId: order.id, currency: order.currency, createdAt: now, updatedAt: now };
  await stores.refunds.insert(row);
  // A refund that had already failed when Kassa first heard of it never counted: recorded, not announced.
  if (!countsAsRefunded(row.status)) return { order, refund: row };
  const refunded = Math.min(order.amountCents, order.amountRefundedCents + row.amountCents);
  const updated: Order = { ...order, amountRefundedCents: refunded, status: statusFor(order, refunded), updatedAt: now };
  assertWritten(await stores.orders.update(updated, order.status), 'order');
  // A credit pack refunded in full takes back what is left of its units (issue 38; once per order).
  if (updated.status === 'REFUNDED' && order.status !== 'REFUNDED') await stores.credits.revokeOrderGrant(order.id, now);
  await stores.emit({ orgId: order.orgId, type: 'order.refunded', data: { order: presentWebhookOrder(updated), refund: presentRefund(row) } }, now);
  // The buyer hears of it too (an e-mail, when SMTP is configured), in the same transaction.
  await stores.notifyBuyerOfRefund(updated, refunded - order.amountRefundedCents, now);
  return { order: updated, refund: row };
}

export class RefundFlow {
  constructor(
    private readonly uow: CommerceUnitOfWork,
    private readonly clock: Clock,
  ) {}

  /**
   * Applies the processor's refunds of the order's payment, read by `read` with the order's row
   * locked (so of two concurrent events the later one reads, and writes, the newer state):
   * - a refund Kassa has not recorded yet (made in the Stripe Dashboard, or Kassa's own whose
   *   recording was lost) is recorded with source `dashboard` and announced (`order.refunded`);
   * - a recorded refund that now failed or was canceled is taken back out of the refunded total,
   *   a REFUNDED order is PAID again, and `order.refund_failed` says so (once: the row's status
   *   changes under a conditional write);
   * - any other change of a refund's status (pending → succeeded) is stored, with no event.
   * Only PAID and REFUNDED orders take refunds; others are left alone.
   */
  applyProcessorRefunds(orderId: string, read: () => Promise<ProcessorRefund[]>): Promise<{ outcome: 'applied' | 'unchanged'; order: Order }> {
    return this.uow.transaction(async (stores) => {
      let order = await stores.orders.findForUpdate(orderId);
      if (!order) throw notFound('Order');
      if (order.status !== 'PAID' && order.status !== 'REFUNDED') return { outcome: 'unchanged' as const, order };
      const now = this.clock.now();
      let changed = false;
      // Refunded cents that no refund row accounts for: totals counted before refunds were rows
      // (migration 0130). Stripe's refunds met for the first time adopt them before anything new counts.
      const rows = await stores.refunds.listForOrder(order.orgId, order.id);
      let uncovered = order.amountRefundedCents - rows.filter((r) => countsAsRefunded(r.status)).reduce((sum, r) => sum + r.amountCents, 0);
      for (const reported of await read()) {
        const known = await stores.refunds.findByProcessorId(reported.processorRefundId);
        if (!known && countsAsRefunded(reported.status) && reported.amountCents <= uncovered) {
          await stores.refunds.insert({ ...reported, source: 'dashboard', id: newId('RFD'), orgId: order.orgId, orderId: order.id, currency: order.currency, createdAt: now, updatedAt: now });
          uncovered -= reported.amountCents;
          changed = true;
          continue;
        }
        if (!known) {
          ({ order } = await recordRefund(stores, order, { ...reported, source: 'dashboard' }, now));
          changed = true;
          continue;
        }
        if (known.orderId !== order.id || known.status === reported.status) continue;
        const next: OrderRefund = { ...known, status: reported.status, failureReason: reported.failureReason ?? known.failureReason, updatedAt: now };
        assertWritten(await stores.refunds.update(next, known.status), 'refund');
        changed = true;
        if (countsAsRefunded(known.status) && !countsAsRefunded(next.status)) {
          const refunded = Math.max(0, order.amountRefundedCents - known.amountCents);
          const updated: Order = { ...order, amountRefundedCents: refunded, status: statusFor(order, refunded), updatedAt: now };
          assertWritten(await stores.orders.update(updated, order.status), 'order');
          order = updated;
          await stores.emit({ orgId: order.orgId, type: 'order.refund_failed', data: { order: presentWebhookOrder(order), refund: presentRefund(next) } }, now);
        }
      }
      return { outcome: changed ? ('applied' as const) : ('unchanged' as const), order };
    });
  }

  /**
   * Applies a dispute as the processor reports it now, under the order's row lock: a new one is
   * recorded, marks the order `disputed` (for good, as the spec's flag) and emits
   * `order.dispute_created`; one that is closed now and was not before emits
   * `order.dispute_closed` with its outcome (a dispute first seen closed emits both, in order).
   * Status and refunded amount of the order never change (a lost dispute is not a refund).
   */
  applyDispute(orderId: string, reported: ProcessorDispute): Promise<{ outcome: 'applied' | 'unchanged'; order: Order }> {
    return this.uow.transaction(async (stores) => {
      let order = await stores.orders.findForUpdate(orderId);
      if (!order) throw notFound('Order');
      const now = this.clock.now();
      const closed = DISPUTE_CLOSED.has(reported.status);
      const outcome: OrderDispute['outcome'] = !closed ? null : reported.status === 'lost' ? 'lost' : 'won';
      const emit = (type: 'order.dispute_created' | 'order.dispute_closed', dispute: OrderDispute) =>
        stores.emit({ orgId: order!.orgId, type, data: { order: presentWebhookOrder(order!), dispute: presentDispute(dispute) } }, now);

      let known = await stores.disputes.findByProcessorId(reported.processorDisputeId);
      if (!order.disputed) {
        const flagged: Order = { ...order, disputed: true, updatedAt: now };
        assertWritten(await stores.orders.update(flagged, order.status), 'order');
        order = flagged;
      }
      if (!known) {
        const opened: OrderDispute = {
          id: newId('DSP'),
          orgId: order.orgId,
          orderId: order.id,
          ...reported,
          // Announced open first, even when first seen closed: receivers see every dispute open and close.
          status: closed ? 'needs_response' : reported.status,
          outcome: null,
          createdAt: now,
          updatedAt: now,
          closedAt: null,
        };
        await stores.disputes.insert(opened);
        await emit('order.dispute_created', opened);
        known = opened;
        if (!closed) return { outcome: 'applied' as const, order };
      }
      const wasClosed = DISPUTE_CLOSED.has(known.status);
      if (wasClosed || (known.status === reported.status && known.amountCents === reported.amountCents && known.evidenceDueBy?.getTime() === reported.evidenceDueBy?.getTime())) {
        return { outcome: 'unchanged' as const, order };
      }
      const next: OrderDispute = { ...known, ...reported, outcome, updatedAt: now, closedAt: closed ? now : null };
      assertWritten(await stores.disputes.update(next, known.status), 'dispute');
      if (closed) await emit('order.dispute_closed', next);
      return { outcome: 'applied' as const, order };
    });
  }
}
