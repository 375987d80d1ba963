/**
 * The job registry: every background job of this build, as each domain declares it. The worker
 * (src/worker.ts) runs whatever this returns; a new job is declared in its domain and listed here.
 */
import type { Config } from './config.js';
import type { Job } from './kernel/job.js';
import type { Services } from './services.js';
import { checkoutJobs } from './checkout/checkout.jobs.js';
import { processorJobs } from './processors/processor.jobs.js';
import { subscriptionJobs } from './subscriptions/subscription.jobs.js';
import { webhookJobs } from './webhooks/webhook.jobs.js';

export function workerJobs({ services, config }: { services: Services; config: Pick<Config, 'webhookRetentionDays'> }): Job[] {
  return [
    ...webhookJobs({ delivery: services.webhookDelivery, webhooks: services.webhooks, retentionDays: config.webhookRetentionDays }),
    ...checkoutJobs(services),
    ...processorJobs(services),
    ...subscriptionJobs(services.subscriptions),
    ...services.telemetry.jobs,
    // ERC-20 transfers to receiving wallets: crypto orders, confirmations, reorganizations.
    services.chainWatcher.job(),
  ];
}
