/**
 * What Stripe last said of an organization's connected account (Connect `account.updated`): its
 * `charges_enabled` and its `transfers` and `card_payments` capabilities, and when. Null until
 * Stripe reports on the account after it was bound (binding checks it once, then).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(
    'ALTER TABLE organizations ADD COLUMN stripe_account_charges_enabled boolean, ADD COLUMN stripe_account_transfers text, ADD COLUMN stripe_account_card_payments text, ADD COLUMN stripe_account_checked_at timestamptz',
  );
}

export async function down(db: Knex): Promise<void> {
  await db.raw(
    'ALTER TABLE organizations DROP COLUMN stripe_account_charges_enabled, DROP COLUMN stripe_account_transfers, DROP COLUMN stripe_account_card_payments, DROP COLUMN stripe_account_checked_at',
  );
}
