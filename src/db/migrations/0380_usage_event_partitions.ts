/**
 * Time partitions for the usage events (issue 40 item 6), as 0290 did for the span rows:
 * `usage_events` becomes range-partitioned on `ts` by UTC week (src/db/partitions.ts), so retention
 * (USAGE_EVENT_RETENTION_DAYS, src/usage/event-storage.repository.ts) drops whole weeks.
 *
 * Exactly once moves to its own table. A unique key of a partitioned table must contain the
 * partition key, and (org_id, id, ts) would let a retry with another timestamp in: so
 * `usage_event_ids (org_id, id) → ts` is the deduplication, written in the ingest's statement before
 * the event (`ON CONFLICT DO NOTHING`: a concurrent insert of the same id waits for the first one's
 * transaction and then skips, exactly as the old primary key did). Its rows live as long as ingest
 * could accept their event again: for ever by default; with a retention, ingest refuses events
 * stamped before the cutoff and the retention job deletes a week's ids just before dropping the
 * week (found through the partition's rows and the primary key: no index on ts, which cost
 * ingest). The events table keeps no index on (org_id, id) any more: nothing reads it by id.
 *
 * Online, for an install with events — no copy of the events, one short exclusive lock:
 * 1. create `usage_event_ids` and a trigger on `usage_events` that records each new event's id
 *    (processes of the previous version keep ingesting meanwhile), then fill it from the stored
 *    events in chunks of 50,000 ids (each its own short statement, key order);
 * 2. a CHECK (ts < B) NOT VALID, B = the Monday after this week; events stamped at or after B (at
 *    most FUTURE_SKEW ahead) move to a holding table; VALIDATE under SHARE UPDATE EXCLUSIVE;
 * 3. one short transaction: drop the trigger, rename the table to `usage_events_legacy`, create the
 *    partitioned parent (its foreign key and index made while it is empty), ATTACH the old table
 *    FROM (MINVALUE) TO (B) — the validated CHECK spares the scan, the index and foreign key are
 *    adopted — add the DEFAULT partition and this week's and the next two, put the held rows back.
 * The legacy partition keeps its old primary key (a local index); it ages out like any other.
 * A process of the previous version still running after step 3 fails its inserts (its
 * `ON CONFLICT (org_id, id)` has no index to arbitrate on: 500, nothing stored) until replaced:
 * the client's retry reaches a new process and is stored once.
 *
 * An empty table (a new install) is simply replaced.
 */
import type { Knex } from 'knex';
import { createWeekPartitions, isPartitioned, WEEK_MS, weekStart } from '../partitions.js';

export const config = { transaction: false };

const TABLE = 'usage_events';
const IDS = 'usage_event_ids';
const AHEAD_WEEKS = 2;
const BACKFILL_CHUNK = 50_000;

async function createParent(trx: Knex.Transaction): Promise<void> {
  await trx.raw(`CREATE TABLE ${TABLE} (
    org_id text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    customer_id text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL,
    ts timestamptz(3) NOT NULL,
    properties jsonb NOT NULL,
    received_at timestamptz(3) NOT NULL
  ) PARTITION BY RANGE (ts)`);
  await trx.raw(`ALTER TABLE ${TABLE} ADD CONSTRAINT ${TABLE}_org_id_fkey FOREIGN KEY (org_id) REFERENCES organizations (id) ON DELETE CASCADE`);
  await trx.raw(`CREATE INDEX ${TABLE}_customer_name_ts ON ${TABLE} (org_id, customer_id, name, ts)`);
}

async function createIds(db: Knex | Knex.Transaction): Promise<void> {
  await db.raw(`CREATE TABLE IF NOT EXISTS ${IDS} (
    org_id text COLLATE "C" NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    id text COLLATE "C" NOT NULL,
    ts timestamptz(3) NOT NULL,
    PRIMARY KEY (org_id, id)
  )`);
}

