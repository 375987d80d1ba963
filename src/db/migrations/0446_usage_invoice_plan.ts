/**
 * The plan a processor usage invoice's range was used under (issue 39, docs/plan-changes.md
 * "Metered prices", Stripe limits): `plan_price_id` / `plan_product_name`, the price whose metered
 * components bill the part of the range after its last plan change (src/commerce/processor-usage.ts
 * `UsageInvoice.plan`). A RENEWAL records it with the draft, at the period's end; its MAKEUP copies
 * it. Needed because a MISSED draft's make-up may be closed after the renewal's `invoice.paid`
 * applied a `PERIOD_END` change (or after a change of the next period): the subscription's plan
 * then is no longer the one the period was used under. `plan_recorded` tells a recorded plan of
 * `price_id` null (a price deleted since) from a row written before this migration (false: the
 * subscription's plan at the close, as before).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE processor_usage_invoices ADD COLUMN plan_recorded boolean NOT NULL DEFAULT false');
  await db.raw('ALTER TABLE processor_usage_invoices ADD COLUMN plan_price_id text NULL');
  await db.raw('ALTER TABLE processor_usage_invoices ADD COLUMN plan_product_name text NULL');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE processor_usage_invoices DROP COLUMN IF EXISTS plan_product_name');
  await db.raw('ALTER TABLE processor_usage_invoices DROP COLUMN IF EXISTS plan_price_id');
  await db.raw('ALTER TABLE processor_usage_invoices DROP COLUMN IF EXISTS plan_recorded');
}
