/**
 * Folds the commerce metrics' queued changes into their rollups (migration 0260): the oldest CHUNK
 * each pass, one applier at a time. Readers add what is still queued, so the metrics never lag;
 * the job only keeps the queue (and so each read's share of it) short. Runs again at once while it
 * finds full chunks.
 */
import type { Job } from '../kernel/job.js';
import type { CommerceRollupRepository } from './rollups.repository.js';

const CHUNK = 2000;

export class CommerceRollupsJob implements Job {
  readonly name = 'commerce-rollups';
  readonly intervalMs = 1000;

  constructor(private readonly queue: CommerceRollupRepository) {}

  async run(): Promise<boolean> {
    return (await this.queue.applyQueued(CHUNK)) === CHUNK;
  }

  /** Applies everything queued now (tests, data generators). */
  async applyAll(): Promise<number> {
    return this.queue.drain(CHUNK);
  }
}
