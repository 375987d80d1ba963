/**
 * The buyer e-mail outbox (migration 0141). Like the webhook outbox, the enqueue functions take the
 * CALLER's transaction: an e-mail is owed only if the state change that owes it commits.
 */
import type { Knex } from 'knex';
import { newId } from '../kernel/ids.js';

export type BuyerEmailKind =
  | 'payment_receipt'
  | 'subscription_started'
  | 'renewal_succeeded'
  | 'renewal_failed'
  | 'renewal_action_required'
  | 'subscription_canceled'
  | 'plan_changed'
  | 'trial_will_end'
  | 'subscription_ended'
  | 'refund_issued'
  | 'refund_failed';

export interface BuyerEmail {
  id: string;
  orgId: string;
  kind: BuyerEmailKind;
  to: string;
  orderId: string | null;
  subscriptionId: string | null;
  /** refund_issued: this refund's amount (minor units). */
  amountCents: number | null;
  attempts: number;
  createdAt: Date;
}

export interface OwedEmail {
  orgId: string;
  kind: BuyerEmailKind;
  to: string;
  orderId?: string;
  subscriptionId?: string;
  amountCents?: number;
  /** The fact the e-mail is about: queued twice, sent once. */
  dedupeKey: string;
}

/** Queues an e-mail inside the caller's transaction (nothing when its fact is already queued). */
export async function enqueueBuyerEmail(trx: Knex.Transaction, email: OwedEmail, now: Date): Promise<void> {
  await trx('buyer_emails')
    .insert({
      id: newId('EML'),
      org_id: email.orgId,
      kind: email.kind,
      to_address: email.to,
      order_id: email.orderId ?? null,
      subscription_id: email.subscriptionId ?? null,
      amount_cents: email.amountCents ?? null,
      dedupe_key: email.dedupeKey,
      next_attempt_at: now,
      created_at: now,
    })
    .onConflict('dedupe_key')
    .ignore();
}

interface BuyerEmailRow {
  id: string;
  org_id: string;
  kind: BuyerEmailKind;
  to_address: string;
  order_id: string | null;
  subscription_id: string | null;
  amount_cents: number | string | null;
  attempts: number;
  created_at: Date;
}

const toEmail = (r: BuyerEmailRow): BuyerEmail => ({
  id: r.id,
  orgId: r.org_id,
  kind: r.kind,
  to: r.to_address,
  orderId: r.order_id,
  subscriptionId: r.subscription_id,
  amountCents: r.amount_cents === null ? null : Number(r.amount_cents),
  attempts: r.attempts,
  createdAt: new Date(r.created_at),
});

export interface BuyerEmailRepository {
  /** Claims up to `limit` due e-mails for `leaseMs` (attempts counted); a claim another worker holds is skipped. */
  claimDue(now: Date, leaseMs: number, limit: number): Promise<BuyerEmail[]>;
  /** The claim's outcome, written only while this attempt still holds it (its attempt number). */
  markSent(id: string, attempt: number, now: Date): Promise<boolean>;
  markRetry(id: string, attempt: number, nextAttemptAt: Date, error: string): Promise<boolean>;
  markFailed(id: string, attempt: number, error: string): Promise<boolean>;
}

export class KnexBuyerEmailRepository implements BuyerEmailRepository {
  constructor(private readonly db: Knex) {}

  async claimDue(now: Date, leaseMs: number, limit: number): Promise<BuyerEmail[]> {
    return this.db.transaction(async (trx) => {
      const due = await trx('buyer_emails')
        .where({ status: 'pending' })
        .andWhere('next_attempt_at', '<=', now)
        .andWhere((q) => q.whereNull('lease_until').orWhere('lease_until', '<=', now))
        .orderBy('next_attempt_at')
        .limit(limit)
        .forUpdate()
        .skipLocked()
        .select('id');
      if (due.length === 0) return [];
      const rows = await trx('buyer_emails')
        .whereIn('id', due.map((r: { id: string }) => r.id))
        .update({ lease_until: new Date(now.getTime() + leaseMs), attempts: trx.raw('attempts + 1') })
        .returning('*');
      return (rows as BuyerEmailRow[]).map(toEmail);
    });
  }

  async markSent(id: string, attempt: number, now: Date): Promise<boolean> {
    return (await this.db('buyer_emails').where({ id, attempts: attempt, status: 'pending' }).update({ status: 'sent', sent_at: now, lease_until: null, last_error: null })) === 1;
  }

  async markRetry(id: string, attempt: number, nextAttemptAt: Date, error: string): Promise<boolean> {
    return (await this.db('buyer_emails').where({ id, attempts: attempt, status: 'pending' }).update({ next_attempt_at: nextAttemptAt, lease_until: null, last_error: error.slice(0, 500) })) === 1;
  }

  async markFailed(id: string, attempt: number, error: string): Promise<boolean> {
    return (await this.db('buyer_emails').where({ id, attempts: attempt, status: 'pending' }).update({ status: 'failed', lease_until: null, last_error: error.slice(0, 500) })) === 1;
  }
}

