/**
 * Applies the queued trace changes (telemetry_group_changes, migration 0211) to the session and
 * user rollups: the oldest CHUNK batches each pass, merged per session and user, one applier at a
 * time (an advisory lock; a pass that does not get it does nothing). The session and user lists
 * lag ingest by about the interval. Runs again at once while it finds full chunks.
 */
import type { Job } from '../kernel/job.js';
import type { GroupChangeRepository } from './groups.repository.js';

const CHUNK = 500;

export class GroupChangesJob implements Job {
  readonly name = 'telemetry-group-changes';
  readonly intervalMs = 1000;

  constructor(private readonly queue: GroupChangeRepository) {}

  async run(): Promise<boolean> {
    return (await this.queue.applyQueued(CHUNK)) === CHUNK;
  }

  /** Applies everything queued now (tests, data generators): the lists are then exact. */
  async applyAll(): Promise<number> {
    return this.queue.drain(CHUNK);
  }
}
