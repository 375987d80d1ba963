/**
 * Usage billed through a processor's invoices (issue 38 §7, Stripe rail; src/commerce/processor-usage.ts).
 * One row per Stripe invoice that carries a metered subscription's usage: the renewal's draft
 * (`invoice.created`, kind RENEWAL) or the invoice Kassa opens when a subscription is canceled at
 * once (kind FINAL). It holds the usage range, when it may be closed (`due_at`: the period's end +
 * the 1-hour grace window), the USAGE line inputs once computed (`lines`, written once, so every
 * retry adds the same invoice items and `invoice.paid` writes the same order lines), and how far it
 * got (`state`: HELD → FINALIZED, or MISSED when Stripe finalized the draft without Kassa's items).
 * `(subscription_id, kind, usage_period)` is unique: one usage invoice per closed period, whatever
 * the redeliveries of `invoice.created`.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE processor_usage_invoices (
    processor_invoice_id text PRIMARY KEY,
    org_id text NOT NULL,
    subscription_id text NOT NULL REFERENCES subscriptions(id),
    kind text NOT NULL CHECK (kind IN ('RENEWAL', 'FINAL')),
    usage_period integer NOT NULL,
    usage_start timestamptz(3) NOT NULL,
    usage_end timestamptz(3) NOT NULL,
    due_at timestamptz(3) NOT NULL,
    state text NOT NULL CHECK (state IN ('HELD', 'FINALIZED', 'MISSED')),
    lines jsonb,
    created_at timestamptz(3) NOT NULL,
    updated_at timestamptz(3) NOT NULL
  )`);
  await db.raw('CREATE UNIQUE INDEX processor_usage_invoices_period ON processor_usage_invoices (subscription_id, kind, usage_period)');
  await db.raw("CREATE INDEX processor_usage_invoices_due ON processor_usage_invoices (due_at) WHERE state = 'HELD'");
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE IF EXISTS processor_usage_invoices');
}
