/**
 * The commerce rollups' applier (migration 0260): folds the oldest queued changes
 * (commerce_metric_changes, appended by the commerce tables' triggers) into the quarter-hour, hour
 * and day rollups and deletes them, in one statement, under a transaction-level advisory lock (one
 * applier at a time; a pass that does not get it does nothing). Sums commute, so the order of the
 * changes does not matter; a reader sees a change either queued or folded, never both (one
 * statement, one snapshot). Changes of an organization that no longer exists are dropped.
 */
import type { Knex } from 'knex';
import { FIGURES } from './commerce-metrics.repository.js';

const APPLIER_LOCK = 'kassa:commerce-rollups';
const ORIGIN = "timestamptz '2000-01-01 00:00:00+00'";
const COLUMNS = FIGURES.join(', ');
const SUMS = FIGURES.map((f) => `sum(${f})::bigint AS ${f}`).join(', ');
const ADD = FIGURES.map((f) => `${f} = t.${f} + excluded.${f}`).join(', ');

const upsert = (table: string, bucket: string) => `INSERT INTO ${table} AS t (org_id, bucket, currency, ${COLUMNS})
    SELECT org_id, ${bucket}, currency, ${SUMS} FROM merged GROUP BY 1, 2, 3
    ON CONFLICT (org_id, bucket, currency) DO UPDATE SET ${ADD}`;

const APPLY = `WITH batch AS (
    DELETE FROM commerce_metric_changes WHERE id IN (SELECT id FROM commerce_metric_changes ORDER BY id LIMIT ?)
    RETURNING org_id, bucket, currency, ${COLUMNS}),
  merged AS (
    SELECT org_id, bucket, currency, ${SUMS} FROM batch
     WHERE EXISTS (SELECT 1 FROM organizations o WHERE o.id = batch.org_id) GROUP BY 1, 2, 3),
  quarter AS (${upsert('commerce_rollup_quarter', 'bucket')} RETURNING 1),
  hour AS (${upsert('commerce_rollup_hour', `date_bin('1 hour', bucket, ${ORIGIN})`)} RETURNING 1),
  day AS (${upsert('commerce_rollup_day', `date_bin('1 day', bucket, ${ORIGIN})`)} RETURNING 1)
  SELECT (SELECT count(*) FROM batch) AS applied, (SELECT count(*) FROM quarter) + (SELECT count(*) FROM hour) + (SELECT count(*) FROM day) AS written`;

/** The queue's applier, for the job (src/commerce-metrics/rollups.job.ts). */
export interface CommerceRollupRepository {
  /** One chunk: the number of queued changes applied, -1 when another applier holds the lock. */
  applyQueued(limit: number): Promise<number>;
  /** Everything queued now (tests, data generators). */
  drain(chunk: number): Promise<number>;
}

export class KnexCommerceRollupRepository implements CommerceRollupRepository {
  constructor(private readonly db: Knex) {}

  applyQueued(limit: number): Promise<number> {
    return this.db.transaction(async (trx) => {
      const locked = await trx.raw('SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS ok', [APPLIER_LOCK]);
      if (!(locked.rows as Array<{ ok: boolean }>)[0]?.ok) return -1;
      const { rows } = await trx.raw(APPLY, [limit]);
      return Number((rows as Array<{ applied: string | number }>)[0]?.applied ?? 0);
    });
  }

  async drain(chunk: number): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.applyQueued(chunk);
      if (n === -1) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      total += n;
      if (n < chunk) return total;
    }
  }
}
