/**
 * Commerce metrics from rollups (issue 40): GET /v1/metrics/commerce reads per-bucket sums instead
 * of grouping an organization's orders, checkout sessions, subscriptions and customers over the
 * range (which grew with the merchant: 12 months of a 1M-order organization scanned ~1M rows).
 *
 * - commerce_rollup_quarter / _hour / _day: per (org, UTC bucket start, currency) the figures of
 *   the rows created (or ended) in that bucket. Every UTC offset a zone has used since 1972 is a
 *   whole number of quarter hours, so quarter buckets serve any zone's local days exactly; the
 *   reader takes hours for every hour that lies inside one local bucket and quarters only for the
 *   hours a local midnight cuts (half- and quarter-hour zones), days for "active at the start".
 *   Customers have no currency: their rows use currency ''.
 * - commerce_metric_changes: the queue. Statement-level AFTER triggers on the four tables append
 *   one row per (org, quarter, currency) a statement changed — each row's figures after the
 *   statement minus before it — so no writer (API, worker, Stripe events, an older release, SQL by
 *   hand) can be missed and no hot rollup row is locked on the write path. The worker's
 *   `commerce-rollups` job folds the oldest changes into the three tables and deletes them in one
 *   transaction (src/commerce-metrics/rollups.repository.ts); readers add the changes not yet
 *   folded, in the same statement, so the figures are exact at any moment (one snapshot).
 *
 * Backfill: one INSERT … SELECT … GROUP BY over each table, with the triggers created first and
 * the four tables locked in SHARE mode until the migration commits (writes wait, reads go on): a
 * write cannot fall between the backfill and the triggers. Linear in rows, without the pool's
 * timeouts (as 0210); its time on the growth bench's 1M-order data set is in docs/benchmarks.md.
 */
import type { Knex } from 'knex';
import { isEmbedded } from '../dialect.js';

interface Connection {
  query(q: { text: string; query_timeout?: number }): Promise<unknown>;
}

/** A statement without node-postgres's client-side timeout (in a transaction: on its connection). */
async function untimed(db: Knex, text: string): Promise<void> {
  if (isEmbedded(db)) return void (await db.raw(text));
  const client = db.client as { acquireConnection(): Promise<Connection>; releaseConnection(c: Connection): Promise<unknown> };
  const connection = await client.acquireConnection();
  try {
    await connection.query({ text, query_timeout: 24 * 3600 * 1000 });
  } finally {
    await client.releaseConnection(connection);
  }
}

/** The figures every rollup row and change row carries, in this order. */
export const FIGURES = [
  'successful_payments',
  'gross_volume',
  'refunded_volume',
  'failed_payments',
  'new_subscriptions',
  'new_mrr',
  'churned_subscriptions',
  'churned_mrr',
  // Subscriptions that started and ended before the bucket's end: bucketed at greatest(created, ended).
  'closed_subscriptions',
  'closed_mrr',
  'sessions_created',
  'sessions_completed',
  'new_customers',
] as const;

/** Absolute bucket starts, independent of the session's TimeZone. */
const ORIGIN = "timestamptz '2000-01-01 00:00:00+00'";
export const quarterOf = (column: string) => `date_bin('15 minutes', ${column}, ${ORIGIN})`;
export const hourOf = (column: string) => `date_bin('1 hour', ${column}, ${ORIGIN})`;
export const dayOf = (column: string) => `date_bin('1 day', ${column}, ${ORIGIN})`;

const MRR = `round(CASE billing_interval
    WHEN 'MONTH' THEN amount_cents::numeric / billing_interval_count
    WHEN 'YEAR' THEN amount_cents::numeric / (12 * billing_interval_count)
    ELSE amount_cents::numeric * 365 / (12 * billing_interval_count) END)::bigint`;

/** One figures row: the named figures, 0 for the rest. */
const figures = (values: Partial<Record<(typeof FIGURES)[number], string>>) => FIGURES.map((f) => `${values[f] ?? '0'} AS ${f}`).join(', ');

const SUCCESSFUL = "status IN ('PAID', 'REFUNDED')";

/** Each table's rows as contributions (org_id, at, currency, figures…), read from `source`. */
const CONTRIBUTIONS: Record<'orders' | 'checkout_sessions' | 'subscriptions' | 'customers', (source: string) => string> = {
  orders: (s) => `SELECT org_id, created_at AS at, currency, ${figures({
    successful_payments: `(${SUCCESSFUL})::int`,
    gross_volume: `CASE WHEN ${SUCCESSFUL} THEN amount_cents ELSE 0 END`,
    refunded_volume: `CASE WHEN ${SUCCESSFUL} THEN amount_refunded_cents ELSE 0 END`,
    failed_payments: "(status = 'FAILED')::int",
  })} FROM ${s}`,
  checkout_sessions: (s) => `SELECT org_id, created_at AS at, currency, ${figures({
    sessions_created: '1',
    sessions_completed: "(status = 'COMPLETE')::int",
  })} FROM ${s}`,
  subscriptions: (s) => `SELECT org_id, created_at AS at, currency, ${figures({ new_subscriptions: '1', new_mrr: MRR })} FROM ${s}
    UNION ALL SELECT org_id, ended_at, currency, ${figures({ churned_subscriptions: '1', churned_mrr: MRR })} FROM ${s} WHERE ended_at IS NOT NULL
    UNION ALL SELECT org_id, greatest(created_at, ended_at), currency, ${figures({ closed_subscriptions: '1', closed_mrr: MRR })} FROM ${s} WHERE ended_at IS NOT NULL`,
  customers: (s) => `SELECT org_id, created_at AS at, ''::text AS currency, ${figures({ new_customers: '1' })} FROM ${s}`,
};

