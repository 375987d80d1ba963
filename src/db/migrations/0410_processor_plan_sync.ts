/**
 * Plan changes made in the processor's dashboard (issue 39; docs/plan-changes.md "Changes made in
 * Stripe's Dashboard").
 *  - subscriptions.processor_prices: the processor's prices (Stripe `price_…`) Kassa made for this
 *    subscription's plans — at checkout and at each of its own plan changes — each with the Kassa
 *    plan it stands for (`{ "price_…": { priceId, productId, productName } }`). Stripe's item
 *    naming one of them is a Kassa plan; any other price was made outside Kassa.
 *  - subscriptions.processor_mismatch: set while the processor bills a price Kassa does not know
 *    (`{ reason, processorPriceId, quantity, detectedAt }`); null when Kassa's plan is the processor's.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE subscriptions ADD COLUMN processor_prices jsonb');
  await db.raw('ALTER TABLE subscriptions ADD COLUMN processor_mismatch jsonb');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE subscriptions DROP COLUMN IF EXISTS processor_mismatch');
  await db.raw('ALTER TABLE subscriptions DROP COLUMN IF EXISTS processor_prices');
}
