/** The card processors' background jobs (run by the worker; listed in src/jobs.ts). */
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { Job } from '../kernel/job.js';
import type { SandboxCardProcessor } from './sandbox-processor.js';

export function processorJobs(deps: { sandboxProcessor: SandboxCardProcessor; payments: PaymentFlow; stripeReconciliationJob?: () => Job; stripeUsageJobs?: () => Job[] }): Job[] {
  return [
    // Results of the sandbox processor's asynchronous test cards.
    { name: 'sandbox-settlement', intervalMs: 1_000, run: async () => (await deps.sandboxProcessor.settleDue(deps.payments)) > 0 },
    // Stripe events whose webhook was missed, read from Stripe's event list (stripe-reconciliation.ts).
    ...(deps.stripeReconciliationJob ? [deps.stripeReconciliationJob()] : []),
    // Metered subscriptions' renewal drafts held on Stripe, billed once their grace window has passed.
    ...(deps.stripeUsageJobs ? deps.stripeUsageJobs() : []),
  ];
}