const COLUMNS = FIGURES.map((f) => `${f} bigint NOT NULL DEFAULT 0`).join(',\n    ');
const SUMS = FIGURES.map((f) => `sum(${f})::bigint AS ${f}`).join(', ');
const ANY_NONZERO = FIGURES.map((f) => `sum(${f}) <> 0`).join(' OR ');

/** The queue rows of a statement: after (new_rows) minus before (old_rows), per quarter. */
export function triggerFunction(table: keyof typeof CONTRIBUTIONS): string {
  const insert = (parts: string[]) => `INSERT INTO commerce_metric_changes (org_id, bucket, currency, ${FIGURES.join(', ')})
      SELECT org_id, ${quarterOf('at')}, currency, ${SUMS} FROM (${parts.join(' UNION ALL ')}) c
       GROUP BY 1, 2, 3 HAVING ${ANY_NONZERO};`;
  const negated = `SELECT org_id, at, currency, ${FIGURES.map((f) => `-${f} AS ${f}`).join(', ')} FROM (${CONTRIBUTIONS[table]('old_rows')}) o`;
  const added = `SELECT * FROM (${CONTRIBUTIONS[table]('new_rows')}) n`;
  return `CREATE OR REPLACE FUNCTION commerce_${table}_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      ${insert([added])}
    ELSIF TG_OP = 'UPDATE' THEN
      ${insert([added, negated])}
    ELSE
      ${insert([negated])}
    END IF;
    RETURN NULL;
  END $fn$`;
}

export async function up(db: Knex): Promise<void> {
  for (const table of ['commerce_rollup_quarter', 'commerce_rollup_hour', 'commerce_rollup_day'])
    await db.raw(`CREATE TABLE ${table} (
    org_id text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    bucket timestamptz NOT NULL,
    currency text NOT NULL,
    ${COLUMNS},
    PRIMARY KEY (org_id, bucket, currency))`);
  // No foreign key: an organization's deletion cascades into its orders, whose trigger then queues
  // changes for it; the job drops changes of organizations that no longer exist.
  await db.raw(`CREATE TABLE commerce_metric_changes (
    id bigserial PRIMARY KEY,
    org_id text NOT NULL,
    bucket timestamptz NOT NULL,
    currency text NOT NULL,
    ${COLUMNS})`);
  await db.raw('CREATE INDEX commerce_metric_changes_org_bucket ON commerce_metric_changes (org_id, bucket)');

  if (!isEmbedded(db)) {
    await db.raw('SET LOCAL statement_timeout = 0');
    await db.raw('LOCK TABLE orders, checkout_sessions, subscriptions, customers IN SHARE MODE');
  }
  for (const table of Object.keys(CONTRIBUTIONS) as Array<keyof typeof CONTRIBUTIONS>) {
    await db.raw(triggerFunction(table));
    await db.raw(`CREATE TRIGGER ${table}_commerce_insert AFTER INSERT ON ${table} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION commerce_${table}_changed()`);
    await db.raw(`CREATE TRIGGER ${table}_commerce_update AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION commerce_${table}_changed()`);
    await db.raw(`CREATE TRIGGER ${table}_commerce_delete AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION commerce_${table}_changed()`);
  }
  await backfill(db);
}

/** The rollups recomputed from the four tables (what the triggers and the job keep them equal to). */
export async function backfill(db: Knex): Promise<void> {
  const all = (Object.keys(CONTRIBUTIONS) as Array<keyof typeof CONTRIBUTIONS>).map((t) => CONTRIBUTIONS[t](t)).join('\n UNION ALL ');
  await untimed(db, `INSERT INTO commerce_rollup_quarter (org_id, bucket, currency, ${FIGURES.join(', ')})
    SELECT org_id, ${quarterOf('at')}, currency, ${SUMS} FROM (${all}) c GROUP BY 1, 2, 3`);
  await untimed(db, `INSERT INTO commerce_rollup_hour (org_id, bucket, currency, ${FIGURES.join(', ')})
    SELECT org_id, ${hourOf('bucket')}, currency, ${SUMS} FROM commerce_rollup_quarter GROUP BY 1, 2, 3`);
  await untimed(db, `INSERT INTO commerce_rollup_day (org_id, bucket, currency, ${FIGURES.join(', ')})
    SELECT org_id, ${dayOf('bucket')}, currency, ${SUMS} FROM commerce_rollup_hour GROUP BY 1, 2, 3`);
}

export async function down(db: Knex): Promise<void> {
  for (const table of Object.keys(CONTRIBUTIONS)) {
    for (const op of ['insert', 'update', 'delete']) await db.raw(`DROP TRIGGER IF EXISTS ${table}_commerce_${op} ON ${table}`);
    await db.raw(`DROP FUNCTION IF EXISTS commerce_${table}_changed()`);
  }
  await db.raw('DROP TABLE IF EXISTS commerce_metric_changes, commerce_rollup_day, commerce_rollup_hour, commerce_rollup_quarter');
}
