/**
 * The close of a metered period, as a row ingest checks (issue 38 §8): `usage_closed_period` is the
 * latest period number whose usage the renewal job has closed (its quantities are about to be read
 * for the period's order). The close writes it under the subscription's row lock (FOR UPDATE) and
 * commits before it reads the quantities; ingest inserts a subscriber's events under a FOR KEY
 * SHARE lock of the same row and refuses (PERIOD_CLOSED) an event of a period at or before it. So
 * an event is either stored before the close's read or refused: never stored and unbilled.
 * NULL: no period closed since this column exists (the renewal order of a period closed earlier
 * is already written, and its events are refused by the grace window).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE subscriptions ADD COLUMN usage_closed_period integer');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE subscriptions DROP COLUMN usage_closed_period');
}
