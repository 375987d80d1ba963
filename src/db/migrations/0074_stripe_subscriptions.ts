/**
 * Subscriptions billed by Stripe Billing: a subscription remembers the processor's own
 * subscription (Stripe `sub_…`). Those are renewed by Stripe, never by Kassa's renewal job.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE subscriptions ADD COLUMN processor_subscription_id text');
  await db.raw('CREATE UNIQUE INDEX subscriptions_processor_subscription ON subscriptions (processor_subscription_id) WHERE processor_subscription_id IS NOT NULL');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP INDEX subscriptions_processor_subscription');
  await db.raw('ALTER TABLE subscriptions DROP COLUMN processor_subscription_id');
}
