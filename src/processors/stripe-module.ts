/** The Stripe card processor's parts, wired from its configuration (composed in src/services.ts). */
import type { Db } from '../db/knex.js';
import type { CardProcessorConfig } from '../config.js';
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Clock } from '../kernel/clock.js';
import type { Logger } from '../kernel/logger.js';
import { KnexStripeEventRepository } from './stripe-event.repository.js';
import { createStripeClient, StripeCheckout, StripeEventService, StripeRefunds } from './stripe-processor.js';
import { StripeConnectedAccounts } from './stripe-connect.js';
import { StripeSubscriptionBilling, StripeSubscriptionEvents } from './stripe-subscription-events.js';
import { ProcessorBillingFlow } from '../commerce/processor-billing.js';

export interface StripeModule {
  checkout: StripeCheckout;
  refunds: StripeRefunds;
  events: StripeEventService;
  connectedAccounts: StripeConnectedAccounts;
  /** Cancel, pause and resume of Stripe-billed subscriptions, made in Stripe first. */
  subscriptions: StripeSubscriptionBilling;
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
}): StripeModule | undefined {
  if (deps.config?.kind !== 'stripe') return undefined;
  const stripe = createStripeClient(deps.config);
  return {
    checkout: new StripeCheckout(stripe, deps.publicBaseUrl, deps.logger),
    refunds: new StripeRefunds(stripe, deps.logger),
    connectedAccounts: new StripeConnectedAccounts(stripe, deps.logger),
    events: new StripeEventService(
      stripe,
      deps.config.webhookSecret,
      new KnexStripeEventRepository(deps.db),
      deps.uow,
      deps.payments,
      deps.clock,
      deps.logger,
      new StripeSubscriptionEvents(stripe, deps.uow, new ProcessorBillingFlow(deps.uow, deps.clock), deps.logger),
    ),
    subscriptions: new StripeSubscriptionBilling(stripe, deps.logger),
  };
}
