/**
 * Stripe Connect (docs/card-processors.md): an organization may be bound to one Stripe connected
 * account, paid by destination charges. A card session records the account it was opened for,
 * so a later change of the binding never re-routes that session's payment or its refunds.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE organizations ADD COLUMN stripe_account_id text, ADD COLUMN stripe_account_bound_at timestamptz');
  // One organization per connected account: another org's binding is refused, never shared.
  await db.raw('CREATE UNIQUE INDEX organizations_stripe_account ON organizations (stripe_account_id) WHERE stripe_account_id IS NOT NULL');
  await db.raw('ALTER TABLE checkout_sessions ADD COLUMN processor_account_id text');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE checkout_sessions DROP COLUMN processor_account_id');
  await db.raw('DROP INDEX organizations_stripe_account');
  await db.raw('ALTER TABLE organizations DROP COLUMN stripe_account_id, DROP COLUMN stripe_account_bound_at');
}
