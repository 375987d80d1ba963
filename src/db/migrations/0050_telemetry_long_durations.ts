/**
 * Trace and model-call durations in bigint milliseconds. A trace may span anything the ingest
 * accepts (times from 1970 to 9999, and later spans extend a stored trace), which overflows a
 * 32-bit integer after 24.8 days; the fuzz test found that as a 500.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE telemetry_traces ALTER COLUMN duration_ms TYPE bigint');
  await db.raw('ALTER TABLE telemetry_model_calls ALTER COLUMN duration_ms TYPE bigint');
}

export async function down(db: Knex): Promise<void> {
  // Back to integer: durations beyond its range are capped rather than failing the rollback.
  for (const table of ['telemetry_traces', 'telemetry_model_calls']) {
    await db.raw(`ALTER TABLE ${table} ALTER COLUMN duration_ms TYPE integer USING LEAST(duration_ms, 2147483647)::integer`);
  }
}
