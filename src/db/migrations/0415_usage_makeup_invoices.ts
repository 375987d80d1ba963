/**
 * A third kind of processor usage invoice (src/commerce/processor-usage.ts): MAKEUP, the invoice of
 * its own Kassa opens for a closed period's usage when the processor finalized that period's
 * renewal draft without Kassa's items (the RENEWAL row is MISSED). Still one per (subscription,
 * kind, period), so a period's usage is billed by its renewal draft or by its make-up, once.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE processor_usage_invoices DROP CONSTRAINT IF EXISTS processor_usage_invoices_kind_check');
  await db.raw("ALTER TABLE processor_usage_invoices ADD CONSTRAINT processor_usage_invoices_kind_check CHECK (kind IN ('RENEWAL', 'FINAL', 'MAKEUP'))");
}

export async function down(db: Knex): Promise<void> {
  await db.raw("DELETE FROM processor_usage_invoices WHERE kind = 'MAKEUP'");
  await db.raw('ALTER TABLE processor_usage_invoices DROP CONSTRAINT IF EXISTS processor_usage_invoices_kind_check');
  await db.raw("ALTER TABLE processor_usage_invoices ADD CONSTRAINT processor_usage_invoices_kind_check CHECK (kind IN ('RENEWAL', 'FINAL'))");
}
