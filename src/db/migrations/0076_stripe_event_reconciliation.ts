/**
 * Reconciliation from Stripe's event list: one cursor row per Stripe account Kassa reads events
 * from, leased by one worker at a time (several workers may run the job). Stripe's charge and
 * dispute events name the PaymentIntent, so orders are found by it.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE stripe_event_cursors (
    name text PRIMARY KEY,
    -- Every event created before this Unix second has been applied (or was not Kassa's).
    created_through bigint NOT NULL,
    lease_owner text,
    leased_until timestamptz,
    updated_at timestamptz NOT NULL
  )`);
  await db.raw('CREATE INDEX orders_processor_payment ON orders (processor_payment_id) WHERE processor_payment_id IS NOT NULL');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP INDEX orders_processor_payment');
  await db.raw('DROP TABLE stripe_event_cursors');
}
