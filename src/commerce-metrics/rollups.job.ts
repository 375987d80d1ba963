/**
 * Folds the commerce metrics' queued changes into their rollups (migration 0260): the oldest CHUNK
 * each pass, one applier at a time. Readers add what is still queued, so the metrics never lag;
 * the job only keeps the queue (and so each read's share of it) short. Runs again at once while it
 * finds full chunks.
 */
import type { Job } from '../kernel/job.js';
import type { CommerceRollupRepository } from './rollups.repository.js';

const CHUNK = 2000;
/** Organizations whose local days are built per pass (each a GROUP BY over its quarter rows). */
const ZONES_PER_PASS = 2;

export class CommerceRollupsJob implements Job {
  readonly name = 'commerce-rollups';
  readonly intervalMs = 1000;

  constructor(private readonly queue: CommerceRollupRepository) {}

  async run(): Promise<boolean> {
    const applied = await this.queue.applyQueued(CHUNK);
    // An organization's new time zone: its local days built from the quarters (migration 0370).
    const built = await this.queue.buildZones(ZONES_PER_PASS);
    // A zone asked while 3 are kept: it replaces an idle kept zone (migration 0460), then is built.
    const admitted = await this.queue.admitWaitingZones(ZONES_PER_PASS);
    // Another zone an organization's callers asked for: its local days built the same way (migration 0440).
    const kept = await this.queue.buildKeptZones(ZONES_PER_PASS);
    return applied === CHUNK || built === ZONES_PER_PASS || admitted === ZONES_PER_PASS || kept === ZONES_PER_PASS;
  }

  /** Applies everything queued now (tests, data generators). */
  async applyAll(): Promise<number> {
    return this.queue.drain(CHUNK);
  }
}
