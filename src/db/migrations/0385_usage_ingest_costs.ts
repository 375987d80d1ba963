/**
 * Cheaper usage-event ingest on PostgreSQL (issue 38: ingest ≥ 30,000 events/s on 2 cores, where
 * the database's CPU per event is what caps the rate; figures in docs/benchmarks.md, "Ingest:
 * PostgreSQL's cost per event"):
 *
 * 1. `usage_meter_hours` gets fillfactor 25 and its own autovacuum thresholds. Every ingest batch
 *    adds to the rows of its (meter, customer, hour): the current hour's rows are rewritten by
 *    every batch. Packed full (fillfactor 100) the new version of a row never fits its page, so
 *    each update is a non-HOT update: a new index entry, a heap page elsewhere, a dead version the
 *    next lookup walks past, and more WAL (in the bench before this, 628 of 108,000 updates were
 *    HOT and the table grew to 18 MB for 2,000 live rows; each round cost more than the one
 *    before). With room left in each page, the update stays on its page (HOT: no index entry, the
 *    page prunes its dead versions itself). Only pages written from now on get the room (no
 *    rewrite here): the current hour's rows are new rows, so they do. The price is space: the
 *    rollup's pages hold a quarter of the rows (one row per meter, customer and hour with
 *    events — far fewer rows than the events themselves). Reads are unchanged: a customer's
 *    period reads its ~720 hour rows by the primary key, one heap page per row either way.
 * 2. The foreign keys from `usage_events` and `usage_event_ids` to `organizations` go. Each one
 *    ran a check per inserted row — `SELECT … FROM organizations … FOR KEY SHARE`, 2,000 per
 *    batch of 1,000 events, 11 % of the insert statement's time — and row-locked the organization
 *    once per event, so concurrent batches of one organization built multixacts on its row.
 *    Nothing is lost: ingest takes the organization from the authenticated API key, and Kassa has
 *    no path that deletes an organization (the cascade never ran). The rollups keep their keys to
 *    `meters` (those rows are rarely inserted: an insert only for a new hour).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`ALTER TABLE usage_meter_hours SET (fillfactor = 25, autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 1000)`);
  await db.raw('ALTER TABLE usage_event_ids DROP CONSTRAINT IF EXISTS usage_event_ids_org_id_fkey');
  await db.raw('ALTER TABLE usage_events DROP CONSTRAINT IF EXISTS usage_events_org_id_fkey');
  // The old table of an install converted online by 0380 kept its own key (renamed there).
  await db.raw('ALTER TABLE IF EXISTS usage_events_legacy DROP CONSTRAINT IF EXISTS usage_events_legacy_org_id_fkey');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE usage_events ADD CONSTRAINT usage_events_org_id_fkey FOREIGN KEY (org_id) REFERENCES organizations (id) ON DELETE CASCADE');
  await db.raw('ALTER TABLE usage_event_ids ADD CONSTRAINT usage_event_ids_org_id_fkey FOREIGN KEY (org_id) REFERENCES organizations (id) ON DELETE CASCADE');
  await db.raw('ALTER TABLE usage_meter_hours RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold)');
}
