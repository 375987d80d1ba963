/**
 * Five-minute metric rollup cells (resolution '5m', between the minute and the hour), so a query
 * bucket that is not aligned to hours merges about 15 cells per model instead of up to 59
 * minutes (issue 21). Ingest writes them from now on; cells are not back-filled (merging the
 * stored sketches takes the application's code), so the table below records from when they are
 * complete: on a database without rollups, from the beginning; otherwise from the start of the
 * next UTC day, which leaves processes of the previous release (writing minutes and hours only)
 * the rest of the day to be replaced. Queries use five-minute cells only from then on.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE telemetry_rollup_levels (
    resolution text COLLATE "C" PRIMARY KEY,
    complete_from timestamptz NOT NULL
  )`);
  await db.raw(`INSERT INTO telemetry_rollup_levels (resolution, complete_from)
    SELECT '5m', CASE WHEN EXISTS (SELECT 1 FROM telemetry_rollups) THEN date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 day'
                      ELSE timestamptz '1970-01-01T00:00:00Z' END`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw(`DELETE FROM telemetry_rollups WHERE resolution = '5m'`);
  await db.raw('DROP TABLE telemetry_rollup_levels');
}
