/**
 * The job registry: every background job of this build, as each domain's module declares it. The
 * worker (src/worker.ts) runs whatever this returns; a module with jobs is listed here once.
 */
import type { Job } from './kernel/job.js';
import type { Services } from './services.js';

export function workerJobs({ services }: { services: Services }): Job[] {
  const { webhooks, checkout, processors, subscriptions, telemetry, cryptoPayments, portal, buyerEmails, accounts, commerceMetrics, usage } = services.modules;
  return [webhooks, checkout, processors, subscriptions, telemetry, cryptoPayments, portal, accounts, commerceMetrics, usage, ...(buyerEmails ? [buyerEmails] : [])].flatMap((module) => module.jobs());
}
