/** Wires repositories into domain services. Handlers receive services, never the database. */
import type { Db } from './db/knex.js';
import type { Clock } from './kernel/clock.js';
import type { SecretBox } from './kernel/secrets.js';
import { KnexOrgRepository } from './orgs/orgs.repository.js';
import { OrgService } from './orgs/orgs.service.js';
import { KnexSigningKeyRepository } from './webhooks/signing-key.repository.js';
import { SigningKeyService } from './webhooks/signing-key.service.js';
import type { Config } from './config.js';
import type { Logger } from './kernel/logger.js';
import { createLogger } from './kernel/logger.js';
import { KnexWebhookRepository } from './webhooks/webhooks.repository.js';
import { WebhookService } from './webhooks/webhooks.service.js';
import { DeliveryWorker } from './webhooks/delivery.worker.js';
import { UrlGuard } from './webhooks/url-guard.js';
import { KnexCommerceUnitOfWork } from './orders/stores.js';
import { OrderService } from './orders/order.service.js';
import { CheckoutSessionService } from './checkout/checkout-session.service.js';
import { SandboxCardProcessor } from './checkout/sandbox-processor.js';
import { KnexSandboxPaymentRepository } from './checkout/sandbox.repository.js';
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
  sandboxProcessor: SandboxCardProcessor;
  telemetry: TelemetryModule;
  subscriptions: SubscriptionService;
  entitlements: EntitlementService;
  /** Crypto checkout: quotes, receiving wallets, transfers. */
  cryptoQuotes: CryptoQuoteService;
  /** The chain watcher job's worker (run by src/worker.ts). */
  chainWatcher: ChainWatcher;
}

export function createServices(deps: { db: Db; clock: Clock; secretBox: SecretBox; config?: Partial<Pick<Config, 'webhookAllowLoopback' | 'webhookLeaseSeconds' | 'webhookBatchSize' | 'webhookPollMs' | 'publicBaseUrl' | 'publicApiUrl' | 'sandboxSettleDelayMs' | 'telemetry' | 'crypto'>>; logger?: Logger; metrics?: Metrics }): Services {
  const signingKeys = new SigningKeyService(new KnexSigningKeyRepository(deps.db), deps.secretBox, deps.clock);
  const webhookRepo = new KnexWebhookRepository(deps.db);
  const urlGuard = new UrlGuard({ allowLoopback: deps.config?.webhookAllowLoopback ?? false });
  const orgs = new OrgService(new KnexOrgRepository(deps.db), deps.clock);
  const catalog = new CatalogService(new KnexCatalogRepository(deps.db), deps.clock, deps.config?.publicBaseUrl ?? 'http://localhost:3000');
  const uow = new KnexCommerceUnitOfWork(deps.db);
  const orders = new OrderService(uow, deps.clock);
  const sandboxProcessor = new SandboxCardProcessor(new KnexSandboxPaymentRepository(deps.db), deps.clock, deps.config?.sandboxSettleDelayMs ?? 5000);
  const subscriptions = new SubscriptionService(uow, sandboxProcessor, deps.clock, deps.logger ?? createLogger({ level: 'silent' }));
  orders.useSubscriptionStarter(subscriptions);
  const cryptoConfig = deps.config?.crypto ?? parseCryptoConfig({});
  const cryptoQuotes = new CryptoQuoteService(uow, orgs, cryptoConfig, deps.clock);
  return {
    orgs,
    catalog,
    orders,
    sandboxProcessor,
    subscriptions,
    entitlements: new EntitlementService(uow, catalog),
    checkout: new CheckoutSessionService(uow, orgs, catalog, orders, sandboxProcessor, deps.clock, cryptoQuotes),
    cryptoQuotes,
    chainWatcher: new ChainWatcher(uow, orders, cryptoConfig, deps.clock, deps.logger ?? createLogger({ level: 'silent' }), undefined, deps.metrics && ((chainId, blocks) => deps.metrics!.chainWatcherLag(chainId, blocks))),
    signingKeys,
    webhooks: new WebhookService(webhookRepo, signingKeys, urlGuard, deps.clock),
    webhookDelivery: new DeliveryWorker(webhookRepo, signingKeys, urlGuard, deps.clock, deps.logger ?? createLogger({ level: 'silent' }), {
      leaseMs: deps.config?.webhookLeaseSeconds ? deps.config.webhookLeaseSeconds * 1000 : undefined,
      batchSize: deps.config?.webhookBatchSize,
      idleIntervalMs: deps.config?.webhookPollMs,
      onOutcome: deps.metrics && ((outcome) => deps.metrics!.webhookAttempt(outcome)),
    }),
    agentWallet: createAgentWalletModule({ db: deps.db, secretBox: deps.secretBox, clock: deps.clock, publicApiUrl: deps.config?.publicApiUrl ?? 'http://localhost:3001' }),
    telemetry: createTelemetryModule({ db: deps.db, clock: deps.clock, orgs, config: deps.config?.telemetry }),
  };
}