interface Connection {
  query(q: { text: string; query_timeout?: number }): Promise<{ rows: unknown[] }>;
}

/** A whole-table statement without the pool's statement and client timeouts (as 0290). */
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

/** Copies the stored events' ids into usage_event_ids, chunk by chunk in key order; returns how many chunks. */
export async function backfillIds(db: Knex, chunk = BACKFILL_CHUNK): Promise<number> {
  let after: { org_id: string; id: string } | undefined;
  let chunks = 0;
  for (;;) {
    const where = after ? 'WHERE (org_id, id) > (?, ?)' : '';
    const result = await db.raw(
      `WITH chunk AS (SELECT org_id, id, ts FROM ${TABLE} ${where} ORDER BY org_id, id LIMIT ?),
            copied AS (INSERT INTO ${IDS} (org_id, id, ts) SELECT org_id, id, ts FROM chunk ON CONFLICT DO NOTHING)
       SELECT org_id, id FROM chunk ORDER BY org_id DESC, id DESC LIMIT 1`,
      [...(after ? [after.org_id, after.id] : []), chunk],
    );
    const last = (result.rows as Array<{ org_id: string; id: string }>)[0];
    if (!last) return chunks;
    chunks++;
    after = last;
  }
}

/** Converts the plain table to the partitioned one with its id table, as described above; `now` places the boundary. */
export async function partitionUsageEvents(db: Knex, now: Date, hooks: { afterTrigger?: () => Promise<void>; backfillChunk?: number } = {}): Promise<void> {
  if (await isPartitioned(db, TABLE)) return;
  const thisWeek = weekStart(now.getTime());
  const boundary = thisWeek + WEEK_MS;
  const weeks = Array.from({ length: AHEAD_WEEKS + 1 }, (_, i) => thisWeek + i * WEEK_MS);
  await createIds(db);
  const empty = ((await db.raw(`SELECT NOT EXISTS (SELECT 1 FROM ${TABLE}) AS empty`)).rows as Array<{ empty: boolean }>)[0]!.empty;
  if (empty) {
    await db.transaction(async (trx) => {
      await trx.raw(`LOCK TABLE ${TABLE} IN ACCESS EXCLUSIVE MODE`);
      // An event stored since the check above: kept (the replaced table is not empty after all).
      await trx.raw(`INSERT INTO ${IDS} (org_id, id, ts) SELECT org_id, id, ts FROM ${TABLE} ON CONFLICT DO NOTHING`);
      await trx.raw(`CREATE TEMP TABLE ${TABLE}_late ON COMMIT DROP AS SELECT * FROM ${TABLE}`);
      await trx.raw(`DROP TABLE ${TABLE}`);
      await createParent(trx);
      await trx.raw(`CREATE TABLE ${TABLE}_default PARTITION OF ${TABLE} DEFAULT`);
      await createWeekPartitions(trx, TABLE, weeks);
      await trx.raw(`INSERT INTO ${TABLE} SELECT * FROM ${TABLE}_late`);
    });
    return;
  }
  // 1. Ids of new events by trigger (the previous version's ingest), then of the stored ones.
  await db.raw(`CREATE OR REPLACE FUNCTION ${IDS}_record() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO ${IDS} (org_id, id, ts) VALUES (NEW.org_id, NEW.id, NEW.ts) ON CONFLICT DO NOTHING;
      RETURN NULL;
    END $$`);
  await db.raw(`DROP TRIGGER IF EXISTS ${TABLE}_record_ids ON ${TABLE}`);
  // Takes SHARE ROW EXCLUSIVE: waits for inserts in flight, so every event not seen by the trigger is committed before the copy.
  await db.raw(`CREATE TRIGGER ${TABLE}_record_ids AFTER INSERT ON ${TABLE} FOR EACH ROW EXECUTE FUNCTION ${IDS}_record()`);
  await hooks.afterTrigger?.();
  await backfillIds(db, hooks.backfillChunk);
  // 2. The bound, the rows beyond it held aside, the scan that proves it.
  const b = new Date(boundary).toISOString();
  await db.raw(`ALTER TABLE ${TABLE} DROP CONSTRAINT IF EXISTS ${TABLE}_legacy_bound`);
  await db.raw(`ALTER TABLE ${TABLE} ADD CONSTRAINT ${TABLE}_legacy_bound CHECK (ts < '${b}') NOT VALID`);
  await db.raw(`DROP TABLE IF EXISTS ${TABLE}_held`);
  await db.raw(`CREATE TABLE ${TABLE}_held (LIKE ${TABLE})`);
  await unbounded(db, `WITH moved AS (DELETE FROM ${TABLE} WHERE ts >= '${b}' RETURNING *) INSERT INTO ${TABLE}_held SELECT * FROM moved`);
  await unbounded(db, `ALTER TABLE ${TABLE} VALIDATE CONSTRAINT ${TABLE}_legacy_bound`);
  // 3. The swap.
  await db.transaction(async (trx) => {
    await trx.raw(`DROP TRIGGER ${TABLE}_record_ids ON ${TABLE}`);
    await trx.raw(`DROP FUNCTION ${IDS}_record()`);
    await trx.raw(`ALTER TABLE ${TABLE} RENAME TO ${TABLE}_legacy`);
    await trx.raw(`ALTER TABLE ${TABLE}_legacy RENAME CONSTRAINT ${TABLE}_pkey TO ${TABLE}_legacy_pkey`);
    await trx.raw(`ALTER TABLE ${TABLE}_legacy RENAME CONSTRAINT ${TABLE}_org_id_fkey TO ${TABLE}_legacy_org_id_fkey`);
    await trx.raw(`ALTER INDEX ${TABLE}_customer_name_ts RENAME TO ${TABLE}_legacy_customer_name_ts`);
    await createParent(trx);
    await trx.raw(`ALTER TABLE ${TABLE} ATTACH PARTITION ${TABLE}_legacy FOR VALUES FROM (MINVALUE) TO ('${b}')`);
    await trx.raw(`CREATE TABLE ${TABLE}_default PARTITION OF ${TABLE} DEFAULT`);
    await createWeekPartitions(trx, TABLE, weeks);
    await trx.raw(`INSERT INTO ${TABLE} SELECT * FROM ${TABLE}_held`);
    await trx.raw(`DROP TABLE ${TABLE}_held`);
  });
}

