/** Calls each domain's module. Handlers receive services, never the database. */
import { AppError } from './kernel/errors.js';
import type { Db } from './db/knex.js';
import type { ReadRouter } from './db/replicas.js';
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
import { KnexDisputeRepository, KnexRefundRepository } from './orders/refund.repository.js';
import { KnexSubscriptionRepository } from './subscriptions/subscription.repository.js';
import { KnexCryptoRepository } from './crypto-payments/crypto.repository.js';
import { KnexCreditLedger } from './usage/credits.repository.js';
import { KnexRedemptionLedger } from './discounts/redemption-ledger.repository.js';
import { enqueueWebhookEvent } from './webhooks/outbox.repository.js';
import { signX402Receipt } from './webhooks/signature.js';
import { enqueueBuyerEmail, owedByEvent } from './buyer-emails/buyer-email.repository.js';
import { createBuyerEmailsModule, type BuyerEmailsModule } from './buyer-emails/index.js';
import type { MailTransport } from './buyer-emails/buyer-email.service.js';
import { createStripeModule } from './processors/stripe-module.js';
import type { StripeEventService } from './processors/stripe-processor.js';
import { parseCryptoConfig, type CryptoConfig } from './crypto-payments/crypto-config.js';
import type { ChainConfig as AgentWalletChain } from './agent-wallet/chains.js';
import { createOrgsModule, type OrgsModule } from './orgs/index.js';
import { createCatalogModule, type CatalogModule } from './catalog/index.js';
import { createProcessorsModule, type ProcessorsModule } from './processors/index.js';
import { createSubscriptionsModule, type SubscriptionsModule } from './subscriptions/index.js';
import { KnexCustomerBalanceLedger } from './subscriptions/customer-balance.repository.js';
import { KnexProcessorBalanceMirror } from './subscriptions/processor-balance.repository.js';
import { KnexPendingPlanChangeRepository } from './subscriptions/pending-plan-change.repository.js';
import { KnexUsageSegmentRepository } from './subscriptions/usage-segment.repository.js';
import { pendingPlanChangeJob } from './subscriptions/subscription.jobs.js';
import { createCryptoPaymentsModule, type CryptoPaymentsModule } from './crypto-payments/index.js';
import { createCheckoutModule, type CheckoutModule } from './checkout/index.js';
import { createOrdersModule, type OrdersModule } from './orders/index.js';
import { createWebhooksModule, type WebhooksModule } from './webhooks/index.js';
import { createTelemetryModule, type TelemetryModule } from './telemetry/index.js';
import { createAgentWalletModule, type AgentWalletModule } from './agent-wallet/index.js';
import { createCommerceMetricsModule, type CommerceMetricsModule } from './commerce-metrics/index.js';
import { createUsageModule, type UsageModule } from './usage/index.js';
import { createTaxModule, type TaxModule } from './tax/index.js';
import type { MeterDirectory, MeteredBilling } from './commerce/metered-billing.js';
import { BalanceAlerts, MeterBalances } from './commerce/meter-balances.js';
import { createPortalModule, type PortalModule } from './portal/index.js';
import { createAccountsModule, type AccountsModule } from './accounts/index.js';
import { createDiscountsModule, type DiscountsModule } from './discounts/index.js';

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
  commerceMetrics: CommerceMetricsModule;
  /** Usage events and meters (issue 38). */
  usage: UsageModule;
  /** Tax rates and settings (issue 39, item 4). */
  tax: TaxModule;
  portal: PortalModule;
  /** Absent unless SMTP_URL is configured. */
  buyerEmails?: BuyerEmailsModule;
  /** People: users, memberships, console sessions, invites, the audit log. */
  accounts: AccountsModule;
  /** Coupons and promotion codes (issue 39). */
  discounts: DiscountsModule;
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
  /** Stripe Connect's events (`account.updated`), when STRIPE_CONNECT_WEBHOOK_SECRET is set. */
  stripeConnectEvents?: StripeEventService;
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
    | 'usageEventRetentionDays'
    | 'cardProcessor'
    | 'publicBaseUrl'
    | 'publicApiUrl'
    | 'sandboxSettleDelayMs'
    | 'telemetry'
    | 'crypto'
    | 'smtp'
  >
