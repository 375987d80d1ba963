/**
 * The background worker: periodic jobs (webhook delivery, expiry sweeps, renewals, chain
 * watching, retention) run in the same process by default (role `all`) or alone (`--role worker`).
 * Jobs coordinate through PostgreSQL only (row locks, SKIP LOCKED, unique constraints), never
 * through memory, so any number of workers can run against one database.
 * The jobs themselves come from src/jobs.ts, where each domain's declaration is listed.
 */
import type { Job } from './kernel/job.js';
import type { Logger } from './kernel/logger.js';

export interface Worker {
  stop(): Promise<void>;
}

export function startWorker(jobs: Job[], logger: Logger): Worker {
  let stopped = false;
  const loops = jobs.map(async (job) => {
    while (!stopped) {
      let busy = false;
      try {
        busy = await job.run();
      } catch (err) {
        logger.error({ err, job: job.name }, 'worker job failed; retrying after its interval');
      }
      if (!busy && !stopped) await sleep(job.intervalMs, () => stopped);
    }
    await job.drain?.();
  });
  return {
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** Sleeps in short slices so stop() is prompt. */
async function sleep(ms: number, cancelled: () => boolean): Promise<void> {
  const until = Date.now() + ms;
  while (!cancelled() && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(50, until - Date.now())));
  }
}
