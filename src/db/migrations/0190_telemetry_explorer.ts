/**
 * The telemetry explorer (issue 31): what the trace list filters and sorts on, the session and
 * user a trace belongs to, and per-project model prices.
 *
 * - `session_id`, `user_id`: copied at ingest from the spans' `session.id` and `user.id` /
 *   `enduser.id` (OpenLLMetry: `traceloop.association.properties.session_id` / `user_id`); a
 *   partial index each, so a session's traces in order and a user's sessions read only theirs.
 * - `attribute_pairs`: the trace's short scalar span attributes as `key=value` strings, under a GIN
 *   index, so "attribute key = value" is an index lookup instead of a scan of the span documents.
 * - sorting by duration or cost: one index each, `(project_id, x DESC, trace_id DESC)`, so the
 *   first page is an index scan that stops after the page.
 * Traces stored before this migration keep NULL / empty values (no rewrite of the span documents):
 * the new filters find traces ingested from now on.
 *
 * On PostgreSQL the indexes are built CONCURRENTLY (outside a transaction), as in 0120, so ingest
 * goes on while they build on a large table.
 */
import type { Knex } from 'knex';

const isPostgres = (db: Knex): boolean => !('pglite' in (db.client as object));

export const config = { transaction: false };

const INDEXES: Array<[name: string, definition: string]> = [
  ['telemetry_traces_duration', 'telemetry_traces (project_id, duration_ms DESC, trace_id DESC)'],
  ['telemetry_traces_cost', 'telemetry_traces (project_id, cost DESC, trace_id DESC)'],
  ['telemetry_traces_session', 'telemetry_traces (project_id, session_id, start_time, trace_id) WHERE session_id IS NOT NULL'],
  ['telemetry_traces_user', 'telemetry_traces (project_id, user_id, start_time) WHERE user_id IS NOT NULL'],
  ['telemetry_traces_attribute_pairs', 'telemetry_traces USING gin (attribute_pairs)'],
];

export async function up(db: Knex): Promise<void> {
  await db.raw(`ALTER TABLE telemetry_traces
    ADD COLUMN IF NOT EXISTS session_id text,
    ADD COLUMN IF NOT EXISTS user_id text,
    ADD COLUMN IF NOT EXISTS attribute_pairs text[] NOT NULL DEFAULT '{}'`);
  await db.raw(`CREATE TABLE IF NOT EXISTS telemetry_model_prices (
    project_id text COLLATE "C" NOT NULL REFERENCES telemetry_projects(id) ON DELETE CASCADE,
    model text NOT NULL,
    input_per_million double precision NOT NULL CHECK (input_per_million >= 0),
    output_per_million double precision NOT NULL CHECK (output_per_million >= 0),
    created_at timestamptz(3) NOT NULL,
    updated_at timestamptz(3) NOT NULL,
    PRIMARY KEY (project_id, model))`);
  const postgres = isPostgres(db);
  for (const [name, definition] of INDEXES) {
    if (postgres) {
      const invalid = await db.raw(
        `SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = ? AND NOT i.indisvalid`,
        [name],
      );
      if (invalid.rows.length > 0) await db.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
      await db.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${name} ON ${definition}`);
    } else {
      await db.raw(`CREATE INDEX IF NOT EXISTS ${name} ON ${definition}`);
    }
  }
}

export async function down(db: Knex): Promise<void> {
  for (const [name] of INDEXES) await db.raw(`DROP INDEX IF EXISTS ${name}`);
  await db.raw('DROP TABLE IF EXISTS telemetry_model_prices');
  await db.raw('ALTER TABLE telemetry_traces DROP COLUMN IF EXISTS session_id, DROP COLUMN IF EXISTS user_id, DROP COLUMN IF EXISTS attribute_pairs');
}
