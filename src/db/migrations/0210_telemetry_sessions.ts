/**
 * Sessions and users kept at ingest (issue 31): the explorer's session and user lists read these
 * rollups instead of grouping telemetry_traces over the range at query time (linear in the range's
 * traffic). The first page is an index scan of 51 rows (figures: docs/benchmarks.md, the explorer).
 *
 * - telemetry_sessions: one row per (project, session_id) with the totals of all its stored traces;
 *   `user_id` is the smallest user id among them (the rule the grouped query answered).
 *   `previous_user_id` is bookkeeping for ingest: each upsert sets it to the user before the
 *   statement, so RETURNING tells which user gained or lost the session (users.session_count).
 * - telemetry_users: one row per (project, user_id) with the totals of their traces;
 *   `session_count` is the number of sessions whose user is this user.
 * Both were written in the same transaction as the traces (KnexTraceWriter.updateGroups), and by
 * retention and project deletion; since 0211 ingest and retention queue their changes and the
 * worker applies them (src/telemetry/groups.repository.ts). The indexes are the lists' order,
 * newest activity first.
 *
 * Backfill: one INSERT … SELECT … GROUP BY each from telemetry_traces, in this migration's
 * transaction, before the indexes are built (about half the time of building them first). Linear
 * in traces; its time on the explorer bench's 11M-span data set is in docs/benchmarks.md. The
 * result equals the rows ingest maintains for the same data (test/telemetry/sessions-rollup.test.ts).
 *
 * On PostgreSQL the backfill runs without the pool's statement and client timeouts (at 2.2M
 * traces it passed them and the upgrade failed, found by the explorer bench on its kept
 * 11M-span data set), and holds a SHARE lock on telemetry_traces until the migration commits:
 * ingest waits (or answers 503 after its own timeout, and exporters retry) instead of writing a
 * trace the rollups would miss. Processes of an earlier release still running after the
 * migration (a rolling deploy) write traces the rollups do not count: stop them first, or rebuild
 * afterwards (`down` then `up`, or truncate both and run `backfill`; with 0211, with ingest
 * stopped and its queue, telemetry_group_changes, applied or truncated first: a queued change
 * applied after the backfill would count its trace twice).
 */
import type { Knex } from 'knex';
import { isEmbedded } from '../dialect.js';

/** A PostgreSQL server, not embedded PGlite (this migration's handle is a transaction's). */
const isPostgres = (db: Knex): boolean => !isEmbedded(db);

interface Connection {
  query(q: { text: string; query_timeout?: number }): Promise<unknown>;
}

/** A statement without node-postgres's client-side timeout (in a transaction: on its connection). */
async function untimed(db: Knex, text: string): Promise<void> {
  if (!isPostgres(db)) return void (await db.raw(text));
  const client = db.client as { acquireConnection(): Promise<Connection>; releaseConnection(c: Connection): Promise<unknown> };
  const connection = await client.acquireConnection();
  try {
    await connection.query({ text, query_timeout: 24 * 3600 * 1000 });
  } finally {
    await client.releaseConnection(connection);
  }
}

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE telemetry_sessions (
    project_id text COLLATE "C" NOT NULL REFERENCES telemetry_projects(id) ON DELETE CASCADE,
    session_id text NOT NULL,
    user_id text,
    previous_user_id text,
    first_start timestamptz(3) NOT NULL,
    last_end timestamptz(3) NOT NULL,
    trace_count integer NOT NULL,
    tokens_input bigint NOT NULL,
    tokens_output bigint NOT NULL,
    cost double precision NOT NULL,
    error_count integer NOT NULL,
    PRIMARY KEY (project_id, session_id))`);
  await db.raw(`CREATE TABLE telemetry_users (
    project_id text COLLATE "C" NOT NULL REFERENCES telemetry_projects(id) ON DELETE CASCADE,
    user_id text NOT NULL,
    first_start timestamptz(3) NOT NULL,
    last_end timestamptz(3) NOT NULL,
    session_count integer NOT NULL,
    trace_count bigint NOT NULL,
    tokens_input bigint NOT NULL,
    tokens_output bigint NOT NULL,
    cost double precision NOT NULL,
    error_count bigint NOT NULL,
    PRIMARY KEY (project_id, user_id))`);
  // Filled before the indexes are built: half the time of maintaining them row by row.
  if (isPostgres(db)) {
    await db.raw('SET LOCAL statement_timeout = 0');
    await db.raw('LOCK TABLE telemetry_traces IN SHARE MODE');
  }
  await backfill(db);
  // Built on the backfilled rows, untimed too (the GiST build over 2.4M sessions passed the client timeout).
  await untimed(db, 'CREATE INDEX telemetry_sessions_recent ON telemetry_sessions (project_id, last_end DESC, session_id DESC)');
  await untimed(db, 'CREATE INDEX telemetry_sessions_user ON telemetry_sessions (project_id, user_id, last_end DESC, session_id DESC) WHERE user_id IS NOT NULL');
  // The sessions active at an instant (a list whose range ends in the past): few rows, whatever the history.
  await untimed(db, `CREATE INDEX telemetry_sessions_active ON telemetry_sessions USING gist (tstzrange(first_start, last_end, '[]'))`);
  await untimed(db, 'CREATE INDEX telemetry_users_recent ON telemetry_users (project_id, last_end DESC, user_id DESC)');
}

/** The rollups recomputed from telemetry_traces (the definition ingest keeps them equal to). */
export async function backfill(db: Knex): Promise<void> {
  await untimed(db, `INSERT INTO telemetry_sessions (project_id, session_id, user_id, first_start, last_end, trace_count, tokens_input, tokens_output, cost, error_count)
    SELECT project_id, session_id, min(user_id), min(start_time), max(end_time), count(*), sum(tokens_input), sum(tokens_output), sum(cost),
           count(*) FILTER (WHERE has_error)
      FROM telemetry_traces WHERE session_id IS NOT NULL GROUP BY project_id, session_id`);
  await untimed(db, `INSERT INTO telemetry_users (project_id, user_id, first_start, last_end, session_count, trace_count, tokens_input, tokens_output, cost, error_count)
    SELECT t.project_id, t.user_id, min(t.start_time), max(t.end_time), coalesce(max(s.n), 0), count(*), sum(t.tokens_input), sum(t.tokens_output),
           sum(t.cost), count(*) FILTER (WHERE t.has_error)
      FROM telemetry_traces t
      LEFT JOIN (SELECT project_id, user_id, count(*) AS n FROM telemetry_sessions WHERE user_id IS NOT NULL GROUP BY project_id, user_id) s
        ON s.project_id = t.project_id AND s.user_id = t.user_id
     WHERE t.user_id IS NOT NULL GROUP BY t.project_id, t.user_id`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE IF EXISTS telemetry_users');
  await db.raw('DROP TABLE IF EXISTS telemetry_sessions');
}
