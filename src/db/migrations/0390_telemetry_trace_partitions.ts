/**
 * Time partitions for the traces (issue 40 item 6), after the span rows (0290) and the usage
 * events (0380): `telemetry_traces` becomes range-partitioned by UTC week (src/db/partitions.ts),
 * so retention drops whole weeks of traces with the span rows' weeks.
 *
 * The partition key is `partition_start`: the trace's start time when it was first stored, which
 * never changes. `start_time` (what the explorer shows and filters on) still moves earlier when a
 * later batch brings an earlier span, so `start_time <= partition_start` always holds:
 * - a trace never moves between partitions (no row movement, no change of a row's partition under
 *   a concurrent ingest or retention);
 * - a time-bounded trace list adds `partition_start >= from` (implied by `start_time >= from`) and
 *   is pruned to the weeks from `from` on;
 * - a week ending before every project's cutoff holds only expired traces (start_time <=
 *   partition_start < the week's end <= cutoff): it can be dropped whole.
 *
 * Identity: one row per (project, trace id) across all time. A partitioned table's unique key must
 * contain the partition key, and (project, trace id, partition_start) would let two batches of one
 * new trace with starts in different weeks both insert. So, as 0380 did for the usage events, the
 * identity is its own narrow table `telemetry_trace_ids (project_id, trace_id) → partition_start`
 * (primary key on the pair): ingest claims a new trace's id there in its transaction before
 * inserting the trace (a concurrent claim of the same id waits for the first transaction, then
 * finds it: ConcurrentInsertError, the batch is retried and extends the stored trace, as with the
 * old primary key), and every lookup of a stored trace reads its partition_start there. Retention
 * removes a trace's id with the trace (the same transaction, for a week's drop too).
 *
 * Online, for an install with traces — no copy of the traces, one short exclusive lock:
 * 1. `partition_start` added with a constant default B − 1 ms (B = the Monday after this week): a
 *    catalog change, no rewrite; every stored trace (and every trace a process of the previous
 *    version inserts meanwhile) gets it, and start_time <= it holds once step 3 has checked it;
 * 2. `telemetry_trace_ids` created, a trigger records the id of each trace inserted from then on,
 *    the stored ids are copied in chunks of 50,000 (key order, one short statement each);
 * 3. CHECK (start_time < B AND partition_start < B) NOT VALID; traces starting at or after B (sent
 *    with future times) move to a holding table; VALIDATE under SHARE UPDATE EXCLUSIVE (ingest and
 *    reads go on); an index on (project_id, trace_id) built CONCURRENTLY (the parent's lookup
 *    index is not unique; the old primary key, unique, cannot stand for it at ATTACH);
 * 4. one short transaction: drop the trigger, rename the table to `telemetry_traces_legacy`, create
 *    the partitioned parent (its foreign key and indexes made while it is empty), ATTACH the old
 *    table FROM (MINVALUE) TO (B) — the validated CHECK spares the scan, the indexes and foreign key
 *    are adopted — add the DEFAULT partition and this week's and the next two, put the held traces
 *    back with partition_start = start_time (their ids likewise).
 * A process of the previous version must not write traces after step 4 (its insert has no
 * partition_start and fails; its update matches rows by ctid, which names a row only within one
 * partition): roll the API processes with the migration.
 *
 * An empty table (a new install) is simply replaced.
 */
import type { Knex } from 'knex';
import { createWeekPartitions, isPartitioned, WEEK_MS, weekStart } from '../partitions.js';

export const config = { transaction: false };

const TABLE = 'telemetry_traces';
const IDS = 'telemetry_trace_ids';
const AHEAD_WEEKS = 2;
const BACKFILL_CHUNK = 50_000;

/** The indexes of the table (0010, 0190) and the parent's lookup index, by name. */
const INDEXES: Array<[string, string]> = [
  ['telemetry_traces_trace', '(project_id, trace_id)'],
  ['telemetry_traces_search', '(project_id, start_time DESC, trace_id DESC)'],
  ['telemetry_traces_created', '(project_id, created_at)'],
  ['telemetry_traces_duration', '(project_id, duration_ms DESC, trace_id DESC)'],
  ['telemetry_traces_cost', '(project_id, cost DESC, trace_id DESC)'],
  ['telemetry_traces_session', '(project_id, session_id, start_time, trace_id) WHERE session_id IS NOT NULL'],
  ['telemetry_traces_user', '(project_id, user_id, start_time) WHERE user_id IS NOT NULL'],
  ['telemetry_traces_attribute_pairs', 'USING gin (attribute_pairs)'],
];

/** Every column, in the parent's order (explicit lists: the legacy table's order differs). */
export const TRACE_TABLE_COLUMNS =
  'project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes, model, models, tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at, session_id, user_id, attribute_pairs, partition_start';

