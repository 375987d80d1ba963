/**
 * Kassa's own location step on the Stripe rail (issue 39, docs/tax.md "On Stripe: the buyer's
 * country on Kassa's page"): a card session created without `customerTax` for an organization with
 * tax rates is stored without a Stripe Checkout Session; Kassa's hosted page asks the buyer's
 * country first and opens Stripe's with fixed rates for it. The flag says the session takes its
 * location on that step (its page never sends the buyer straight on to Stripe's). A constant
 * default: no table rewrite.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE checkout_sessions ADD COLUMN location_step boolean NOT NULL DEFAULT false');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE checkout_sessions DROP COLUMN IF EXISTS location_step');
}
