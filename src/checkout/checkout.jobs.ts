/** Checkout's background jobs (run by the worker; listed in src/jobs.ts). */
import type { Job } from '../kernel/job.js';
import type { OrderService } from '../orders/order.service.js';
import type { CheckoutSessionService } from './checkout-session.service.js';
import type { SandboxCardProcessor } from './sandbox-processor.js';

export function checkoutJobs(deps: { checkout: CheckoutSessionService; sandboxProcessor: SandboxCardProcessor; orders: OrderService }): Job[] {
  return [
    // Sessions expire on read too; the sweeper makes it true for sessions nobody reads.
    { name: 'checkout-session-expiry', intervalMs: 5_000, run: async () => (await deps.checkout.expireDue()) > 0 },
    // Results of the sandbox processor's asynchronous test cards.
    { name: 'sandbox-settlement', intervalMs: 1_000, run: async () => (await deps.sandboxProcessor.settleDue(deps.orders)) > 0 },
  ];
}
