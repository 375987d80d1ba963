/**
 * The jobs that keep the usage events' storage (migration 0380), as the telemetry span rows'
 * (src/telemetry/retention.job.ts):
 * - `usage-event-partitions` (hourly): this week's partition and the next two exist before the
 *   week's first event (ingest creates a missing one on demand too);
 * - `usage-event-retention` (every minute, only with USAGE_EVENT_RETENTION_DAYS): up to one day
 *   behind the cutoff, drops the weeks that end before it (their deduplication ids deleted first)
 *   and deletes the older rows of the legacy and default partitions with their ids, in chunks.
 *   Ingest refuses events stamped before the cutoff (PERIOD_CLOSED), so an id is gone only when
 *   an event stamped like it is refused anyway: exactly once holds. The day of margin covers a
 *   batch whose clock was read just before the cutoff moved on (midnight UTC).
 */
import type { Clock } from '../kernel/clock.js';
import type { Job } from '../kernel/job.js';
import type { UsageEventStorage } from './event-storage.repository.js';
import { usageRetentionCutoff } from './usage-events.service.js';

const CHUNK = 5000;
const DAY_MS = 86_400_000;

export class UsageEventPartitionJob implements Job {
  static readonly AHEAD_WEEKS = 2;
  readonly name = 'usage-event-partitions';
  readonly intervalMs = 3_600_000;

  constructor(
    private readonly storage: Pick<UsageEventStorage, 'createPartitionsAhead'>,
    private readonly clock: Clock,
  ) {}

  async run(): Promise<boolean> {
    await this.createAhead(this.clock.now());
    return false;
  }

  createAhead(now: Date): Promise<string[]> {
    return this.storage.createPartitionsAhead(now, UsageEventPartitionJob.AHEAD_WEEKS);
  }
}

export class UsageEventRetentionJob implements Job {
  readonly name = 'usage-event-retention';
  readonly intervalMs = 60_000;

  constructor(
    private readonly storage: UsageEventStorage,
    private readonly clock: Clock,
    private readonly retentionDays: number,
  ) {}

  async run(): Promise<boolean> {
    const cutoff = usageRetentionCutoff(this.clock.now(), this.retentionDays);
    const bound = new Date(cutoff.getTime() - DAY_MS);
    await this.storage.dropPartitionsBefore(bound);
    return (await this.storage.deleteExpired(bound, CHUNK)) === CHUNK;
  }
}