/** What `emit` hands over: a webhook event of a commerce state change. */
export interface CommerceEventLike {
  orgId: string;
  type: string;
  /** Events of neither an order nor a subscription (`meter.*`) owe no e-mail. */
  data: { order?: { orderId: string }; refund?: { refundId: string; amountCents: number }; subscription?: { subscriptionId?: string; id?: string } } | { customer: unknown };
  /** The subscription's cancellation state before the change (src/commerce/stores.ts CommerceEvent). */
  previous?: { cancelAtPeriodEnd: boolean; plan?: { priceId: string | null; productName: string; quantity: number; amountCents: number } };
}

/**
 * The e-mail a webhook event owes the buyer, if any, read in the emitting transaction (so it sees
 * the change it is about):
 *  - order.paid of a one-time purchase → payment_receipt; of a renewal (billing period ≥ 1) →
 *    renewal_succeeded; the first order of a subscription → none (subscription_started says it);
 *  - order.failed of a renewal → renewal_failed (once per renewal order: dunning retries update it),
 *    except when the processor's payment waits for the buyer (`requires_action`, 3-D Secure);
 *  - order.refund_failed → refund_failed (once per refund): the buyer was told "your refund is on
 *    its way" (refund_issued) and now hears that it did not go through (issue 37 §28);
 *  - subscription.created → subscription_started;
 *  - subscription.action_required → renewal_action_required (once per processor invoice: the buyer
 *    confirms the renewal's payment on the processor's page, e.g. 3-D Secure);
 *  - subscription.updated that scheduled a cancellation (cancel at period end; it was not scheduled
 *    before this change) → subscription_canceled, once per such change (keyed by the event: cancel,
 *    keep and cancel again within one second are two cancellations, Stripe's canceled_at one second);
 *  - subscription.updated of a plan or seat change (`previous.plan`) → plan_changed, once per change;
 *  - subscription.ended / subscription.expired → subscription_ended;
 *  - subscription.trial_will_end → trial_will_end (once per trial: keyed by the trial's end).
 */
export async function owedByEvent(trx: Knex.Transaction, event: CommerceEventLike, eventId: string): Promise<OwedEmail | undefined> {
  if ('customer' in event.data) return undefined;
  if (event.data.order) {
    const order = await trx('orders').where({ id: event.data.order.orderId, org_id: event.orgId }).first('id', 'customer_email', 'subscription_id', 'billing_period', 'processor_status');
    if (!order) return undefined;
    const renewal = order.subscription_id !== null && Number(order.billing_period ?? 0) > 0;
    const base = { orgId: event.orgId, to: order.customer_email as string, orderId: order.id as string, subscriptionId: (order.subscription_id as string | null) ?? undefined };
    if (event.type === 'order.paid' && order.subscription_id === null) return { ...base, kind: 'payment_receipt', dedupeKey: `receipt:${order.id}` };
    if (event.type === 'order.paid' && renewal) return { ...base, kind: 'renewal_succeeded', dedupeKey: `renewal:${order.id}` };
    // A renewal the bank sends to 3-D Secure was not declined: subscription.action_required's e-mail says what to do.
    if (event.type === 'order.failed' && renewal && order.processor_status === 'requires_action') return undefined;
    if (event.type === 'order.failed' && renewal) return { ...base, kind: 'renewal_failed', dedupeKey: `renewal_failed:${order.id}` };
    const refund = event.data.refund;
    if (event.type === 'order.refund_failed' && refund) return { ...base, kind: 'refund_failed', amountCents: refund.amountCents, dedupeKey: `refund_failed:${refund.refundId}` };
    return undefined;
  }
  const id = event.data.subscription?.subscriptionId ?? event.data.subscription?.id;
  if (!id) return undefined;
  const s = await trx('subscriptions').where({ id, org_id: event.orgId }).first('id', 'customer_email', 'latest_order_id', 'cancel_at_period_end', 'canceled_at', 'status', 'action_invoice_id', 'trial_end');
  if (!s) return undefined;
  const base = { orgId: event.orgId, to: s.customer_email as string, subscriptionId: s.id as string };
  switch (event.type) {
    case 'subscription.created':
      return { ...base, orderId: s.latest_order_id as string, kind: 'subscription_started', dedupeKey: `started:${s.id}` };
    case 'subscription.updated':
      // A plan or seat change (issue 39): one e-mail per change, keyed by its event.
      if (event.previous?.plan) return { ...base, kind: 'plan_changed', dedupeKey: `plan_changed:${s.id}:${eventId}` };
      if (s.status === 'ACTIVE' && s.cancel_at_period_end && event.previous?.cancelAtPeriodEnd === false) {
        return { ...base, kind: 'subscription_canceled', dedupeKey: `canceled:${s.id}:${eventId}` };
      }
      return undefined;
    case 'subscription.action_required':
      if (!s.action_invoice_id) return undefined;
      return { ...base, kind: 'renewal_action_required', dedupeKey: `action:${s.id}:${s.action_invoice_id as string}` };
    case 'subscription.trial_will_end':
      if (!s.trial_end) return undefined;
      return { ...base, kind: 'trial_will_end', dedupeKey: `trial_will_end:${s.id}:${new Date(s.trial_end as Date).getTime()}` };
    case 'subscription.ended':
    case 'subscription.expired':
      return { ...base, kind: 'subscription_ended', dedupeKey: `ended:${s.id}` };
    default:
      return undefined;
  }
}
