/**
 * The buyer e-mail outbox: one row per e-mail a state change owes the buyer (receipt, subscription
 * started, renewal succeeded/failed, cancellation, end, refund), written in the transaction of that
 * change, so a rolled-back change owes nothing. `dedupe_key` names the fact the e-mail is about
 * (`receipt:<order>`, `refund:<order>:<refunded total>`, …): the same fact queued twice is one
 * e-mail. The sending job claims due rows with a lease (several workers, a crashed one).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE buyer_emails (
    id text PRIMARY KEY,
    org_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kind text NOT NULL,
    to_address text NOT NULL,
    order_id text,
    subscription_id text,
    amount_cents bigint,
    dedupe_key text NOT NULL UNIQUE,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    lease_until timestamptz,
    last_error text,
    created_at timestamptz NOT NULL,
    sent_at timestamptz
  )`);
  await db.raw(`CREATE INDEX buyer_emails_due ON buyer_emails (next_attempt_at) WHERE status = 'pending'`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE buyer_emails');
}
