/**
 * Idempotency-Key of refunds requested from the console (issue 29): a repeated request with the
 * same key and parameters replays the answer instead of refunding again (a double click, a retry
 * after a timeout); the same key with other parameters is refused. Kept 24 hours, like checkout
 * sessions' keys; an expired key is taken over by its next use.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE refund_idempotency_keys (
    org_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    key text NOT NULL,
    request_hash text NOT NULL,
    order_id text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (org_id, key)
  )`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE refund_idempotency_keys');
}
