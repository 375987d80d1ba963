/**
 * Meter rollups built in the background (issue 38, faults): creating a usage-event meter or
 * changing its filter no longer rebuilds its rollup (migration 0280) inside the request — over
 * millions of events that outlasted the statement timeout and answered 503.
 *
 * - `meters.rollup_status`: `READY` (the rollup holds every stored event the filter matches) or
 *   `BUILDING` (quantities are read from the raw events meanwhile, exactly, as for an archived
 *   meter). Span meters have no rollup and are always READY.
 * - `meters.rollup_cursor`: how far the build got, as the last customer id whose rows were rebuilt
 *   ('' before the first chunk). The build walks the organization's events by customer id (the
 *   index usage_events_customer_name_ts), a chunk of ~20,000 events per transaction under the
 *   organization's meter lock; each chunk deletes and rewrites its customers' rows and moves the
 *   cursor in the same transaction, so a killed build loses at most its current chunk and the
 *   next run goes on from the cursor. Ingest keeps adding to a BUILDING meter's rows as to any
 *   ACTIVE meter's: rows of customers behind the cursor are complete, the rest are rewritten.
 * - The partial index holds the builds to do: the job's scan.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw("ALTER TABLE meters ADD COLUMN rollup_status text NOT NULL DEFAULT 'READY' CHECK (rollup_status IN ('BUILDING', 'READY'))");
  await db.raw('ALTER TABLE meters ADD COLUMN rollup_cursor text COLLATE "C"');
  await db.raw("CREATE INDEX meters_rollup_building ON meters (updated_at, id) WHERE rollup_status = 'BUILDING'");
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP INDEX IF EXISTS meters_rollup_building');
  await db.raw('ALTER TABLE meters DROP COLUMN IF EXISTS rollup_cursor');
  await db.raw('ALTER TABLE meters DROP COLUMN IF EXISTS rollup_status');
}
