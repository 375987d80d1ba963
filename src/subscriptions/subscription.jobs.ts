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

/**
 * `stripe-plan-change-items` (issue 39, docs/plan-changes.md "Paid, not yet applied"): plan changes
 * paid in Stripe whose item update failed, leased (`FOR UPDATE SKIP LOCKED`) and applied with the
 * change's idempotency key; a failure waits longer each time. Listed with the Stripe jobs.
 */
export function pendingPlanChangeJob(subscriptions: SubscriptionService): Job {
  return { name: 'stripe-plan-change-items', intervalMs: 60_000, run: async () => (await subscriptions.applyPendingPlanChanges()) > 0 };
}
