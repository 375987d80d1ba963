/** Deletion of telemetry past a project's retention, in bounded chunks (RetentionJob). */
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import { createWeekPartitions, dropPartitionsBefore, isPartitioned, listPartitions, WEEK_MS, weekStart } from '../db/partitions.js';
import { enqueueTraceChanges } from './groups.repository.js';
import { toContribution, type GroupSourceRow } from './traces.repository.js';

export interface RetentionRepository {
  /**
   * Deletes up to `limit` traces (with their spans) starting before `cutoff`, and queues their
   * removal from their sessions' and users' totals in the same transaction (the queue ingest
   * writes: applied after every change queued before, so a trace's removal never overtakes its
   * insertion); returns how many.
   */
  deleteExpiredTraces(projectId: string, cutoff: Date, limit: number): Promise<number>;
  deleteExpiredModelCalls(projectId: string, cutoff: Date, limit: number): Promise<number>;
  deleteExpiredMetricPoints(projectId: string, cutoff: Date, limit: number): Promise<number>;
  deleteExpiredRollups(projectId: string, cutoff: Date): Promise<number>;
  /**
   * Drops the span-row partitions that end at or before `bound` (every project's cutoff: the
   * earliest one), instead of deleting their rows; returns the partitions dropped.
   */
  dropExpiredPartitions(bound: Date): Promise<string[]>;
  /** Creates this week's partition and the next `weeks` ones where missing; returns those created. */
  createPartitionsAhead(now: Date, weeks: number): Promise<string[]>;
}

const deletedCount = (result: { rows: unknown[] }): number => result.rows.length;

export class KnexRetentionRepository implements RetentionRepository {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async deleteExpiredTraces(projectId: string, cutoff: Date, limit: number): Promise<number> {
    return this.db.transaction(async (trx) => {
      // SKIP LOCKED: a trace an ingest is extending right now is left for the next pass.
      const deleted = await trx.raw(
        `DELETE FROM telemetry_traces WHERE project_id = ? AND trace_id IN (
           SELECT trace_id FROM telemetry_traces WHERE project_id = ? AND start_time < ?
            ORDER BY start_time LIMIT ? FOR UPDATE SKIP LOCKED)
         RETURNING session_id, user_id, start_time, end_time, tokens_input, tokens_output, cost, has_error`,
        [projectId, projectId, cutoff, limit],
      );
      const rows = deleted.rows as GroupSourceRow[];
      const changes = rows.filter((r) => r.session_id !== null || r.user_id !== null).map((r) => ({ before: toContribution(r), after: null }));
      await enqueueTraceChanges(trx, projectId, changes, this.clock.now());
      return rows.length;
    });
  }

  async deleteExpiredModelCalls(projectId: string, cutoff: Date, limit: number): Promise<number> {
    // Partition by partition (a ctid names a row within one table), only those starting before the
    // cutoff: after dropExpiredPartitions that is the boundary week(s) and the default partition.
    const tables = (await isPartitioned(this.db, 'telemetry_model_calls'))
      ? (await listPartitions(this.db, 'telemetry_model_calls')).filter((p) => p.isDefault || p.from === null || p.from < cutoff).map((p) => p.name)
      : ['telemetry_model_calls'];
    let deleted = 0;
    for (const table of tables) {
      if (deleted >= limit) break;
      deleted += deletedCount(
        await this.db.raw(
          `DELETE FROM ?? WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM ?? WHERE project_id = ? AND start_time < ? LIMIT ?))
           RETURNING 1`,
          [table, table, projectId, cutoff, limit - deleted],
        ),
      );
    }
    return deleted;
  }

  async dropExpiredPartitions(bound: Date): Promise<string[]> {
    if (!(await isPartitioned(this.db, 'telemetry_model_calls'))) return [];
    return dropPartitionsBefore(this.db, 'telemetry_model_calls', bound);
  }

  async createPartitionsAhead(now: Date, weeks: number): Promise<string[]> {
    if (!(await isPartitioned(this.db, 'telemetry_model_calls'))) return [];
    const first = weekStart(now.getTime());
    const wanted = Array.from({ length: weeks + 1 }, (_, i) => first + i * WEEK_MS);
    return this.db.transaction((trx) => createWeekPartitions(trx, 'telemetry_model_calls', wanted, { lockTimeout: true }));
  }

  async deleteExpiredMetricPoints(projectId: string, cutoff: Date, limit: number): Promise<number> {
    return deletedCount(
      await this.db.raw(
        `DELETE FROM telemetry_metric_points WHERE id IN (
           SELECT id FROM telemetry_metric_points WHERE project_id = ? AND timestamp < ? LIMIT ?)
         RETURNING 1`,
        [projectId, cutoff, limit],
      ),
    );
  }

  async deleteExpiredRollups(projectId: string, cutoff: Date): Promise<number> {
    return this.db('telemetry_rollups').where('project_id', projectId).andWhere('bucket_start', '<', cutoff).delete();
  }
}
