import type { Knex } from 'knex';
import type { OrderDispute, OrderRefund, RefundReason, RefundStatus } from '../commerce/model.js';
import type { DisputeRepository, RefundIdempotencyRecord, RefundRepository } from '../commerce/stores.js';

interface RefundRow {
  id: string;
  org_id: string;
  order_id: string;
  amount_cents: number | string;
  currency: string;
  reason: RefundReason | null;
  status: RefundStatus;
  source: OrderRefund['source'];
  processor_refund_id: string | null;
  failure_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

const toRefund = (r: RefundRow): OrderRefund => ({
  id: r.id,
  orgId: r.org_id,
  orderId: r.order_id,
  amountCents: Number(r.amount_cents),
  currency: r.currency,
  reason: r.reason,
  status: r.status,
  source: r.source,
  processorRefundId: r.processor_refund_id,
  failureReason: r.failure_reason,
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

/** An order's refunds (order_refunds), one row per refund, unique by the processor's refund id. */
export class KnexRefundRepository implements RefundRepository {
  constructor(private readonly db: Knex) {}

  async insert(r: OrderRefund): Promise<void> {
    await this.db('order_refunds').insert({
      id: r.id,
      org_id: r.orgId,
      order_id: r.orderId,
      amount_cents: r.amountCents,
      currency: r.currency,
      reason: r.reason,
      status: r.status,
      source: r.source,
      processor_refund_id: r.processorRefundId,
      failure_reason: r.failureReason,
      created_at: r.createdAt,
      updated_at: r.updatedAt,
    });
  }

  async findIdempotencyKey(orgId: string, key: string, notBefore: Date): Promise<RefundIdempotencyRecord | undefined> {
    const row = await this.db('refund_idempotency_keys').where({ org_id: orgId, key }).andWhere('created_at', '>=', notBefore).first();
    return row ? { orgId: row.org_id, key: row.key, requestHash: row.request_hash, orderId: row.order_id, createdAt: new Date(row.created_at) } : undefined;
  }

  async claimIdempotencyKey(r: RefundIdempotencyRecord, expiredBefore: Date): Promise<boolean> {
    const result = await this.db.raw(
      `INSERT INTO refund_idempotency_keys (org_id, key, request_hash, order_id, created_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (org_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, order_id = EXCLUDED.order_id, created_at = EXCLUDED.created_at
         WHERE refund_idempotency_keys.created_at < ?
       RETURNING key`,
      [r.orgId, r.key, r.requestHash, r.orderId, r.createdAt, expiredBefore],
    );
    return (result.rows as unknown[]).length === 1;
  }

  async update(r: OrderRefund, expected: RefundStatus): Promise<boolean> {
    const written = await this.db('order_refunds')
      .where({ id: r.id, status: expected })
      .update({ status: r.status, failure_reason: r.failureReason, updated_at: r.updatedAt });
    return written === 1;
  }

  async findByProcessorId(processorRefundId: string): Promise<OrderRefund | undefined> {
    const row = await this.db<RefundRow>('order_refunds').where({ processor_refund_id: processorRefundId }).first();
    return row ? toRefund(row) : undefined;
  }

  async listForOrder(orgId: string, orderId: string): Promise<OrderRefund[]> {
    const rows = await this.db<RefundRow>('order_refunds').where({ org_id: orgId, order_id: orderId }).orderBy('seq');
    return rows.map(toRefund);
  }
}

interface DisputeRow {
  id: string;
  org_id: string;
  order_id: string;
  processor_dispute_id: string;
  amount_cents: number | string;
  currency: string;
  reason: string;
  status: string;
  evidence_due_by: Date | null;
  outcome: OrderDispute['outcome'];
  created_at: Date;
  updated_at: Date;
  closed_at: Date | null;
}

const toDispute = (r: DisputeRow): OrderDispute => ({
  id: r.id,
  orgId: r.org_id,
  orderId: r.order_id,
  processorDisputeId: r.processor_dispute_id,
  amountCents: Number(r.amount_cents),
  currency: r.currency,
  reason: r.reason,
  status: r.status,
  evidenceDueBy: r.evidence_due_by ? new Date(r.evidence_due_by) : null,
  outcome: r.outcome,
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
  closedAt: r.closed_at ? new Date(r.closed_at) : null,
});

/** An order's disputes (order_disputes), one row per processor dispute. */
export class KnexDisputeRepository implements DisputeRepository {
  constructor(private readonly db: Knex) {}

  async insert(d: OrderDispute): Promise<void> {
    await this.db('order_disputes').insert({
      id: d.id,
      org_id: d.orgId,
      order_id: d.orderId,
      processor_dispute_id: d.processorDisputeId,
      amount_cents: d.amountCents,
      currency: d.currency,
      reason: d.reason,
      status: d.status,
      evidence_due_by: d.evidenceDueBy,
      outcome: d.outcome,
      created_at: d.createdAt,
      updated_at: d.updatedAt,
      closed_at: d.closedAt,
    });
  }

  async update(d: OrderDispute, expected: string): Promise<boolean> {
    const written = await this.db('order_disputes').where({ id: d.id, status: expected }).update({
      amount_cents: d.amountCents,
      reason: d.reason,
      status: d.status,
      evidence_due_by: d.evidenceDueBy,
      outcome: d.outcome,
      updated_at: d.updatedAt,
      closed_at: d.closedAt,
    });
    return written === 1;
  }

  async findByProcessorId(processorDisputeId: string): Promise<OrderDispute | undefined> {
    const row = await this.db<DisputeRow>('order_disputes').where({ processor_dispute_id: processorDisputeId }).first();
    return row ? toDispute(row) : undefined;
  }

  async listForOrder(orgId: string, orderId: string): Promise<OrderDispute[]> {
    const rows = await this.db<DisputeRow>('order_disputes').where({ org_id: orgId, order_id: orderId }).orderBy('seq');
    return rows.map(toDispute);
  }
}
