/** The webhook domain's background jobs (run by the worker; listed in src/jobs.ts). */
import type { Job } from '../kernel/job.js';
import type { DeliveryWorker } from './delivery.worker.js';
import type { WebhookService } from './webhooks.service.js';

export function webhookJobs(deps: { delivery: DeliveryWorker; webhooks: WebhookService; retentionDays: number }): Job[] {
  return [
    deps.delivery.job(),
    // Settled webhook events past WEBHOOK_RETENTION_DAYS, with their deliveries and attempts.
    { name: 'webhook-retention', intervalMs: 60_000, run: () => deps.webhooks.pruneSettledEvents(deps.retentionDays) },
  ];
}