export async function up(db: Knex): Promise<void> {
  await partitionUsageEvents(db, new Date());
}

/** Back to one plain table with its primary key (copies every row: for development databases, not a live install). */
export async function down(db: Knex): Promise<void> {
  if (await isPartitioned(db, TABLE)) {
    await db.transaction(async (trx) => {
      await trx.raw(`ALTER TABLE ${TABLE} RENAME TO ${TABLE}_partitioned`);
      await trx.raw(`CREATE TABLE ${TABLE} (LIKE ${TABLE}_partitioned INCLUDING DEFAULTS)`);
      await trx.raw(`INSERT INTO ${TABLE} SELECT * FROM ${TABLE}_partitioned`);
      await trx.raw(`DROP TABLE ${TABLE}_partitioned CASCADE`);
      await trx.raw(`ALTER TABLE ${TABLE} ADD PRIMARY KEY (org_id, id)`);
      await trx.raw(`ALTER TABLE ${TABLE} ADD CONSTRAINT ${TABLE}_org_id_fkey FOREIGN KEY (org_id) REFERENCES organizations (id) ON DELETE CASCADE`);
      await trx.raw(`CREATE INDEX ${TABLE}_customer_name_ts ON ${TABLE} (org_id, customer_id, name, ts)`);
    });
  }
  await db.raw(`DROP TABLE IF EXISTS ${IDS}`);
}