> & {
  /** Tests: the buyer e-mails' transport instead of nodemailer on SMTP_URL. */
  mailTransport?: MailTransport;
};

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
export function createCommerceUnitOfWork(db: Db, options: { buyerEmails?: boolean } = {}): CommerceUnitOfWork {
  const inTransaction = <T>(transaction: T | undefined, what: string): T => {
    if (!transaction) throw new Error(`${what} are queued inside the transaction of their state change`);
    return transaction;
  };
  return new KnexUnitOfWork<CommerceStores>(db, (executor, transaction) => ({
    sessions: new KnexCheckoutSessionRepository(executor),
    orders: new KnexOrderRepository(executor),
    customers: new KnexCustomerRepository(executor),
    subscriptions: new KnexSubscriptionRepository(executor),
    refunds: new KnexRefundRepository(executor),
    disputes: new KnexDisputeRepository(executor),
    quotes: new KnexCryptoRepository(executor),
    credits: new KnexCreditLedger(executor),
    redemptions: new KnexRedemptionLedger(executor),
    planChanges: new KnexPendingPlanChangeRepository(executor),
    balances: new KnexCustomerBalanceLedger(executor),
    processorBalances: new KnexProcessorBalanceMirror(executor),
    usageSegments: new KnexUsageSegmentRepository(executor),
    emit: async (event, now) => {
      const trx = inTransaction(transaction, 'webhook events');
      const id = await enqueueWebhookEvent(trx, event, now);
      // The buyer's e-mail about the same change, in the same transaction (none when it rolls back).
      if (options.buyerEmails) {
        const owed = await owedByEvent(trx, event, id);
        if (owed) await enqueueBuyerEmail(trx, owed, now);
      }
      return id;
    },
    notifyBuyerOfRefund: async (order, refundCents, now) => {
      const trx = inTransaction(transaction, 'buyer e-mails');
      if (!options.buyerEmails || refundCents < 1) return;
      await enqueueBuyerEmail(trx, { orgId: order.orgId, kind: 'refund_issued', to: order.customerEmail, orderId: order.id, amountCents: refundCents, dedupeKey: `refund:${order.id}:${order.amountRefundedCents}` }, now);
    },
  }));
}

