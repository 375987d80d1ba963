/** Deletion of telemetry past a project's retention, in bounded chunks (RetentionJob). */
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
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
    return deletedCount(
      await this.db.raw(
        `DELETE FROM telemetry_model_calls WHERE ctid IN (
           SELECT ctid FROM telemetry_model_calls WHERE project_id = ? AND start_time < ? LIMIT ?)
         RETURNING 1`,
        [projectId, cutoff, limit],
      ),
    );
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
