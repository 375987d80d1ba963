/** The card processors, wired: the sandbox processor and its settlement job. */
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { Job } from '../kernel/job.js';
import { processorJobs } from './processor.jobs.js';
import { SandboxCardProcessor } from './sandbox-processor.js';
import { KnexSandboxPaymentRepository } from './sandbox.repository.js';

export interface ProcessorsModule {
  sandboxProcessor: SandboxCardProcessor;
  /** Background jobs, made afresh for each worker. */
  jobs(): Job[];
}

export function createProcessorsModule(deps: {
  db: Db;
  clock: Clock;
  /** Where the results of asynchronous test cards are applied. */
  payments: PaymentFlow;
  /** How long an asynchronous test card stays processing. */
  sandboxSettleDelayMs: number;
  /** Stripe's reconciliation from its event list, when Stripe is the card processor. */
  stripeReconciliationJob?: () => Job;
  /** Metered subscriptions' usage invoices on Stripe (stripe-usage-invoices.ts). */
  stripeUsageJobs?: () => Job[];
}): ProcessorsModule {
  const sandboxProcessor = new SandboxCardProcessor(new KnexSandboxPaymentRepository(deps.db), deps.clock, deps.sandboxSettleDelayMs);
  return { sandboxProcessor, jobs: () => processorJobs({ sandboxProcessor, payments: deps.payments, stripeReconciliationJob: deps.stripeReconciliationJob, stripeUsageJobs: deps.stripeUsageJobs }) };
}
