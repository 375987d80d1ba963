/** The Stripe card processor's parts, wired from its configuration (composed in src/services.ts). */
import type { Db } from '../db/knex.js';
import type { CardProcessorConfig } from '../config.js';
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { CheckoutSession } from '../commerce/model.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Clock } from '../kernel/clock.js';
import type { Logger } from '../kernel/logger.js';
import { KnexStripeEventRepository } from './stripe-event.repository.js';
import { createStripeClient, STRIPE_EVENT_TYPES, StripeCheckout, StripeEventService, StripeRefunds, type StripeTaxRates } from './stripe-processor.js';
import { StripeConnectedAccounts } from './stripe-connect.js';
import { StripeEventReconciler } from './stripe-reconciliation.js';
import { StripeSubscriptionBilling, StripeSubscriptionEvents } from './stripe-subscription-events.js';
import { ProcessorBillingFlow } from '../commerce/processor-billing.js';
import { RefundFlow } from '../commerce/refund-flow.js';
import type { ConnectedAccountState } from './stripe-connect.js';
import type { Job } from '../kernel/job.js';
import type { MeteredBilling } from '../commerce/metered-billing.js';
import { ProcessorUsageFlow } from '../commerce/processor-usage.js';
import { KnexUsageInvoiceRepository } from './usage-invoice.repository.js';
import { StripeUsageInvoicing } from './stripe-usage-invoices.js';
import { KnexRedemptionSweepRepository } from './redemption-sweep.repository.js';
import { redemptionSweepDelayMs, StripeRedemptionSweep } from './stripe-redemption-sweep.js';

export interface StripeModule {
  checkout: StripeCheckout;
  refunds: StripeRefunds;
  events: StripeEventService;
  /** Connect's events (`account.updated`), verified with the Connect endpoint's secret; absent without STRIPE_CONNECT_WEBHOOK_SECRET. */
  connectEvents?: StripeEventService;
  connectedAccounts: StripeConnectedAccounts;
  /** Cancel, pause and resume of Stripe-billed subscriptions, made in Stripe first. */
  subscriptions: StripeSubscriptionBilling;
  /** Metered subscriptions' usage on their Stripe invoices; absent without metering. */
  usage?: ProcessorUsageFlow;
  /** The reconciliation job, made afresh for each worker (its own name on the cursor's lease). */
  reconciliationJob(): Job;
  /** Held renewal drafts whose grace window has passed: itemized and finalized (with metering). */
  usageJobs(): Job[];
  /** Claims of checkout sessions never stored (a crash between the claim and the store), given back after asking Stripe. */
  redemptionSweep(): StripeRedemptionSweep;
}

/** Undefined unless Stripe is the configured card processor. */
export function createStripeModule(deps: {
  config: CardProcessorConfig | undefined;
  db: Db;
  uow: CommerceUnitOfWork;
  payments: PaymentFlow;
  clock: Clock;
  logger: Logger;
  publicBaseUrl: string;
  /** Whether this deployment has the organization: orphan Checkout Sessions of another deployment are left alone. */
  isOwnOrganization: (orgId: string) => Promise<boolean>;
  /** Records what Stripe says of a connected account (Connect `account.updated`); false when no organization is bound to it. */
  recordConnectedAccount?: (state: ConnectedAccountState) => Promise<boolean>;
  /** Metered components and their quantities (issue 38): usage reaches Stripe as invoice items. */
  metered?: MeteredBilling;
  /** Kassa's tax rates, made into Stripe tax rates on first use (issue 39). */
  taxRates?: StripeTaxRates;
  /** Gives back the coupon redemption of a session whose Stripe Checkout Session expired unpaid (issue 39). */
  releaseDiscount?: (session: CheckoutSession) => Promise<void>;
  /** Applies a plan change paid in Stripe whose item update is still to be made (issue 39): on its invoice's `invoice.paid`. */
  applyPendingPlanChange?: (processorSubscriptionId: string) => Promise<unknown>;
}): StripeModule | undefined {
  if (deps.config?.kind !== 'stripe') return undefined;
  const { reconcileIntervalMs, webhookSecret, timeoutMs } = deps.config;
  const stripe = createStripeClient(deps.config);
  const repo = new KnexStripeEventRepository(deps.db);
  const usage = deps.metered && new ProcessorUsageFlow(deps.uow, new KnexUsageInvoiceRepository(deps.db), new StripeUsageInvoicing(stripe, deps.logger, deps.clock), deps.metered, deps.clock, deps.logger);
  const subscriptionEvents = new StripeSubscriptionEvents(stripe, deps.uow, new ProcessorBillingFlow(deps.uow, deps.clock), deps.logger, usage, deps.applyPendingPlanChange);
  const connectedAccounts = new StripeConnectedAccounts(stripe, deps.logger);
  const accountUpdated = async (accountId: string) => {
    const state = await connectedAccounts.read(accountId);
    return state && deps.recordConnectedAccount && (await deps.recordConnectedAccount(state)) ? ('applied' as const) : ('ignored' as const);
  };
  const eventService = (secret: string) => new StripeEventService(
    stripe,
    secret,
    repo,
    deps.uow,
    deps.payments,
    deps.clock,
    deps.logger,
    subscriptionEvents,
    deps.isOwnOrganization,
    new RefundFlow(deps.uow, deps.clock),
    accountUpdated,
    deps.releaseDiscount,
    deps.taxRates,
  );
  const events = eventService(webhookSecret);
  return {
    checkout: new StripeCheckout(stripe, deps.publicBaseUrl, deps.clock, deps.logger, deps.taxRates),
    refunds: new StripeRefunds(stripe, deps.logger),
    connectedAccounts,
    subscriptions: new StripeSubscriptionBilling(stripe, deps.logger),
    events,
    // Stripe signs each endpoint's deliveries with its own secret: Connect's endpoint posts to its own path.
    ...(deps.config.connectWebhookSecret && { connectEvents: eventService(deps.config.connectWebhookSecret) }),
    ...(usage && { usage }),
    usageJobs: () =>
      usage
        ? [
            { name: 'stripe-usage-invoices', intervalMs: 60_000, run: async () => (await usage.closeDue()) > 0 },
            // MISSED renewals whose usage make-up could not be opened, retried with backoff (ProcessorUsageFlow.retryMakeups).
            { name: 'stripe-usage-makeups', intervalMs: 60_000, run: async () => (await usage.retryMakeups()) > 0 },
          ]
        : [],
    redemptionSweep: () => new StripeRedemptionSweep(stripe, new KnexRedemptionSweepRepository(deps.db), repo, deps.clock, deps.logger, { delayMs: redemptionSweepDelayMs(timeoutMs) }),
    reconciliationJob: () => {
      const reconciler = new StripeEventReconciler(stripe, events, repo, deps.clock, deps.logger, { types: STRIPE_EVENT_TYPES });
      return { name: 'stripe-reconciliation', intervalMs: reconcileIntervalMs, run: () => reconciler.run() };
    },
  };
}
