/**
 * Retries of usage make-up invoices (src/commerce/processor-usage.ts, docs/usage-billing.md): a
 * RENEWAL usage invoice the processor finalized without Kassa's items (MISSED) whose MAKEUP could
 * not be opened is retried by the `stripe-usage-makeups` job. `makeup_retry_at`: when the next
 * attempt is due (null: none pending — opened, or given up); a worker leases a row by moving it
 * forward before its attempt, so two workers never try the same row at once. `makeup_attempts`
 * counts the attempts (the backoff grows with it).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE processor_usage_invoices ADD COLUMN makeup_retry_at timestamptz NULL');
  await db.raw('ALTER TABLE processor_usage_invoices ADD COLUMN makeup_attempts integer NOT NULL DEFAULT 0');
  await db.raw("CREATE INDEX processor_usage_invoices_makeup_retry ON processor_usage_invoices (makeup_retry_at) WHERE makeup_retry_at IS NOT NULL");
  // MISSED renewals recorded before this migration whose make-up was never opened: due now.
  await db.raw(`UPDATE processor_usage_invoices r SET makeup_retry_at = now()
    WHERE r.kind = 'RENEWAL' AND r.state = 'MISSED'
      AND NOT EXISTS (SELECT 1 FROM processor_usage_invoices m WHERE m.subscription_id = r.subscription_id AND m.kind = 'MAKEUP' AND m.usage_period = r.usage_period)`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP INDEX IF EXISTS processor_usage_invoices_makeup_retry');
  await db.raw('ALTER TABLE processor_usage_invoices DROP COLUMN IF EXISTS makeup_attempts');
  await db.raw('ALTER TABLE processor_usage_invoices DROP COLUMN IF EXISTS makeup_retry_at');
}