export function createServices(deps: {
  db: Db;
  /** Where lag-tolerant reads go (src/db/replicas.ts); without it every read is on `db`. */
  reads?: ReadRouter;
  clock: Clock;
  secretBox: SecretBox;
  config?: ServicesConfig;
  logger?: Logger;
  metrics?: Metrics;
}): Services {
  const { db, reads, clock, secretBox, metrics } = deps;
  const config = deps.config ?? {};
  const logger = deps.logger ?? createLogger({ level: 'silent' });
  const uow = createCommerceUnitOfWork(db, { buyerEmails: config.smtp !== undefined });
  const payments = new PaymentFlow(uow, clock);
  // Stripe's module asks the orgs module whether an organization is this deployment's (orphan
  // sessions) only when an event arrives, after both exist; orgs checks connected accounts with Stripe.
  const isOwnOrganization = async (orgId: string) => (await orgsModule.orgs.displayNameOf(orgId)) !== undefined;
  const taxModule = createTaxModule({ db, clock });
  // Metered prices read meters and their quantities through commerce's ports; the usage module is built below.
  const meterDirectory: MeterDirectory = {
    find: (orgId, meterId) =>
      modules.usage.meters.get(orgId, meterId).then(
        (m) => ({ id: m.id, name: m.name, archived: m.status === 'ARCHIVED' }),
        (error: unknown) => {
          if (error instanceof AppError && error.code === 'NOT_FOUND') return undefined;
          throw error;
        },
      ),
  };
  const meteredBilling: MeteredBilling = {
    componentsOf: async (orgId, priceId) => (await catalogModule.catalog.findPrice(orgId, priceId))?.price.meteredComponents ?? [],
    meters: meterDirectory,
    quantities: { quantity: async (orgId, meterId, customerId, start, end) => (await modules.usage.meters.quantities(orgId, meterId, { customer: customerId, start, end })).total },
  };
  const stripe = createStripeModule({
    config: config.cardProcessor,
    db,
    uow,
    payments,
    clock,
    logger,
    publicBaseUrl: config.publicBaseUrl ?? 'http://localhost:3000',
    isOwnOrganization,
    recordConnectedAccount: (state) => orgsModule.orgs.recordStripeAccountState(state),
    metered: meteredBilling,
    taxRates: taxModule.tax,
    // A Stripe session that expired unpaid gives its coupon's redemption back (issue 39).
    releaseDiscount: async (session) => {
      if (session.pricing.discount) await discountsModule.discounts.release(session.id);
    },
    // A plan change paid in Stripe whose item update failed is applied when its invoice's invoice.paid arrives (issue 39).
    applyPendingPlanChange: (processorSubscriptionId) => subscriptionsModule.subscriptions.applyPendingPlanChangeOf(processorSubscriptionId),
  });

  const orgsModule = createOrgsModule({ db, clock, connectedAccounts: stripe?.connectedAccounts, cardProcessor: stripe ? 'stripe' : 'sandbox' });
  const { orgs } = orgsModule;
  const catalogModule = createCatalogModule({ db, clock, orgs, publicBaseUrl: config.publicBaseUrl ?? 'http://localhost:3000', meters: meterDirectory });
  const discountsModule = createDiscountsModule({ db, clock, products: catalogModule.catalog });
  const meterBalances = new MeterBalances(uow, meteredBilling, clock);
  const processorsModule = createProcessorsModule({ db, clock, payments, sandboxSettleDelayMs: config.sandboxSettleDelayMs ?? 5000, stripeReconciliationJob: stripe?.reconciliationJob, stripeUsageJobs: stripe && (() => [...stripe.usageJobs(), stripe.redemptionSweep().job(), pendingPlanChangeJob(subscriptionsModule.subscriptions)]) });
  const publicBaseUrl = config.publicBaseUrl ?? 'http://localhost:3000';
  const subscriptionsModule = createSubscriptionsModule({
    uow,
    cardProcessor: processorsModule.sandboxProcessor,
    db,
    merchants: orgsModule.orgs,
    clock,
    logger,
    subscriptionBilling: stripe?.subscriptions,
    processorUsage: stripe?.usage,
    portalUrlOf: (orgId) => portalModule.portal.signInUrl(orgId),
    metered: meteredBilling,
    balances: meterBalances,
    plans: {
      findPrice: async (orgId, priceId) => {
        const found = await catalogModule.catalog.findPrice(orgId, priceId);
        if (!found) return undefined;
        const { price, product } = found;
        return {
          priceId: price.id,
          productId: product.id,
          productName: product.name,
          priceName: price.pricingName,
          unitAmount: price.amount,
          currency: price.currency,
          pricingType: price.pricingType,
          billingInterval: price.billingInterval,
          billingIntervalCount: price.billingIntervalCount,
          provider: price.provider,
          active: price.active,
          flexibleAmount: price.flexibleAmount,
          metered: price.meteredComponents.length > 0,
        };
      },
    },
  });
  const portalModule = createPortalModule({
    db,
    uow,
    subscriptions: subscriptionsModule.subscriptions,
    entitlements: subscriptionsModule.entitlements,
    merchants: orgsModule.orgs,
    clock,
    logger,
    publicBaseUrl,
    signInMailer: () => buyerEmailsModule?.emails,
    // Portal changes go to the organization's audit log; a failed write is logged, never a failed change.
    audit: () => ({
      record: (entry) =>
        accountsModule.audit.record(entry).catch((err: unknown) => logger.error({ err, action: entry.action }, 'audit log write failed')),
    }),
  });
  const buyerEmailsModule: BuyerEmailsModule | undefined = config.smtp
    ? createBuyerEmailsModule({
        db,
        uow,
        smtp: config.smtp,
        merchants: orgsModule.orgs,
        portalUrlOf: (orgId) => portalModule.portal.signInUrl(orgId),
        clock,
        logger,
        transport: config.mailTransport,
      })
    : undefined;
  const cryptoModule = createCryptoPaymentsModule({
    db,
    uow,
    orgs,
    payments,
    config: config.crypto ?? parseCryptoConfig({}),
    clock,
    logger,
    secretBox,
    paywallUrlPrefix: `${(config.publicBaseUrl ?? 'http://localhost:3000').replace(/\/+$/, '')}/x402/prices/`,
    paywallCatalog: {
      findPrice: (orgId, priceId) => catalogModule.catalog.findPrice(orgId, priceId),
      listProductPriceIds: async (orgId, productId) => (await catalogModule.catalog.listPrices(productId, orgId)).map((p) => p.id),
    },
    // The webhooks module is built below; receipts are signed only once requests arrive.
    signReceipt: async (id, timestampSeconds, body) => ({ ...signX402Receipt(await modules.webhooks.signingKeys.signers(), id, timestampSeconds, body) }),
    observeLag: metrics && ((chainId, blocks) => metrics.chainWatcherLag(chainId, blocks)),
  });
  const telemetryModule = createTelemetryModule({ db, reads, clock, orgs, config: config.telemetry, publicApiUrl: config.publicApiUrl ?? 'http://localhost:3001' });
  const agentWalletModule = createAgentWalletModule({
    db,
    secretBox,
    clock,
    publicApiUrl: config.publicApiUrl ?? 'http://localhost:3001',
    // The default policy allows USDC on each configured chain (CRYPTO_CHAINS), so agents can pay x402 resources there.
    chains: agentWalletChains(config.crypto ?? parseCryptoConfig({})),
  });
  const accountsModule = createAccountsModule({
    db,
    clock,
    orgs,
    publicBaseUrl: config.publicBaseUrl ?? 'http://localhost:3000',
    mailer: buyerEmailsModule?.emails,
    // What a member makes in the console dies with the membership (docs/accounts.md).
    credentials: [
      {
        kind: 'telemetryKeys',
        permission: 'telemetry:manage',
        revokeCreatedBy: async (orgId, createdBy) => (await telemetryModule.keys.revokeCreatedBy(orgId, createdBy)).map((k) => ({ id: k.id, name: k.name })),
      },
      { kind: 'agents', permission: 'agents:manage', revokeCreatedBy: (orgId, createdBy) => agentWalletModule.admin.revokeAgentsKeyedBy(orgId, createdBy) },
    ],
  });
  const modules: Modules = {
    tax: taxModule,
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
      portal: portalModule.checkoutEntry,
      discounts: discountsModule.discounts,
      tax: taxModule.tax,
    }),
    orders: createOrdersModule({
      uow,
      clock,
      orgs,
      cardRefunds: stripe?.refunds,
      listReads: reads?.reads((handle) => ({ orders: new KnexOrderRepository(handle), customers: new KnexCustomerRepository(handle) })),
    }),
    webhooks: createWebhooksModule({ db, clock, secretBox, logger, orgs, config, onAttempt: metrics && ((outcome) => metrics.webhookAttempt(outcome)) }),
    telemetry: telemetryModule,
    agentWallet: agentWalletModule,
    commerceMetrics: createCommerceMetricsModule({ db, reads, clock }),
    usage: createUsageModule({
      db,
      uow,
      clock,
      balances: meterBalances,
      alerts: new BalanceAlerts(uow, meterBalances, clock),
      orgExists: async (orgId) => (await orgs.displayNameOf(orgId)) !== undefined,
      eventRetentionDays: config.usageEventRetentionDays,
      // Meters read spans through the telemetry module's services, which know nothing of billing.
      spans: {
        projectBelongsTo: (orgId, projectId) =>
          modules.telemetry.projects.get(orgId, projectId).then(
            () => true,
            (error: unknown) => {
              if (error instanceof AppError && error.code === 'NOT_FOUND') return false;
              throw error;
            },
          ),
        modelCallSpans: (projectId, start, end) => modules.telemetry.traces.modelCallSpans(projectId, start, end),
        modelCallAggregates: (query) => modules.telemetry.traces.modelCallAggregates(query),
        meterHours: (query) => modules.telemetry.traces.spanMeterHours(query),
        buildMeterChunk: (orgId, meterId, chunkTraces, beforeCommit) => modules.telemetry.traces.buildSpanMeterChunk(orgId, meterId, chunkTraces, beforeCommit),
      },
    }),
    portal: portalModule,
    buyerEmails: buyerEmailsModule,
    accounts: accountsModule,
    discounts: discountsModule,
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
    stripeConnectEvents: stripe?.connectEvents,
    modules,
  };
}
