/**
 * An order's refunds and disputes as objects (issue 28): each refund (Kassa's, or one made in the
 * Stripe Dashboard, read from Stripe's events) and each dispute is one row, keyed by the
 * processor's id so a repeated or overlapping Stripe event (charge.refunded and refund.created
 * about the same refund) records it, and emits its webhook event, once. `orders.amount_refunded_cents`
 * stays the order's total (the sum of its refunds that are not failed or canceled).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  // seq: the order they were recorded in (two refunds can share a timestamp).
  await db.raw(`CREATE TABLE order_refunds (
    id text PRIMARY KEY,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    org_id text NOT NULL,
    order_id text NOT NULL REFERENCES orders(id),
    amount_cents bigint NOT NULL CHECK (amount_cents > 0),
    currency text NOT NULL,
    reason text,
    status text NOT NULL,
    source text NOT NULL,
    processor_refund_id text,
    failure_reason text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  )`);
  await db.raw('CREATE UNIQUE INDEX order_refunds_processor_refund ON order_refunds (processor_refund_id) WHERE processor_refund_id IS NOT NULL');
  await db.raw('CREATE INDEX order_refunds_order ON order_refunds (order_id, seq)');
  await db.raw(`CREATE TABLE order_disputes (
    id text PRIMARY KEY,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    org_id text NOT NULL,
    order_id text NOT NULL REFERENCES orders(id),
    processor_dispute_id text NOT NULL UNIQUE,
    amount_cents bigint NOT NULL,
    currency text NOT NULL,
    reason text NOT NULL,
    status text NOT NULL,
    evidence_due_by timestamptz,
    outcome text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    closed_at timestamptz
  )`);
  await db.raw('CREATE INDEX order_disputes_order ON order_disputes (order_id, seq)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE order_disputes');
  await db.raw('DROP TABLE order_refunds');
}
