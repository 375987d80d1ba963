/** Subscriptions' background job (run by the worker; listed in src/jobs.ts). */
import type { Job } from '../kernel/job.js';
import type { SubscriptionService } from './subscription.service.js';

/** `renewalConcurrency`: subscriptions one pass closes at once (1 on PGlite's one connection). */
export function subscriptionJobs(subscriptions: SubscriptionService, renewalConcurrency = 1): Job[] {
  // Renewals, dunning retries and period-end cancellations, off the injectable clock.
  return [
    { name: 'subscription-renewals', intervalMs: 5_000, run: async () => (await subscriptions.processDue(100, renewalConcurrency)) > 0 },
    // `subscription.trial_will_end`: once per trial, whichever worker claims it (issue 39).
    { name: 'subscription-trial-reminders', intervalMs: 60_000, run: async () => (await subscriptions.remindTrialsEnding()) > 0 },
  ];
}
