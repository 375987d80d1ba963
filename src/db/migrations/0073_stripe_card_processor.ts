/**
 * The Stripe card processor: a checkout session remembers the processor's own session (Stripe
 * Checkout Session id and its page), and Stripe events already applied are remembered by id so
 * a redelivered event is acknowledged without being applied again.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE checkout_sessions ADD COLUMN processor_session_id text, ADD COLUMN processor_url text');
  await db.raw('CREATE UNIQUE INDEX checkout_sessions_processor_session ON checkout_sessions (processor_session_id) WHERE processor_session_id IS NOT NULL');
  await db.raw(`CREATE TABLE stripe_events (
    id text PRIMARY KEY,
    type text NOT NULL,
    processed_at timestamptz NOT NULL
  )`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE stripe_events');
  await db.raw('DROP INDEX checkout_sessions_processor_session');
  await db.raw('ALTER TABLE checkout_sessions DROP COLUMN processor_session_id, DROP COLUMN processor_url');
}
