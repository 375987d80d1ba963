/**
 * Retention: deletes each project's data older than its `data_retention_days` — traces with all
 * their spans (by trace start time), model calls (by span start time), metric points (by
 * timestamp) and rollup cells (by bucket start). The cutoff is 00:00 UTC of the day `data_retention_days` before now, so every minute,
 * hour and day cell is either wholly kept or wholly deleted, and data is kept at least
 * `data_retention_days` and less than one day longer. Deletes in bounded chunks, so one pass
 * never holds long locks; the job runs again at once while there is more to delete.
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
    for (const project of await this.projects.listRetention()) {
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
