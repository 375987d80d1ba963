/** Plan changes paid in the processor whose item update is still to be made (migration 0425, docs/plan-changes.md). */
import type { Knex } from 'knex';
import type { PendingPlanChange, PendingPlanChangeRepository } from '../commerce/stores.js';

interface Row {
  subscription_id: string;
  org_id: string;
  processor_subscription_id: string;
  idempotency_key: string;
  processor_change: Record<string, unknown> | string;
  quote: Record<string, unknown> | string;
  request: PendingPlanChange['request'] | string;
  processor_invoice_id: string;
  order_id: string | null;
  attempts: number;
  retry_at: Date | string | null;
  applied_at: Date | string | null;
  created_at: Date | string;
}

const json = <T>(v: T | string): T => (typeof v === 'string' ? (JSON.parse(v) as T) : v);
const date = (v: Date | string) => (v instanceof Date ? v : new Date(v));

const toChange = (r: Row): PendingPlanChange => ({
  subscriptionId: r.subscription_id,
  orgId: r.org_id,
  processorSubscriptionId: r.processor_subscription_id,
  idempotencyKey: r.idempotency_key,
  processorChange: json(r.processor_change),
  quote: json(r.quote),
  request: json(r.request),
  processorInvoiceId: r.processor_invoice_id,
  orderId: r.order_id,
  attempts: Number(r.attempts),
  retryAt: r.retry_at === null ? null : date(r.retry_at),
  appliedAt: r.applied_at === null ? null : date(r.applied_at),
  createdAt: date(r.created_at),
});

export class KnexPendingPlanChangeRepository implements PendingPlanChangeRepository {
  constructor(private readonly db: Knex) {}

  async insert(c: PendingPlanChange): Promise<void> {
    await this.db('pending_plan_changes').insert({
      subscription_id: c.subscriptionId,
      org_id: c.orgId,
      processor_subscription_id: c.processorSubscriptionId,
      idempotency_key: c.idempotencyKey,
      processor_change: JSON.stringify(c.processorChange),
      quote: JSON.stringify(c.quote),
      request: JSON.stringify(c.request),
      processor_invoice_id: c.processorInvoiceId,
      order_id: c.orderId,
      attempts: c.attempts,
      retry_at: c.retryAt,
      applied_at: c.appliedAt,
      created_at: c.createdAt,
    }).onConflict('subscription_id').merge();
  }

  async markApplied(subscriptionId: string, at: Date): Promise<boolean> {
    return (await this.db('pending_plan_changes').where({ subscription_id: subscriptionId }).whereNull('applied_at').update({ applied_at: at, retry_at: null })) > 0;
  }

  async find(subscriptionId: string): Promise<PendingPlanChange | undefined> {
    const row = await this.db<Row>('pending_plan_changes').where({ subscription_id: subscriptionId }).first();
    return row ? toChange(row) : undefined;
  }

  async remove(subscriptionId: string): Promise<boolean> {
    return (await this.db('pending_plan_changes').where({ subscription_id: subscriptionId }).delete()) > 0;
  }

  async lease(now: Date, leaseUntil: Date, limit: number): Promise<PendingPlanChange[]> {
    const result = await this.db.raw(
      `UPDATE pending_plan_changes SET retry_at = ?, attempts = attempts + 1
       WHERE subscription_id IN (
         SELECT subscription_id FROM pending_plan_changes
         WHERE retry_at IS NOT NULL AND retry_at <= ? AND applied_at IS NULL
         ORDER BY retry_at LIMIT ? FOR UPDATE SKIP LOCKED)
         AND retry_at <= ?
       RETURNING *`,
      [leaseUntil, now, limit, now],
    );
    return ((result.rows ?? []) as Row[]).map(toChange).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
  }

  async retryAt(subscriptionId: string, at: Date): Promise<void> {
    await this.db('pending_plan_changes').where({ subscription_id: subscriptionId }).whereNull('applied_at').update({ retry_at: at });
  }
}
