/**
 * Time partitions for the span rows of telemetry (issue 40 item 6): `telemetry_model_calls` becomes
 * range-partitioned on `start_time` by UTC week (src/telemetry/partitions.repository.ts), so
 * retention drops whole weeks instead of deleting rows.
 *
 * Online, for an install with data — no copy, no rewrite, one short exclusive lock:
 * 1. a CHECK (start_time < B) NOT VALID on the table, B = the Monday after this week (a brief lock;
 *    from then on a span more than this week ahead is refused until step 4 — seconds);
 * 2. rows already at or after B (spans sent with future times) are moved to a holding table;
 * 3. VALIDATE the CHECK: a scan under SHARE UPDATE EXCLUSIVE, which lets ingest and reads go on;
 * 4. one short transaction: rename the table to `telemetry_model_calls_legacy`, create the
 *    partitioned parent (same columns, its foreign key and index created while it is empty), ATTACH
 *    the old table as the partition FROM (MINVALUE) TO (B) — the validated CHECK spares the scan,
 *    the existing index and foreign key are adopted as the parent's — add the DEFAULT partition and
 *    this week's and the next weeks' partitions, put the held rows back.
 * The legacy partition ages out: retention drops it once B is older than every project's cutoff,
 * and until then deletes its expired rows as before.
 *
 * An empty table (a new install) is simply replaced by the partitioned one.
 */
import type { Knex } from 'knex';
import { createWeekPartitions, isPartitioned, WEEK_MS, weekStart } from '../partitions.js';

export const config = { transaction: false };

const TABLE = 'telemetry_model_calls';
/** Weeks created ahead at migration (the partition job keeps the same lead afterwards). */
const AHEAD_WEEKS = 2;

async function createParent(trx: Knex.Transaction): Promise<void> {
  await trx.raw(`CREATE TABLE ${TABLE} (
    project_id text COLLATE "C" NOT NULL,
    start_time timestamptz(3) NOT NULL,
    trace_id text COLLATE "C" NOT NULL,
    span_id text COLLATE "C" NOT NULL,
    model text NOT NULL,
    vendor text,
    duration_ms bigint NOT NULL,
    tokens_input bigint,
    tokens_output bigint,
    cost double precision,
    is_error boolean NOT NULL
  ) PARTITION BY RANGE (start_time)`);
  await trx.raw(`ALTER TABLE ${TABLE} ADD CONSTRAINT ${TABLE}_project_id_foreign FOREIGN KEY (project_id) REFERENCES telemetry_projects (id) ON DELETE CASCADE`);
  await trx.raw(`CREATE INDEX ${TABLE}_project_id_start_time_index ON ${TABLE} (project_id, start_time)`);
}

interface Connection {
  query(q: { text: string; query_timeout?: number }): Promise<{ rows: unknown[] }>;
}

/**
 * Runs a statement that scans the whole table without the pool's statement and client timeouts
 * (15 and 20 s), on one connection, restoring them after (as 0120 does).
 */
async function unbounded(db: Knex, text: string): Promise<void> {
  if ('pglite' in (db.client as object)) {
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

/** Converts the plain table to the partitioned one, as described above; `now` places the boundary. */
export async function partitionModelCalls(db: Knex, now: Date): Promise<void> {
  if (await isPartitioned(db, TABLE)) return;
  const thisWeek = weekStart(now.getTime());
  const boundary = thisWeek + WEEK_MS;
  const weeks = Array.from({ length: AHEAD_WEEKS + 1 }, (_, i) => thisWeek + i * WEEK_MS);
  const empty = ((await db.raw(`SELECT NOT EXISTS (SELECT 1 FROM ${TABLE}) AS empty`)).rows as Array<{ empty: boolean }>)[0]!.empty;
  if (empty) {
    await db.transaction(async (trx) => {
      await trx.raw(`DROP TABLE ${TABLE}`);
      await createParent(trx);
      await trx.raw(`CREATE TABLE ${TABLE}_default PARTITION OF ${TABLE} DEFAULT`);
      await createWeekPartitions(trx, TABLE, weeks);
    });
    return;
  }
  const b = new Date(boundary).toISOString();
  await db.raw(`ALTER TABLE ${TABLE} DROP CONSTRAINT IF EXISTS ${TABLE}_legacy_bound`);
  await db.raw(`ALTER TABLE ${TABLE} ADD CONSTRAINT ${TABLE}_legacy_bound CHECK (start_time < '${b}') NOT VALID`);
  await db.raw(`DROP TABLE IF EXISTS ${TABLE}_held`);
  await db.raw(`CREATE TABLE ${TABLE}_held (LIKE ${TABLE})`);
  // The two scans of the whole table run without the pool's statement timeout.
  await unbounded(db, `WITH moved AS (DELETE FROM ${TABLE} WHERE start_time >= '${b}' RETURNING *) INSERT INTO ${TABLE}_held SELECT * FROM moved`);
  await unbounded(db, `ALTER TABLE ${TABLE} VALIDATE CONSTRAINT ${TABLE}_legacy_bound`);
  await db.transaction(async (trx) => {
    await trx.raw(`ALTER TABLE ${TABLE} RENAME TO ${TABLE}_legacy`);
    await trx.raw(`ALTER TABLE ${TABLE}_legacy RENAME CONSTRAINT ${TABLE}_project_id_foreign TO ${TABLE}_legacy_project_id_foreign`);
    await trx.raw(`ALTER INDEX ${TABLE}_project_id_start_time_index RENAME TO ${TABLE}_legacy_project_id_start_time_index`);
    await createParent(trx);
    await trx.raw(`ALTER TABLE ${TABLE} ATTACH PARTITION ${TABLE}_legacy FOR VALUES FROM (MINVALUE) TO ('${b}')`);
    await trx.raw(`CREATE TABLE ${TABLE}_default PARTITION OF ${TABLE} DEFAULT`);
    await createWeekPartitions(trx, TABLE, weeks);
    await trx.raw(`INSERT INTO ${TABLE} SELECT * FROM ${TABLE}_held`);
    await trx.raw(`DROP TABLE ${TABLE}_held`);
  });
}

export async function up(db: Knex): Promise<void> {
  await partitionModelCalls(db, new Date());
}

/** Back to one plain table (copies every row: for development databases, not a live install). */
export async function down(db: Knex): Promise<void> {
  if (!(await isPartitioned(db, TABLE))) return;
  await db.transaction(async (trx) => {
    await trx.raw(`ALTER TABLE ${TABLE} RENAME TO ${TABLE}_partitioned`);
    await trx.raw(`CREATE TABLE ${TABLE} (LIKE ${TABLE}_partitioned INCLUDING DEFAULTS)`);
    await trx.raw(`INSERT INTO ${TABLE} SELECT * FROM ${TABLE}_partitioned`);
    await trx.raw(`DROP TABLE ${TABLE}_partitioned CASCADE`);
    await trx.raw(`ALTER TABLE ${TABLE} ADD CONSTRAINT ${TABLE}_project_id_foreign FOREIGN KEY (project_id) REFERENCES telemetry_projects (id) ON DELETE CASCADE`);
    await trx.raw(`CREATE INDEX ${TABLE}_project_id_start_time_index ON ${TABLE} (project_id, start_time)`);
  });
}
