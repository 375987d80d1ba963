/**
 * The meters' rollup leaves the ingest path (issue 38: usage-event ingest ≥ 30,000 events/s, where
 * PostgreSQL's CPU per event caps the rate; figures in docs/benchmarks.md, "Ingest: the rollup
 * folded off the ingest path").
 *
 * Before, every ingest batch upserted its (meter, customer, hour) rows into usage_meter_hours:
 * 43 % of the insert statement's backend CPU (an index probe, a row lock and a new row version per
 * row, and concurrent batches of one customer waiting on each other's rows). Now ingest appends the
 * batch's partial aggregates — the same columns, grouped per (meter, customer, hour) within the
 * batch — to two queue tables without any unique key (a plain insert, no conflict check, no lock
 * on a shared row), in the transaction that inserts the events, so a delta exists exactly when its
 * events are stored. The `usage-meter-fold` job (src/usage/usage.repository.ts foldRollupDeltas)
 * moves them into the rollup: it takes delta rows FOR UPDATE SKIP LOCKED, merges them into
 * usage_meter_hours / usage_meter_hour_values and deletes them, in one transaction.
 *
 * Why a queue of deltas, not a high-water mark over the events: a sequence or a received-at mark
 * is not safe under concurrent ingests, whose values commit out of order (an event committed after
 * the fold passed its number would never be folded). A delta row is folded by the transaction that
 * deletes it: committed deltas are either still in the queue or in the rollup, never both and never
 * neither, whatever runs concurrently; a fold killed mid-way rolls back and leaves them queued.
 *
 * Reads (quantity, access check, balances, thresholds, the renewal's close) take rollup + queued
 * deltas of the same key in one statement, so they see one snapshot: exact before, during and after
 * a fold. No foreign key to meters (a check per inserted delta row; meters are archived, never
 * deleted). The queues are small and churn (inserted, then deleted within seconds): their own
 * autovacuum thresholds.
 */
import type { Knex } from 'knex';
import { isEmbedded } from '../dialect.js';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE usage_meter_hour_deltas (
    org_id text COLLATE "C" NOT NULL,
    meter_id text COLLATE "C" NOT NULL,
    customer_id text COLLATE "C" NOT NULL,
    hour timestamptz NOT NULL,
    events bigint NOT NULL,
    total numeric NOT NULL,
    maximum numeric,
    last_ts timestamptz(3),
    last_id text COLLATE "C",
    last_value numeric
  )`);
  await db.raw('CREATE INDEX usage_meter_hour_deltas_key ON usage_meter_hour_deltas (org_id, meter_id, customer_id, hour)');
  await db.raw(`CREATE TABLE usage_meter_hour_value_deltas (
    org_id text COLLATE "C" NOT NULL,
    meter_id text COLLATE "C" NOT NULL,
    customer_id text COLLATE "C" NOT NULL,
    hour timestamptz NOT NULL,
    value jsonb NOT NULL
  )`);
  await db.raw('CREATE INDEX usage_meter_hour_value_deltas_key ON usage_meter_hour_value_deltas (org_id, meter_id, customer_id, hour)');
  if (!isEmbedded(db)) {
    for (const table of ['usage_meter_hour_deltas', 'usage_meter_hour_value_deltas']) {
      await db.raw(`ALTER TABLE ${table} SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000, autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000, autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 5000)`);
    }
  }
}

export async function down(db: Knex): Promise<void> {
  // The queued deltas go into the rollup first: ingest before this migration kept the rollup whole.
  await db.raw(`INSERT INTO usage_meter_hours AS h (org_id, meter_id, customer_id, hour, events, total, maximum, last_ts, last_id, last_value)
    SELECT org_id, meter_id, customer_id, hour, sum(events), sum(total), max(maximum),
      (array_agg(last_ts ORDER BY last_ts DESC, last_id DESC) FILTER (WHERE last_ts IS NOT NULL))[1],
      (array_agg(last_id ORDER BY last_ts DESC, last_id DESC) FILTER (WHERE last_ts IS NOT NULL))[1],
      (array_agg(last_value ORDER BY last_ts DESC, last_id DESC) FILTER (WHERE last_ts IS NOT NULL))[1]
    FROM usage_meter_hour_deltas GROUP BY 1, 2, 3, 4
    ON CONFLICT (org_id, meter_id, customer_id, hour) DO UPDATE SET
      events = h.events + excluded.events,
      total = h.total + excluded.total,
      maximum = greatest(h.maximum, excluded.maximum),
      last_ts = CASE WHEN excluded.last_ts IS NOT NULL AND (h.last_ts IS NULL OR (excluded.last_ts, excluded.last_id) > (h.last_ts, h.last_id)) THEN excluded.last_ts ELSE h.last_ts END,
      last_id = CASE WHEN excluded.last_ts IS NOT NULL AND (h.last_ts IS NULL OR (excluded.last_ts, excluded.last_id) > (h.last_ts, h.last_id)) THEN excluded.last_id ELSE h.last_id END,
      last_value = CASE WHEN excluded.last_ts IS NOT NULL AND (h.last_ts IS NULL OR (excluded.last_ts, excluded.last_id) > (h.last_ts, h.last_id)) THEN excluded.last_value ELSE h.last_value END`);
  await db.raw(`INSERT INTO usage_meter_hour_values (org_id, meter_id, customer_id, hour, value)
    SELECT DISTINCT org_id, meter_id, customer_id, hour, value FROM usage_meter_hour_value_deltas ON CONFLICT DO NOTHING`);
  await db.raw('DROP TABLE usage_meter_hour_value_deltas');
  await db.raw('DROP TABLE usage_meter_hour_deltas');
}