async function createParent(trx: Knex.Transaction): Promise<void> {
  await trx.raw(`CREATE TABLE ${TABLE} (
    project_id text COLLATE "C" NOT NULL,
    trace_id text COLLATE "C" NOT NULL,
    start_time timestamptz(3) NOT NULL,
    end_time timestamptz(3) NOT NULL,
    duration_ms bigint NOT NULL,
    span_count integer NOT NULL,
    root_name text NOT NULL,
    root_attributes text NOT NULL,
    model text,
    models text[] NOT NULL,
    tokens_input bigint NOT NULL,
    tokens_output bigint NOT NULL,
    cost double precision NOT NULL,
    has_error boolean NOT NULL,
    spans text NOT NULL,
    created_at timestamptz(3) NOT NULL,
    updated_at timestamptz(3) NOT NULL,
    session_id text,
    user_id text,
    attribute_pairs text[] NOT NULL DEFAULT '{}',
    partition_start timestamptz(3) NOT NULL
  ) PARTITION BY RANGE (partition_start)`);
  // lz4 where the server has it (as 0010); partitions copy it (LIKE … INCLUDING COMPRESSION).
  await trx.raw(`DO $$ BEGIN
    EXECUTE 'ALTER TABLE ${TABLE} ALTER COLUMN spans SET COMPRESSION lz4';
  EXCEPTION WHEN others THEN NULL;
  END $$`);
  await trx.raw(`ALTER TABLE ${TABLE} ADD CONSTRAINT ${TABLE}_project_id_foreign FOREIGN KEY (project_id) REFERENCES telemetry_projects (id) ON DELETE CASCADE`);
  for (const [name, definition] of INDEXES) await trx.raw(`CREATE INDEX ${name} ON ${TABLE} ${definition}`);
}

async function createIds(db: Knex | Knex.Transaction): Promise<void> {
  await db.raw(`CREATE TABLE IF NOT EXISTS ${IDS} (
    project_id text COLLATE "C" NOT NULL REFERENCES telemetry_projects(id) ON DELETE CASCADE,
    trace_id text COLLATE "C" NOT NULL,
    partition_start timestamptz(3) NOT NULL,
    PRIMARY KEY (project_id, trace_id)
  )`);
}

interface Connection {
  query(q: { text: string; query_timeout?: number }): Promise<{ rows: unknown[] }>;
}

const isPglite = (db: Knex): boolean => 'pglite' in (db.client as object);

/** A whole-table statement without the pool's statement and client timeouts (as 0290). */
async function unbounded(db: Knex, text: string): Promise<void> {
  if (isPglite(db)) {
    await db.raw(text);
    return;
  }
  const client = db.client as { acquireConnection(): Promise<Connection>; releaseConnection(c: Connection): Promise<unknown> };
  const connection = await client.acquireConnection();
  try {
    const { rows } = await connection.query({ text: 'SHOW statement_timeout' });
    await connection.query({ text: 'SET statement_timeout = 0' });
    try {
      await connection.query({ text, query_timeout: 24 * 3600 * 1000 });
    } finally {
      await connection.query({ text: `SET statement_timeout = '${(rows[0] as { statement_timeout: string }).statement_timeout}'` });
    }
  } finally {
    await client.releaseConnection(connection);
  }
}

/** Copies the stored traces' ids into telemetry_trace_ids, chunk by chunk in key order; returns how many chunks. */
export async function backfillTraceIds(db: Knex, chunk = BACKFILL_CHUNK): Promise<number> {
  let after: { project_id: string; trace_id: string } | undefined;
  let chunks = 0;
  for (;;) {
    const where = after ? 'WHERE (project_id, trace_id) > (?, ?)' : '';
    const result = await db.raw(
      `WITH chunk AS (SELECT project_id, trace_id, partition_start FROM ${TABLE} ${where} ORDER BY project_id, trace_id LIMIT ?),
            copied AS (INSERT INTO ${IDS} (project_id, trace_id, partition_start) SELECT project_id, trace_id, partition_start FROM chunk ON CONFLICT DO NOTHING)
       SELECT project_id, trace_id FROM chunk ORDER BY project_id DESC, trace_id DESC LIMIT 1`,
      [...(after ? [after.project_id, after.trace_id] : []), chunk],
    );
    const last = (result.rows as Array<{ project_id: string; trace_id: string }>)[0];
    if (!last) return chunks;
    chunks++;
    after = last;
  }
}

export interface PartitionTracesHooks {
  /** After the trigger is in place, before the backfill (a test writes there). */
  afterTrigger?: () => Promise<void>;
  /** Before the swap (a test checks that writes went on until then). */
  beforeSwap?: () => Promise<void>;
  backfillChunk?: number;
}

