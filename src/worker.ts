/**
 * The background worker: periodic jobs (webhook delivery, expiry sweeps, renewals, chain
 * watching, retention) run in the same process by default (role `all`) or alone (`--role worker`).
 * Jobs coordinate through PostgreSQL only (row locks, SKIP LOCKED, unique constraints), never
 * through memory, so any number of workers can run against one database.
 */
import type { Logger } from './kernel/logger.js';

export interface Job {
  name: string;
  /** Pause between two runs when the previous run found nothing to do. */
  intervalMs: number;
  /** One pass. Returns true when it did work, so the next pass starts at once. */
  run(): Promise<boolean>;
  /** Work a pass left running in the background, awaited when the worker stops. */
  drain?(): Promise<void>;
}

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

/** The jobs of this build; each domain adds its own. */
export function workerJobs(deps: import("./apps.js").AppDeps): Job[] {
  return [
    deps.services.webhookDelivery.job(),
    // Sessions expire on read too; the sweeper makes it true for sessions nobody reads.
    { name: 'checkout-session-expiry', intervalMs: 5_000, run: async () => (await deps.services.checkout.expireDue()) > 0 },
    // Renewals, dunning retries and period-end cancellations, off the injectable clock.
    { name: 'subscription-renewals', intervalMs: 5_000, run: async () => (await deps.services.subscriptions.processDue()) > 0 },
    // Results of the sandbox processor's asynchronous test cards.
    { name: 'sandbox-settlement', intervalMs: 1_000, run: async () => (await deps.services.sandboxProcessor.settleDue(deps.services.orders)) > 0 },
    ...deps.services.telemetry.jobs,
    // Settled webhook events past WEBHOOK_RETENTION_DAYS, with their deliveries and attempts.
    { name: 'webhook-retention', intervalMs: 60_000, run: () => deps.services.webhooks.pruneSettledEvents(deps.config.webhookRetentionDays) },
    // ERC-20 transfers to receiving wallets: crypto orders, confirmations, reorganizations.
    deps.services.chainWatcher.job(),
  ];
}
