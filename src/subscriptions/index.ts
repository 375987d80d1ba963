/** The subscriptions module, wired: renewals, entitlements, their handlers, the renewal job and the manage pages. */
import type { Router } from 'express';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Clock } from '../kernel/clock.js';
import type { MeteredBilling } from '../commerce/metered-billing.js';
import type { ProcessorUsageFlow } from '../commerce/processor-usage.js';
import type { PlanCatalog } from '../commerce/plan-change.js';
import type { Job } from '../kernel/job.js';
import type { Logger } from '../kernel/logger.js';
import type { MerchantNames } from '../pages/page.js';
import type { CardProcessor, ProcessorSubscriptionBilling } from '../processors/card-processor.js';
import { createSubscriptionAdminHandlers } from './admin.handlers.js';
import { createSubscriptionConsoleHandlers } from './console.handlers.js';
import type { CustomerBalances } from './usage.presenter.js';
import { EntitlementService } from './entitlement.service.js';
import { KnexEntitlementRepository } from './entitlement.repository.js';
import type { Db } from '../db/knex.js';
import { isEmbedded } from '../db/dialect.js';
import { registerManagePages } from './manage-pages.js';
import { subscriptionJobs } from './subscription.jobs.js';
import { SubscriptionService } from './subscription.service.js';
import { createSubscriptionHandlers } from './subscriptions.handlers.js';
import { createCustomerBalanceHandlers } from './customer-balance.handlers.js';
import { CustomerBalanceService } from './customer-balance.service.js';

/** Renewals one worker's pass runs at once on PostgreSQL (docs/benchmarks.md: closing 10,000 metered periods). */
const RENEWAL_CONCURRENCY_ON_POSTGRES = 4;

export interface SubscriptionsModule {
  subscriptions: SubscriptionService;
  entitlements: EntitlementService;
  handlers: {
    merchant: ReturnType<typeof createSubscriptionHandlers> & ReturnType<typeof createCustomerBalanceHandlers>;
    admin: ReturnType<typeof createSubscriptionAdminHandlers>;
    console: ReturnType<typeof createSubscriptionConsoleHandlers>;
  };
  /** Background jobs, made afresh for each worker. */
  jobs(): Job[];
  /** The customer's subscription management pages (merchant listener). */
  pages(router: Router): void;
}

export function createSubscriptionsModule(deps: {
  uow: CommerceUnitOfWork;
  /** Charges renewals on the customer's saved payment method. */
  cardProcessor: CardProcessor;
  db: Db;
  /** Whose subscription the manage page shows (the organization's display name). */
  merchants: MerchantNames;
  clock: Clock;
  logger: Logger;
  /** Stripe Billing, when Stripe is the card processor. */
  subscriptionBilling?: ProcessorSubscriptionBilling;
  /** The customer portal's sign-in page of an organization, linked from the manage page (called per request). */
  portalUrlOf?: (orgId: string) => string;
  /** Metered components and usage quantities, for renewals that bill usage in arrears. */
  metered?: MeteredBilling;
  /** Usage of Stripe-billed metered subscriptions on Stripe invoices (a cancel-now's partial period). */
  processorUsage?: ProcessorUsageFlow;
  /** The catalog's prices, for plan changes (issue 39). */
  plans?: PlanCatalog;
  /** A customer's meter balances (included units, credits), shown with their usage (console and admin). */
  balances?: CustomerBalances;
}): SubscriptionsModule {
  const subscriptions = new SubscriptionService(deps.uow, deps.cardProcessor, deps.clock, deps.logger, deps.subscriptionBilling, deps.metered, deps.processorUsage, deps.plans);
  const entitlements = new EntitlementService(new KnexEntitlementRepository(deps.db), deps.metered && { quantities: deps.metered.quantities, clock: deps.clock });
  return {
    subscriptions,
    entitlements,
    handlers: {
      merchant: { ...createSubscriptionHandlers(subscriptions, entitlements), ...createCustomerBalanceHandlers(new CustomerBalanceService(deps.uow, deps.clock)) },
      admin: createSubscriptionAdminHandlers(subscriptions, deps.merchants, deps.balances), console: createSubscriptionConsoleHandlers(subscriptions, deps.balances) },
    jobs: () => subscriptionJobs(subscriptions, isEmbedded(deps.db) ? 1 : RENEWAL_CONCURRENCY_ON_POSTGRES),
    pages: (router) => registerManagePages(router, subscriptions, deps.merchants, deps.logger, deps.portalUrlOf),
  };
}
