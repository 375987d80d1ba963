/**
 * Ten-second metric rollup cells (resolution '10s', below the minute), so the edges of a query
 * bucket that is not aligned to minutes read raw model calls for under ten seconds each instead
 * of under a minute (issue 21). Like the five-minute cells of 0088 they are written by ingest from
 * now on and not back-filled; they count as complete from the start on a database without
 * rollups, else from the start of the next UTC day.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`INSERT INTO telemetry_rollup_levels (resolution, complete_from)
    SELECT '10s', CASE WHEN EXISTS (SELECT 1 FROM telemetry_rollups) THEN date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 day'
                       ELSE timestamptz '1970-01-01T00:00:00Z' END`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw(`DELETE FROM telemetry_rollups WHERE resolution = '10s'`);
  await db.raw(`DELETE FROM telemetry_rollup_levels WHERE resolution = '10s'`);
}
