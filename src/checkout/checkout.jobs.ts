/** Checkout's background jobs (run by the worker; listed in src/jobs.ts). */
import type { Job } from '../kernel/job.js';
import type { CheckoutSessionService } from './checkout-session.service.js';

export function checkoutJobs(deps: { checkout: CheckoutSessionService }): Job[] {
  return [
    // Sessions expire on read too; the sweeper makes it true for sessions nobody reads.
    { name: 'checkout-session-expiry', intervalMs: 5_000, run: async () => (await deps.checkout.expireDue()) > 0 },
  ];
}
