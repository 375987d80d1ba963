/**
 * Time partitions of the tables that grow fastest (issue 40 item 6): the telemetry span rows
 * (migration 0290), the usage events (migration 0380, src/usage/event-storage.repository.ts) and
 * the traces (migration 0390: by `partition_start`, the trace's start when first stored, with
 * identity in telemetry_trace_ids).
 *
 * `telemetry_model_calls` (one row per model-call span) is range-partitioned on `start_time` by
 * UTC week (Monday 00:00 to Monday 00:00), `usage_events` on `ts` the same way, each with:
 * - `<table>_pYYYYMMDD`: one partition per week, named by its Monday;
 * - `<table>_legacy`: on an install migrated with data, the table as it was, attached as the
 *   partition `FROM (MINVALUE) TO (<a Monday>)` (no copy, no rewrite); it ages out like any other;
 * - `<table>_default`: the DEFAULT partition — rows of a week with no partition of its own (a span
 *   far in the past or future). No span is lost or refused for its time; creating a week's
 *   partition later moves that week's rows out of the default first.
 *
 * Partitions are created ahead by TelemetryPartitionJob and UsageEventPartitionJob (this week and
 * the next two) and on demand by ingest for a week within ON_DEMAND_PAST_DAYS before now to
 * ON_DEMAND_FUTURE_DAYS after it; outside that window rows go to the default partition (so a
 * client cannot make one table per week over centuries). Retention drops whole partitions older
 * than every project's cutoff and deletes the remainder row by row (RetentionJob); the usage
 * events' retention is src/usage/event-storage.job.ts.
 *
 * Identity: a model-call row is found by (project, start time, trace id, span id) — OTLP re-sends a
 * span with the same start time, and a re-send with another start time finds the old row by the
 * start time kept in the trace's span document — so the partition key is part of every lookup.
 */
import type { Knex } from 'knex';

export const PARTITIONED_TABLES = ['telemetry_model_calls', 'usage_events', 'telemetry_traces'] as const;
export type PartitionedTable = (typeof PARTITIONED_TABLES)[number];
/** Each table's partition key (a timestamptz column). */
export const PARTITION_COLUMN: Record<PartitionedTable, string> = {
  telemetry_model_calls: 'start_time',
  usage_events: 'ts',
  // The trace's start when first stored, never moved (migration 0390); start_time <= it.
  telemetry_traces: 'partition_start',
};

const DAY_MS = 86_400_000;
export const WEEK_MS = 7 * DAY_MS;
export const ON_DEMAND_PAST_DAYS = 400;
export const ON_DEMAND_FUTURE_DAYS = 14;
/** How long a partition DDL waits for its lock before giving up until the next pass. */
const LOCK_TIMEOUT = '2s';

/** Monday 00:00 UTC of the week containing `ms` (1970-01-01 was a Thursday). */
export const weekStart = (ms: number): number => {
  const days = Math.floor(ms / DAY_MS);
  return (days - ((days + 3) % 7)) * DAY_MS;
};

const ymd = (ms: number): string => new Date(ms).toISOString().slice(0, 10).replaceAll('-', '');
export const partitionName = (table: PartitionedTable, week: number): string => `${table}_p${ymd(week)}`;

export interface PartitionInfo {
  name: string;
  /** Lower bound (null: MINVALUE or the default partition). */
  from: Date | null;
  /** Upper bound (exclusive; null: the default partition). */
  to: Date | null;
  isDefault: boolean;
}

type Runner = Knex | Knex.Transaction;

/** Whether the table is partitioned (false on an install whose migration 0290 kept the plain table). */
export async function isPartitioned(db: Runner, table: PartitionedTable): Promise<boolean> {
  const result = await db.raw(`SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass(?)`, [table]);
  return (result.rows as Array<{ relkind: string }>)[0]?.relkind === 'p';
}

/** The table's partitions with their bounds, oldest first (the default partition last). */
export async function listPartitions(db: Runner, table: PartitionedTable): Promise<PartitionInfo[]> {
  const result = await db.raw(
    `SELECT c.relname AS name, b.expr,
            CASE WHEN b.expr LIKE '%MINVALUE%' THEN NULL ELSE substring(b.expr FROM 'FROM \\(''([^'']+)''\\)')::timestamptz END AS from_ts,
            substring(b.expr FROM 'TO \\(''([^'']+)''\\)')::timestamptz AS to_ts
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      CROSS JOIN LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS expr) b
      WHERE i.inhparent = to_regclass(?)
      ORDER BY b.expr = 'DEFAULT', to_ts`,
    [table],
  );
  return (result.rows as Array<{ name: string; expr: string; from_ts: Date | string | null; to_ts: Date | string | null }>).map((r) => ({
    name: r.name,
    from: r.from_ts === null ? null : new Date(r.from_ts),
    to: r.to_ts === null ? null : new Date(r.to_ts),
    isDefault: r.expr === 'DEFAULT',
  }));
}

const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;

