/** The checkout module, wired: checkout sessions, their handlers, the expiry job and the hosted checkout pages. */
import type { Router } from 'express';
import type { CatalogService } from '../catalog/catalog.service.js';
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import { registerCryptoPages } from '../crypto-payments/crypto-pages.js';
import type { CryptoQuoteService } from '../crypto-payments/crypto-quote.service.js';
import type { Clock } from '../kernel/clock.js';
import type { Job } from '../kernel/job.js';
import type { Logger } from '../kernel/logger.js';
import type { OrgService } from '../orgs/orgs.service.js';
import type { TaxService } from '../tax/tax.service.js';
import type { CardProcessor, HostedCardCheckout } from '../processors/card-processor.js';
import type { DiscountService } from '../discounts/discount.service.js';
import { CheckoutSessionService } from './checkout-session.service.js';
import { checkoutJobs } from './checkout.jobs.js';
import { createCheckoutHandlers } from './checkout.handlers.js';
import { registerHostedPages, type CheckoutPortalEntry, type SubscriptionOfSession } from './hosted-pages.js';

export interface CheckoutModule {
  checkout: CheckoutSessionService;
  handlers: { merchant: ReturnType<typeof createCheckoutHandlers> };
  /** Background jobs, made afresh for each worker. */
  jobs(): Job[];
  /** The hosted checkout pages, `/checkout/<token>`, of card and crypto sessions (merchant listener). */
  pages(router: Router): void;
}

export function createCheckoutModule(deps: {
  uow: CommerceUnitOfWork;
  orgs: OrgService;
  catalog: CatalogService;
  payments: PaymentFlow;
  cardProcessor: CardProcessor;
  cryptoQuotes: CryptoQuoteService;
  /** The success page links a subscription's manage page. */
  subscriptions: SubscriptionOfSession;
  clock: Clock;
  logger: Logger;
  /** The merchant listener's public URL: session URLs point there. */
  publicBaseUrl: string;
  /** A card processor with its own checkout page (Stripe); absent → the sandbox takes cards on Kassa's page. */
  stripeCheckout?: HostedCardCheckout;
  /** The paid page's way into the customer portal. */
  portal?: CheckoutPortalEntry;
  /** Coupons and promotion codes (issue 39); absent → checkouts take no discount. */
  discounts?: DiscountService;
  /** Tax rates (issue 39): the session's tax for the buyer's location. */
  tax?: TaxService;
}): CheckoutModule {
  const checkout = new CheckoutSessionService(deps.uow, deps.orgs, deps.catalog, deps.payments, deps.cardProcessor, deps.clock, deps.cryptoQuotes, deps.stripeCheckout, deps.discounts, deps.tax);
  return {
    checkout,
    handlers: { merchant: createCheckoutHandlers(checkout, deps.publicBaseUrl) },
    jobs: () => checkoutJobs({ checkout }),
    pages: (router) => {
      // Crypto sessions' pages first; they pass card sessions on to the card pages.
      registerCryptoPages(router, { sessions: checkout, crypto: deps.cryptoQuotes, clock: deps.clock, merchants: deps.orgs }, deps.logger);
      registerHostedPages(router, checkout, deps.subscriptions, deps.orgs, deps.logger, deps.portal, deps.clock);
    },
  };
}
