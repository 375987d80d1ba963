/** Wires repositories into domain services. Handlers receive services, never the database. */
import type { Db } from './db/knex.js';
import type { Clock } from './kernel/clock.js';
import type { SecretBox } from './kernel/secrets.js';
import { KnexOrgRepository } from './orgs/orgs.repository.js';
import { OrgService } from './orgs/orgs.service.js';
import type { Config } from './config.js';
import type { Logger } from './kernel/logger.js';
import { createLogger } from './kernel/logger.js';
import type { SigningKeyService } from './webhooks/signing-key.service.js';
import type { WebhookService } from './webhooks/webhooks.service.js';
import type { DeliveryWorker } from './webhooks/delivery.worker.js';
import { createWebhooks } from './webhooks/index.js';
import { KnexUnitOfWork } from './db/unit-of-work.js';
import type { CommerceStores, CommerceUnitOfWork } from './commerce/stores.js';
import { PaymentFlow } from './commerce/payment-flow.js';
import { enqueueWebhookEvent } from './webhooks/outbox.repository.js';
import { KnexCheckoutSessionRepository } from './checkout/checkout-session.repository.js';
import { KnexCustomerRepository } from './orders/customer.repository.js';
import { KnexOrderRepository } from './orders/order.repository.js';
import { KnexSubscriptionRepository } from './subscriptions/subscription.repository.js';
import { KnexCryptoRepository } from './crypto-payments/crypto.repository.js';
import { OrderService } from './orders/order.service.js';
import { CheckoutSessionService } from './checkout/checkout-session.service.js';
import { SandboxCardProcessor } from './processors/sandbox-processor.js';
import { KnexSandboxPaymentRepository } from './processors/sandbox.repository.js';
import { createStripeModule } from './processors/stripe-module.js';
import type { StripeEventService } from './processors/stripe-processor.js';
import { SubscriptionService } from './subscriptions/subscription.service.js';
import { EntitlementService } from './subscriptions/entitlement.service.js';
import { KnexCatalogRepository } from './catalog/catalog.repository.js';
import { CatalogService } from './catalog/catalog.service.js';
import { createAgentWalletModule, type AgentWalletModule } from './agent-wallet/index.js';
import { createTelemetryModule, type TelemetryModule } from './telemetry/index.js';
import type { Metrics } from './observability/metrics.js';
import { CryptoQuoteService } from './crypto-payments/crypto-quote.service.js';
import { ChainWatcher } from './crypto-payments/chain-watcher.js';
import { parseCryptoConfig } from './crypto-payments/crypto-config.js';

export interface Services {
  orgs: OrgService;
  signingKeys: SigningKeyService;
  webhooks: WebhookService;
  /** The webhook delivery job's worker (run by src/worker.ts). */
  webhookDelivery: DeliveryWorker;
  agentWallet: AgentWalletModule;
  catalog: CatalogService;
  checkout: CheckoutSessionService;
  orders: OrderService;
  /** The one flow that applies payment results of every rail. */
  payments: PaymentFlow;
  sandboxProcessor: SandboxCardProcessor;
  /** Stripe's webhook events, when Stripe is the card processor (config cardProcessor). */
  stripeEvents?: StripeEventService;
  telemetry: TelemetryModule;
  subscriptions: SubscriptionService;
  entitlements: EntitlementService;
  /** Crypto checkout: quotes, receiving wallets, transfers. */
  cryptoQuotes: CryptoQuoteService;
  /** The chain watcher job's worker (run by src/worker.ts). */
  chainWatcher: ChainWatcher;
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

export function createServices(deps: { db: Db; clock: Clock; secretBox: SecretBox; config?: Partial<Pick<Config, 'webhookAllowLoopback' | 'webhookLeaseSeconds' | 'webhookBatchSize' | 'webhookPollMs' | 'publicBaseUrl' | 'publicApiUrl' | 'sandboxSettleDelayMs' | 'telemetry' | 'crypto' | 'cardProcessor'>>; logger?: Logger; metrics?: Metrics }): Services {
  const webhooks = createWebhooks({
    db: deps.db,
    clock: deps.clock,
    secretBox: deps.secretBox,
    logger: deps.logger ?? createLogger({ level: 'silent' }),
    config: deps.config,
    onAttempt: deps.metrics && ((outcome) => deps.metrics!.webhookAttempt(outcome)),
  });
  const orgs = new OrgService(new KnexOrgRepository(deps.db), deps.clock);
  const catalog = new CatalogService(new KnexCatalogRepository(deps.db), deps.clock, deps.config?.publicBaseUrl ?? 'http://localhost:3000');
  const uow = createCommerceUnitOfWork(deps.db);
  const payments = new PaymentFlow(uow, deps.clock);
  const stripe = createStripeModule({ config: deps.config?.cardProcessor, db: deps.db, uow, payments, clock: deps.clock, logger: deps.logger ?? createLogger({ level: 'silent' }), publicBaseUrl: deps.config?.publicBaseUrl ?? 'http://localhost:3000' });
  const orders = new OrderService(uow, deps.clock, stripe?.refunds);
  const sandboxProcessor = new SandboxCardProcessor(new KnexSandboxPaymentRepository(deps.db), deps.clock, deps.config?.sandboxSettleDelayMs ?? 5000);
  const subscriptions = new SubscriptionService(uow, sandboxProcessor, deps.clock, deps.logger ?? createLogger({ level: 'silent' }));
  const cryptoConfig = deps.config?.crypto ?? parseCryptoConfig({});
  const cryptoRepo = new KnexCryptoRepository(deps.db);
  const cryptoQuotes = new CryptoQuoteService(uow, cryptoRepo, orgs, cryptoConfig, deps.clock);
  return {
    orgs,
    catalog,
    orders,
    payments,
    sandboxProcessor,
    subscriptions,
    entitlements: new EntitlementService(uow, catalog),
    checkout: new CheckoutSessionService(uow, orgs, catalog, payments, sandboxProcessor, deps.clock, cryptoQuotes, stripe?.checkout),
    stripeEvents: stripe?.events,
    cryptoQuotes,
    chainWatcher: new ChainWatcher(cryptoRepo, payments, cryptoConfig, deps.clock, deps.logger ?? createLogger({ level: 'silent' }), undefined, deps.metrics && ((chainId, blocks) => deps.metrics!.chainWatcherLag(chainId, blocks))),
    ...webhooks,
    agentWallet: createAgentWalletModule({ db: deps.db, secretBox: deps.secretBox, clock: deps.clock, publicApiUrl: deps.config?.publicApiUrl ?? 'http://localhost:3001' }),
    telemetry: createTelemetryModule({ db: deps.db, clock: deps.clock, orgs, config: deps.config?.telemetry }),
  };
}