/**
 * Creates the weekly partitions of the given weeks that no partition covers yet, inside `trx`:
 * one creator at a time per table (a transaction advisory lock), the week's rows moved out of the
 * default partition, then ATTACH (which takes SHARE UPDATE EXCLUSIVE on the parent: inserts and
 * reads go on). Returns the names created.
 */
export async function createWeekPartitions(trx: Knex.Transaction, table: PartitionedTable, weeks: number[], options: { lockTimeout?: boolean } = {}): Promise<string[]> {
  if (weeks.length === 0) return [];
  // The job gives up after a while (next pass); ingest waits as for any other lock it takes.
  if (options.lockTimeout) await trx.raw(`SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
  await trx.raw('SELECT pg_advisory_xact_lock(hashtext(?))', [`partitions:${table}`]);
  const existing = await listPartitions(trx, table);
  const covered = (week: number) => existing.some((p) => !p.isDefault && (p.from === null || p.from.getTime() <= week) && p.to !== null && p.to.getTime() > week);
  const hasDefault = existing.some((p) => p.isDefault);
  const created: string[] = [];
  for (const week of [...new Set(weeks)].sort((a, b) => a - b)) {
    if (covered(week)) continue;
    const name = partitionName(table, week);
    const from = new Date(week).toISOString();
    const to = new Date(week + WEEK_MS).toISOString();
    await trx.raw(`CREATE TABLE ${quote(name)} (LIKE ${quote(table)} INCLUDING DEFAULTS INCLUDING COMPRESSION)`);
    if (hasDefault) {
      await trx.raw(
        `WITH moved AS (DELETE FROM ${quote(`${table}_default`)} WHERE ${PARTITION_COLUMN[table]} >= ? AND ${PARTITION_COLUMN[table]} < ? RETURNING *)
         INSERT INTO ${quote(name)} SELECT * FROM moved`,
        [from, to],
      );
    }
    await trx.raw(`ALTER TABLE ${quote(table)} ATTACH PARTITION ${quote(name)} FOR VALUES FROM ('${from}') TO ('${to}')`);
    created.push(name);
  }
  return created;
}

/**
 * Drops the partitions that end at or before `bound` (never the default partition), each in its own
 * short transaction with a lock timeout: DROP takes ACCESS EXCLUSIVE on the parent for a moment. A
 * partition whose lock is not granted in time is left for the next pass. Returns the names dropped.
 */
export async function dropPartitionsBefore(
  db: Knex,
  table: PartitionedTable,
  bound: Date,
  /** Runs in the drop's transaction first (the traces' ids and session totals go with their week). */
  before?: (trx: Knex.Transaction, partition: string) => Promise<void>,
): Promise<string[]> {
  const dropped: string[] = [];
  for (const p of await listPartitions(db, table)) {
    if (p.isDefault || p.to === null || p.to.getTime() > bound.getTime()) continue;
    try {
      await db.transaction(async (trx) => {
        await trx.raw(`SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
        await before?.(trx, p.name);
        await trx.raw(`DROP TABLE ${quote(p.name)}`);
      });
      dropped.push(p.name);
    } catch (err) {
      // lock_not_available or a deadlock with an ingest of the week (it holds the parent, we its partition): next pass.
      const code = (err as { code?: string }).code;
      if (code !== '55P03' && code !== '40P01') throw err;
    }
  }
  return dropped;
}

/**
 * What ingest calls before writing rows of a partitioned table: creates, in the ingest transaction,
 * the missing partitions of the batch's weeks inside the on-demand window. Remembers per database
 * the weeks it has seen covered, so a batch of known weeks costs no query; a remembered week whose
 * partition was dropped since only sends its (old) rows to the default partition.
 */
export class PartitionEnsurer {
  private readonly known = new Set<string>();
  private partitioned: Map<PartitionedTable, boolean> = new Map();

  async ensure(trx: Knex.Transaction, table: PartitionedTable, startMs: number[], now: Date): Promise<void> {
    const lo = now.getTime() - ON_DEMAND_PAST_DAYS * DAY_MS;
    const hi = now.getTime() + ON_DEMAND_FUTURE_DAYS * DAY_MS;
    const weeks = [...new Set(startMs.filter((ms) => ms >= lo && ms <= hi).map(weekStart))].filter((w) => !this.known.has(`${table}:${w}`));
    if (weeks.length === 0) return;
    let partitioned = this.partitioned.get(table);
    if (partitioned === undefined) {
      partitioned = await isPartitioned(trx, table);
      this.partitioned.set(table, partitioned);
    }
    if (partitioned) await createWeekPartitions(trx, table, weeks);
    // Remembered once the transaction has committed: until then a concurrent batch of the same
    // process must still wait for the creator (the advisory lock in createWeekPartitions) rather
    // than insert into a parent whose partition is not visible yet (its rows would be routed to
    // the default partition, which the creator's ATTACH holds, and fail: 500 under concurrent
    // first batches of a week — test/usage/ingest-close-race.test.ts). A rollback forgets them.
    trx.executionPromise.then(
      () => {
        for (const w of weeks) this.known.add(`${table}:${w}`);
      },
      () => undefined,
    );
  }
}
