/** Subscriptions' background job (run by the worker; listed in src/jobs.ts). */
import type { Job } from '../kernel/job.js';
import type { SubscriptionService } from './subscription.service.js';

export function subscriptionJobs(subscriptions: SubscriptionService): Job[] {
  // Renewals, dunning retries and period-end cancellations, off the injectable clock.
  return [{ name: 'subscription-renewals', intervalMs: 5_000, run: async () => (await subscriptions.processDue()) > 0 }];
}
