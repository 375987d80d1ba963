/**
 * Retention: deletes each project's data older than its `data_retention_days` — traces with all
 * their spans (by trace start time), model calls (by span start time), metric points (by
 * timestamp) and rollup cells (by bucket start). The cutoff is 00:00 UTC of the day `data_retention_days` before now, so every minute,
 * hour and day cell is either wholly kept or wholly deleted, and data is kept at least
 * `data_retention_days` and less than one day longer. Deletes in bounded chunks, so one pass
 * never holds long locks; the job runs again at once while there is more to delete.
 *
 * Span rows (telemetry_model_calls) are partitioned by week (migration 0290): a week that ends
 * before the earliest cutoff of all projects is dropped whole first; what remains before a
 * project's cutoff (the boundary week, a project with a shorter retention, the default partition)
 * is deleted row by row as before. Traces (migration 0390) are partitioned by week too, on the start
 * they were first stored with: their weeks go by DROP first, at the same bound, with their ids
 * and session-total changes (KnexRetentionRepository.dropExpiredPartitions).
 */
import type { Clock } from '../kernel/clock.js';
import type { Job } from '../kernel/job.js';
import type { TelemetryKeyService } from './keys.service.js';
import type { ProjectRepository } from './projects.repository.js';
import { startOfUtcDay } from './projects.service.js';
import type { RetentionRepository } from './retention.repository.js';

const CHUNK = 5000;
const DAY_MS = 86_400_000;

export const retentionCutoff = (now: Date, days: number): Date => startOfUtcDay(new Date(now.getTime() - days * DAY_MS));

export class RetentionJob implements Job {
  readonly name = 'telemetry-retention';
  readonly intervalMs = 60_000;

  constructor(
    private readonly projects: ProjectRepository,
    private readonly expired: RetentionRepository,
    private readonly keys: TelemetryKeyService,
    private readonly clock: Clock,
  ) {}

  async run(): Promise<boolean> {
    const now = this.clock.now();
    let more = false;
    const projects = await this.projects.listRetention();
    // Whole weeks of span rows past every project's cutoff go by DROP; the rest row by row below.
    if (projects.length > 0) {
      const earliest = retentionCutoff(now, Math.max(...projects.map((p) => p.dataRetentionDays)));
      await this.expired.dropExpiredPartitions(earliest);
    }
    for (const project of projects) {
      const cutoff = retentionCutoff(now, project.dataRetentionDays);
      const traces = await this.expired.deleteExpiredTraces(project.id, cutoff, CHUNK);
      const calls = await this.expired.deleteExpiredModelCalls(project.id, cutoff, CHUNK);
      const points = await this.expired.deleteExpiredMetricPoints(project.id, cutoff, CHUNK);
      await this.expired.deleteExpiredRollups(project.id, cutoff);
      if (traces === CHUNK || calls === CHUNK || points === CHUNK) more = true;
    }
    await this.keys.pruneRateWindows();
    return more;
  }
}

/**
 * Keeps the span-row partitions ahead of time: this week's and the next AHEAD_WEEKS ones exist
 * before the first span of the week arrives (ingest creates a missing one on demand as well).
 */
export class TelemetryPartitionJob implements Job {
  static readonly AHEAD_WEEKS = 2;
  readonly name = 'telemetry-partitions';
  readonly intervalMs = 3_600_000;

  constructor(
    private readonly partitions: Pick<RetentionRepository, 'createPartitionsAhead'>,
    private readonly clock: Clock,
  ) {}

  async run(): Promise<boolean> {
    await this.createAhead(this.clock.now());
    return false;
  }

  /** The partitions this job would create at `now`; returns those created. */
  createAhead(now: Date): Promise<string[]> {
    return this.partitions.createPartitionsAhead(now, TelemetryPartitionJob.AHEAD_WEEKS);
  }
}
