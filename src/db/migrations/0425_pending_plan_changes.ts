/**
 * Plan changes paid but not yet applied in the processor (issue 39, docs/plan-changes.md "Paid,
 * not yet applied"): a Stripe change Kassa prorated itself whose invoice was paid but whose
 * subscription item update failed. The row is written in the same transaction as the change's
 * PAID order; it is applied by the caller's retry of the same change, by the invoice's
 * `invoice.paid`, or by the `stripe-plan-change-items` job. One per subscription (a different
 * change is refused while one is not applied). `retry_at`: when the job tries next; a worker
 * leases a row by moving it forward (and counting the attempt) before its attempt. `applied_at`:
 * applied (the row stays, so a late retry of the same request answers the change made; the
 * subscription's next paid-and-pending change replaces it).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE pending_plan_changes (
    subscription_id text PRIMARY KEY REFERENCES subscriptions(id) ON DELETE CASCADE,
    org_id text NOT NULL,
    processor_subscription_id text NOT NULL,
    idempotency_key text NOT NULL,
    processor_change jsonb NOT NULL,
    quote jsonb NOT NULL,
    request jsonb NOT NULL,
    processor_invoice_id text NOT NULL,
    order_id text NULL,
    attempts integer NOT NULL DEFAULT 0,
    retry_at timestamptz NULL,
    applied_at timestamptz NULL,
    created_at timestamptz NOT NULL
  )`);
  await db.raw('CREATE INDEX pending_plan_changes_retry ON pending_plan_changes (retry_at) WHERE retry_at IS NOT NULL');
  await db.raw('CREATE INDEX pending_plan_changes_processor ON pending_plan_changes (processor_subscription_id)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE IF EXISTS pending_plan_changes');
}
