/** Calls each domain's module. Handlers receive services, never the database. */
import type { Db } from './db/knex.js';
import type { Clock } from './kernel/clock.js';
import type { SecretBox } from './kernel/secrets.js';
import type { Config } from './config.js';
import type { Logger } from './kernel/logger.js';
import { createLogger } from './kernel/logger.js';
import type { Metrics } from './observability/metrics.js';
import { KnexUnitOfWork } from './db/unit-of-work.js';
import type { CommerceStores, CommerceUnitOfWork } from './commerce/stores.js';
import { PaymentFlow } from './commerce/payment-flow.js';
import { KnexCheckoutSessionRepository } from './checkout/checkout-session.repository.js';
import { KnexCustomerRepository } from './orders/customer.repository.js';
import { KnexOrderRepository } from './orders/order.repository.js';
import { KnexSubscriptionRepository } from './subscriptions/subscription.repository.js';
import { KnexCryptoRepository } from './crypto-payments/crypto.repository.js';
import { enqueueWebhookEvent } from './webhooks/outbox.repository.js';
import { signWebhook } from './webhooks/signature.js';
import { createStripeModule } from './processors/stripe-module.js';
import type { StripeEventService } from './processors/stripe-processor.js';
import { parseCryptoConfig, type CryptoConfig } from './crypto-payments/crypto-config.js';
import type { ChainConfig as AgentWalletChain } from './agent-wallet/chains.js';
import { createOrgsModule, type OrgsModule } from './orgs/index.js';
import { createCatalogModule, type CatalogModule } from './catalog/index.js';
import { createProcessorsModule, type ProcessorsModule } from './processors/index.js';
import { createSubscriptionsModule, type SubscriptionsModule } from './subscriptions/index.js';
import { createCryptoPaymentsModule, type CryptoPaymentsModule } from './crypto-payments/index.js';
import { createCheckoutModule, type CheckoutModule } from './checkout/index.js';
import { createOrdersModule, type OrdersModule } from './orders/index.js';
import { createWebhooksModule, type WebhooksModule } from './webhooks/index.js';
import { createTelemetryModule, type TelemetryModule } from './telemetry/index.js';
import { createAgentWalletModule, type AgentWalletModule } from './agent-wallet/index.js';
import { createAccountsModule, type AccountsModule } from './accounts/index.js';

/** Every domain's module: src/apps.ts mounts their handlers and pages, src/jobs.ts lists their jobs. */
export interface Modules {
  orgs: OrgsModule;
  catalog: CatalogModule;
  processors: ProcessorsModule;
  subscriptions: SubscriptionsModule;
  cryptoPayments: CryptoPaymentsModule;
  checkout: CheckoutModule;
  orders: OrdersModule;
  webhooks: WebhooksModule;
  telemetry: TelemetryModule;
  agentWallet: AgentWalletModule;
  /** People: users, memberships, console sessions, invites, the audit log. */
  accounts: AccountsModule;
}

/** The domain services by name (what scripts and tests call), and the modules they come from. */
export interface Services {
  orgs: OrgsModule['orgs'];
  signingKeys: WebhooksModule['signingKeys'];
  webhooks: WebhooksModule['webhooks'];
  /** The webhook delivery job's worker. */
  webhookDelivery: WebhooksModule['webhookDelivery'];
  agentWallet: AgentWalletModule;
  catalog: CatalogModule['catalog'];
  checkout: CheckoutModule['checkout'];
  orders: OrdersModule['orders'];
  /** The one flow that applies payment results of every rail. */
  payments: PaymentFlow;
  sandboxProcessor: ProcessorsModule['sandboxProcessor'];
  /** Stripe's webhook events, when Stripe is the card processor (config cardProcessor). */
  stripeEvents?: StripeEventService;
  telemetry: TelemetryModule;
  subscriptions: SubscriptionsModule['subscriptions'];
  entitlements: SubscriptionsModule['entitlements'];
  cryptoQuotes: CryptoPaymentsModule['cryptoQuotes'];
  /** The chain watcher job's worker. */
  chainWatcher: CryptoPaymentsModule['chainWatcher'];
  modules: Modules;
}

export type ServicesConfig = Partial<
  Pick<
    Config,
    | 'webhookAllowLoopback'
    | 'webhookLeaseSeconds'
    | 'webhookBatchSize'
    | 'webhookPollMs'
    | 'webhookRetentionDays'
    | 'cardProcessor'
    | 'publicBaseUrl'
    | 'publicApiUrl'
    | 'sandboxSettleDelayMs'
    | 'telemetry'
    | 'crypto'
  >
>;

/** The chains with a USDC token, as the agent wallet's default policy and history name them. */
function agentWalletChains(crypto: CryptoConfig): AgentWalletChain[] | undefined {
  const chains = crypto.chains.flatMap((chain) => {
    const usdc = chain.tokens.find((t) => t.symbol === 'USDC');
    return usdc ? [{ chainId: chain.chainId, name: chain.name, usdc: usdc.address }] : [];
  });
  // With the crypto rail disabled (CRYPTO_CHAINS=[]) agent wallets keep the built-in chains.
  return chains.length > 0 ? chains : undefined;
}