/** Converts the plain table to the partitioned one with its id table, as described above; `now` places the boundary. */
export async function partitionTraces(db: Knex, now: Date, hooks: PartitionTracesHooks = {}): Promise<void> {
  if (await isPartitioned(db, TABLE)) return;
  const thisWeek = weekStart(now.getTime());
  const boundary = thisWeek + WEEK_MS;
  const weeks = Array.from({ length: AHEAD_WEEKS + 1 }, (_, i) => thisWeek + i * WEEK_MS);
  const b = new Date(boundary).toISOString();
  const legacyStart = new Date(boundary - 1).toISOString();
  await createIds(db);
  const empty = ((await db.raw(`SELECT NOT EXISTS (SELECT 1 FROM ${TABLE}) AS empty`)).rows as Array<{ empty: boolean }>)[0]!.empty;
  if (empty) {
    await db.transaction(async (trx) => {
      await trx.raw(`LOCK TABLE ${TABLE} IN ACCESS EXCLUSIVE MODE`);
      // A trace stored since the check above: kept (the replaced table is not empty after all).
      const cols = TRACE_TABLE_COLUMNS.replace(', partition_start', '');
      await trx.raw(`CREATE TEMP TABLE ${TABLE}_late ON COMMIT DROP AS SELECT ${cols}, start_time AS partition_start FROM ${TABLE}`);
      await trx.raw(`INSERT INTO ${IDS} (project_id, trace_id, partition_start) SELECT project_id, trace_id, partition_start FROM ${TABLE}_late ON CONFLICT DO NOTHING`);
      await trx.raw(`DROP TABLE ${TABLE}`);
      await createParent(trx);
      await trx.raw(`CREATE TABLE ${TABLE}_default PARTITION OF ${TABLE} DEFAULT`);
      await createWeekPartitions(trx, TABLE, weeks);
      await trx.raw(`INSERT INTO ${TABLE} (${TRACE_TABLE_COLUMNS}) SELECT ${TRACE_TABLE_COLUMNS} FROM ${TABLE}_late`);
    });
    return;
  }
  // 1. The key column: a constant default, no rewrite.
  await db.raw(`ALTER TABLE ${TABLE} ADD COLUMN IF NOT EXISTS partition_start timestamptz(3) NOT NULL DEFAULT '${legacyStart}'`);
  // 2. Ids of new traces by trigger (the previous version's ingest), then of the stored ones.
  await db.raw(`CREATE OR REPLACE FUNCTION ${IDS}_record() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO ${IDS} (project_id, trace_id, partition_start) VALUES (NEW.project_id, NEW.trace_id, NEW.partition_start) ON CONFLICT DO NOTHING;
      RETURN NULL;
    END $$`);
  await db.raw(`DROP TRIGGER IF EXISTS ${TABLE}_record_ids ON ${TABLE}`);
  // SHARE ROW EXCLUSIVE: waits for inserts in flight, so every trace the trigger misses is committed before the copy.
  await db.raw(`CREATE TRIGGER ${TABLE}_record_ids AFTER INSERT ON ${TABLE} FOR EACH ROW EXECUTE FUNCTION ${IDS}_record()`);
  await hooks.afterTrigger?.();
  await backfillTraceIds(db, hooks.backfillChunk);
  // 3. The bound, the traces beyond it held aside, the scan that proves it, the lookup index.
  await db.raw(`ALTER TABLE ${TABLE} DROP CONSTRAINT IF EXISTS ${TABLE}_legacy_bound`);
  await db.raw(`ALTER TABLE ${TABLE} ADD CONSTRAINT ${TABLE}_legacy_bound CHECK (start_time < '${b}' AND partition_start < '${b}') NOT VALID`);
  await db.raw(`DROP TABLE IF EXISTS ${TABLE}_held`);
  await db.raw(`CREATE TABLE ${TABLE}_held (LIKE ${TABLE})`);
  await unbounded(db, `WITH moved AS (DELETE FROM ${TABLE} WHERE start_time >= '${b}' RETURNING *) INSERT INTO ${TABLE}_held SELECT * FROM moved`);
  await unbounded(db, `ALTER TABLE ${TABLE} VALIDATE CONSTRAINT ${TABLE}_legacy_bound`);
  if (isPglite(db)) {
    await db.raw(`CREATE INDEX IF NOT EXISTS ${TABLE}_legacy_trace ON ${TABLE} (project_id, trace_id)`);
  } else {
    const invalid = await db.raw(`SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = ? AND NOT i.indisvalid`, [`${TABLE}_legacy_trace`]);
    if (invalid.rows.length > 0) await db.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${TABLE}_legacy_trace`);
    await unbounded(db, `CREATE INDEX CONCURRENTLY IF NOT EXISTS ${TABLE}_legacy_trace ON ${TABLE} (project_id, trace_id)`);
  }
  await hooks.beforeSwap?.();
  // 4. The swap.
  await db.transaction(async (trx) => {
    await trx.raw(`DROP TRIGGER ${TABLE}_record_ids ON ${TABLE}`);
    await trx.raw(`DROP FUNCTION ${IDS}_record()`);
    await trx.raw(`ALTER TABLE ${TABLE} RENAME TO ${TABLE}_legacy`);
    await trx.raw(`ALTER TABLE ${TABLE}_legacy RENAME CONSTRAINT ${TABLE}_pkey TO ${TABLE}_legacy_pkey`);
    await trx.raw(`ALTER TABLE ${TABLE}_legacy RENAME CONSTRAINT ${TABLE}_project_id_foreign TO ${TABLE}_legacy_project_id_foreign`);
    for (const [name] of INDEXES) {
      if (name !== 'telemetry_traces_trace') await trx.raw(`ALTER INDEX ${name} RENAME TO ${name.replace(TABLE, `${TABLE}_legacy`)}`);
    }
    await createParent(trx);
    await trx.raw(`ALTER TABLE ${TABLE} ATTACH PARTITION ${TABLE}_legacy FOR VALUES FROM (MINVALUE) TO ('${b}')`);
    await trx.raw(`CREATE TABLE ${TABLE}_default PARTITION OF ${TABLE} DEFAULT`);
    await createWeekPartitions(trx, TABLE, weeks);
    // A held trace that a previous-version process stored again meanwhile (it did not find it) keeps the newer row.
    await trx.raw(
      `INSERT INTO ${TABLE} (${TRACE_TABLE_COLUMNS})
       SELECT ${TRACE_TABLE_COLUMNS.replace(', partition_start', '')}, h.start_time FROM ${TABLE}_held h
        WHERE NOT EXISTS (SELECT 1 FROM ${TABLE} t WHERE t.project_id = h.project_id AND t.trace_id = h.trace_id)`,
    );
    await trx.raw(
      `UPDATE ${IDS} i SET partition_start = t.partition_start FROM ${TABLE} t
        WHERE t.partition_start >= '${b}' AND i.project_id = t.project_id AND i.trace_id = t.trace_id`,
    );
    await trx.raw(`DROP TABLE ${TABLE}_held`);
  });
}

export async function up(db: Knex): Promise<void> {
  await partitionTraces(db, new Date());
}

/** Back to one plain table with its primary key (copies every trace: for development databases, not a live install). */
export async function down(db: Knex): Promise<void> {
  if (await isPartitioned(db, TABLE)) {
    await db.transaction(async (trx) => {
      const cols = TRACE_TABLE_COLUMNS.replace(', partition_start', '');
      await trx.raw(`ALTER TABLE ${TABLE} RENAME TO ${TABLE}_partitioned`);
      for (const [name] of INDEXES) await trx.raw(`ALTER INDEX IF EXISTS ${name} RENAME TO ${name}_partitioned`);
      await trx.raw(`ALTER TABLE ${TABLE}_partitioned RENAME CONSTRAINT ${TABLE}_project_id_foreign TO ${TABLE}_partitioned_project_id_foreign`);
      await trx.raw(`CREATE TABLE ${TABLE} AS SELECT ${cols} FROM ${TABLE}_partitioned WITH NO DATA`);
      await trx.raw(`INSERT INTO ${TABLE} (${cols}) SELECT ${cols} FROM ${TABLE}_partitioned`);
      await trx.raw(`DROP TABLE ${TABLE}_partitioned CASCADE`);
      for (const column of ['project_id', 'trace_id', 'start_time', 'end_time', 'duration_ms', 'span_count', 'root_name', 'root_attributes', 'models', 'tokens_input', 'tokens_output', 'cost', 'has_error', 'spans', 'created_at', 'updated_at', 'attribute_pairs']) {
        await trx.raw(`ALTER TABLE ${TABLE} ALTER COLUMN ${column} SET NOT NULL`);
      }
      await trx.raw(`ALTER TABLE ${TABLE} ALTER COLUMN attribute_pairs SET DEFAULT '{}'`);
      await trx.raw(`ALTER TABLE ${TABLE} ADD PRIMARY KEY (project_id, trace_id)`);
      await trx.raw(`ALTER TABLE ${TABLE} ADD CONSTRAINT ${TABLE}_project_id_foreign FOREIGN KEY (project_id) REFERENCES telemetry_projects (id) ON DELETE CASCADE`);
      for (const [name, definition] of INDEXES) {
        if (name === 'telemetry_traces_trace') continue;
        await trx.raw(`CREATE INDEX ${name} ON ${TABLE} ${definition}`);
      }
    });
  }
  await db.raw(`DROP TABLE IF EXISTS ${IDS}`);
}
