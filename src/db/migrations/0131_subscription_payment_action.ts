/**
 * A renewal the buyer must complete (Stripe's `invoice.payment_action_required`: 3-D Secure on an
 * off-session charge): the invoice waiting for the buyer and Stripe's hosted page where they pay
 * it, until the invoice is paid or the subscription ends.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE subscriptions ADD COLUMN action_invoice_id text, ADD COLUMN action_url text, ADD COLUMN action_required_at timestamptz');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE subscriptions DROP COLUMN action_invoice_id, DROP COLUMN action_url, DROP COLUMN action_required_at');
}