/** The commerce stores of every domain, bound to the database or to one transaction. */
export function createCommerceUnitOfWork(db: Db): CommerceUnitOfWork {
  return new KnexUnitOfWork<CommerceStores>(db, (executor, transaction) => ({
    sessions: new KnexCheckoutSessionRepository(executor),
    orders: new KnexOrderRepository(executor),
    customers: new KnexCustomerRepository(executor),
    subscriptions: new KnexSubscriptionRepository(executor),
    quotes: new KnexCryptoRepository(executor),
    emit: (event, now) => {
      if (!transaction) throw new Error('webhook events are emitted inside the transaction of their state change');
      return enqueueWebhookEvent(transaction, event, now);
    },
  }));
}

export function createServices(deps: { db: Db; clock: Clock; secretBox: SecretBox; config?: ServicesConfig; logger?: Logger; metrics?: Metrics }): Services {
  const { db, clock, secretBox, metrics } = deps;
  const config = deps.config ?? {};
  const logger = deps.logger ?? createLogger({ level: 'silent' });
  const uow = createCommerceUnitOfWork(db);
  const payments = new PaymentFlow(uow, clock);
  // Stripe's module asks the orgs module whether an organization is this deployment's (orphan
  // sessions) only when an event arrives, after both exist; orgs checks connected accounts with Stripe.
  const isOwnOrganization = async (orgId: string) => (await orgsModule.orgs.displayNameOf(orgId)) !== undefined;
  const stripe = createStripeModule({
    config: config.cardProcessor,
    db,
    uow,
    payments,
    clock,
    logger,
    publicBaseUrl: config.publicBaseUrl ?? 'http://localhost:3000',
    isOwnOrganization,
  });

  const orgsModule = createOrgsModule({ db, clock, connectedAccounts: stripe?.connectedAccounts });
  const { orgs } = orgsModule;
  const catalogModule = createCatalogModule({ db, clock, orgs, publicBaseUrl: config.publicBaseUrl ?? 'http://localhost:3000' });
  const processorsModule = createProcessorsModule({ db, clock, payments, sandboxSettleDelayMs: config.sandboxSettleDelayMs ?? 5000, stripeReconciliationJob: stripe?.reconciliationJob });
  const subscriptionsModule = createSubscriptionsModule({ uow, cardProcessor: processorsModule.sandboxProcessor, db, merchants: orgsModule.orgs, clock, logger, subscriptionBilling: stripe?.subscriptions });
  const cryptoModule = createCryptoPaymentsModule({
    db,
    uow,
    orgs,
    payments,
    config: config.crypto ?? parseCryptoConfig({}),
    clock,
    logger,
    secretBox,
    prices: {
      productOfPrice: async (orgId, priceId) => {
        const found = await catalogModule.catalog.findPrice(orgId, priceId);
        return found && { productId: found.product.id, name: found.product.name };
      },
    },
    paywallUrlPrefix: `${(config.publicBaseUrl ?? 'http://localhost:3000').replace(/\/+$/, '')}/x402/prices/`,
    paywallCatalog: { findPrice: (orgId, priceId) => catalogModule.catalog.findPrice(orgId, priceId) },
    // The webhooks module is built below; receipts are signed only once requests arrive.
    signReceipt: async (id, timestampSeconds, body) => ({ ...signWebhook(await modules.webhooks.signingKeys.signers(), id, timestampSeconds, body) }),
    observeLag: metrics && ((chainId, blocks) => metrics.chainWatcherLag(chainId, blocks)),
  });
  const modules: Modules = {
    orgs: orgsModule,
    catalog: catalogModule,
    processors: processorsModule,
    subscriptions: subscriptionsModule,
    cryptoPayments: cryptoModule,
    checkout: createCheckoutModule({
      uow,
      orgs,
      catalog: catalogModule.catalog,
      payments,
      cardProcessor: processorsModule.sandboxProcessor,
      cryptoQuotes: cryptoModule.cryptoQuotes,
      subscriptions: subscriptionsModule.subscriptions,
      clock,
      logger,
      publicBaseUrl: config.publicBaseUrl ?? 'http://localhost:3000',
      stripeCheckout: stripe?.checkout,
    }),
    orders: createOrdersModule({ uow, clock, cardRefunds: stripe?.refunds }),
    webhooks: createWebhooksModule({ db, clock, secretBox, logger, orgs, config, onAttempt: metrics && ((outcome) => metrics.webhookAttempt(outcome)) }),
    telemetry: createTelemetryModule({ db, clock, orgs, config: config.telemetry }),
    agentWallet: createAgentWalletModule({
      db,
      secretBox,
      clock,
      publicApiUrl: config.publicApiUrl ?? 'http://localhost:3001',
      // The default policy allows USDC on each configured chain (CRYPTO_CHAINS), so agents can pay x402 resources there.
      chains: agentWalletChains(config.crypto ?? parseCryptoConfig({})),
    }),
    accounts: createAccountsModule({ db, clock, orgs, publicBaseUrl: config.publicBaseUrl ?? 'http://localhost:3000' }),
  };
  return {
    orgs,
    catalog: modules.catalog.catalog,
    checkout: modules.checkout.checkout,
    orders: modules.orders.orders,
    payments,
    sandboxProcessor: modules.processors.sandboxProcessor,
    subscriptions: modules.subscriptions.subscriptions,
    entitlements: modules.subscriptions.entitlements,
    cryptoQuotes: modules.cryptoPayments.cryptoQuotes,
    chainWatcher: modules.cryptoPayments.chainWatcher,
    signingKeys: modules.webhooks.signingKeys,
    webhooks: modules.webhooks.webhooks,
    webhookDelivery: modules.webhooks.webhookDelivery,
    telemetry: modules.telemetry,
    agentWallet: modules.agentWallet,
    stripeEvents: stripe?.events,
    modules,
  };
}
