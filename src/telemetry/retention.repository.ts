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
      // The trace's id goes with it (the same statement): a later span of the same trace id starts a new trace.
      const deleted = await trx.raw(
        `WITH gone AS (
           DELETE FROM telemetry_traces WHERE project_id = ? AND (trace_id, partition_start) IN (
             SELECT trace_id, partition_start FROM telemetry_traces WHERE project_id = ? AND start_time < ?
              ORDER BY start_time LIMIT ? FOR UPDATE SKIP LOCKED)
           RETURNING trace_id, session_id, user_id, start_time, end_time, tokens_input, tokens_output, cost, has_error),
         ids AS (DELETE FROM telemetry_trace_ids WHERE project_id = ? AND trace_id IN (SELECT trace_id FROM gone))
         SELECT * FROM gone`,
        [projectId, projectId, cutoff, limit, projectId],
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
    const dropped: string[] = [];
    // Traces first: a week of span rows never outlives its traces' week (spans start at or after
    // their trace's start; the reverse — span rows of a later week whose trace was dropped — is
    // the documented one, as with the row-by-row deletes).
    if (await isPartitioned(this.db, 'telemetry_traces')) {
      dropped.push(
        ...(await dropPartitionsBefore(this.db, 'telemetry_traces', bound, async (trx, partition) => {
          // Writers of the week wait (SHARE blocks row changes): what is read here is what goes.
          await trx.raw(`LOCK TABLE ?? IN SHARE MODE`, [partition]);
          // Its traces leave their sessions' and users' totals (queued, as the row-by-row delete does) …
          const grouped = await trx.raw(
            `SELECT project_id, session_id, user_id, start_time, end_time, tokens_input, tokens_output, cost, has_error
               FROM ?? WHERE session_id IS NOT NULL OR user_id IS NOT NULL`,
            [partition],
          );
          const byProject = new Map<string, GroupSourceRow[]>();
          for (const r of grouped.rows as Array<GroupSourceRow & { project_id: string }>) {
            const list = byProject.get(r.project_id);
            if (list) list.push(r);
            else byProject.set(r.project_id, [r]);
          }
          for (const [projectId, rows] of byProject) {
            await enqueueTraceChanges(trx, projectId, rows.map((r) => ({ before: toContribution(r), after: null })), this.clock.now());
          }
          // … and their ids go (the primary key probed for each of the week's traces).
          await trx.raw(`DELETE FROM telemetry_trace_ids i USING ?? p WHERE i.project_id = p.project_id AND i.trace_id = p.trace_id`, [partition]);
        })),
      );
    }
    if (await isPartitioned(this.db, 'telemetry_model_calls')) dropped.push(...(await dropPartitionsBefore(this.db, 'telemetry_model_calls', bound)));
    return dropped;
  }

  async createPartitionsAhead(now: Date, weeks: number): Promise<string[]> {
    const first = weekStart(now.getTime());
    const wanted = Array.from({ length: weeks + 1 }, (_, i) => first + i * WEEK_MS);
    const created: string[] = [];
    for (const table of ['telemetry_model_calls', 'telemetry_traces'] as const) {
      if (!(await isPartitioned(this.db, table))) continue;
      created.push(...(await this.db.transaction((trx) => createWeekPartitions(trx, table, wanted, { lockTimeout: true }))));
    }
    return created;
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
