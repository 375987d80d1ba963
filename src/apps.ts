/**
 * The three listeners: the merchant API ({base_url}), the platform API ({api_url}: telemetry,
 * agent wallet, webhook signing key) and the admin API (management, loopback by default).
 */
import type { Express, Request, Router } from 'express';
import { isLoopbackHost, type Config } from './config.js';
import type { Database } from './db/knex.js';
import { ShiftedClock, type Clock } from './kernel/clock.js';
import type { Logger } from './kernel/logger.js';
import { constantTimeEqual } from './kernel/secrets.js';
import type { Services } from './services.js';
import { createOpenApiApp, type Authenticator } from './http/openapi-app.js';
import { composeDocument, loadDocument } from './http/spec.js';
import { AppError, unauthorized } from './kernel/errors.js';
import type { AdminHandlers, MerchantHandlers, PlatformHandlers } from './handler-maps.js';
import type { AnyHandler } from './http/typed-handler.js';
import { registerStripeEventRoute, STRIPE_CONNECT_EVENTS_PATH } from './processors/stripe-events.handlers.js';
import { registerHostedRateLimits } from './pages/rate-limit.js';
import { HOSTED_FORM_PREFIXES, guardHostedPages, hostedPageFallbacks } from './pages/guard.js';
import { refuseCrossSiteForms } from './pages/cross-site.js';
import { registerDocsRoutes } from './docs/docs.js';
import { registerConsoleRoutes } from './console/serve.js';
import { FixedWindowRateLimiter } from './http/rate-limit.js';
import type { Metrics } from './observability/metrics.js';
import { countIngest, registerMetricsRoute } from './observability/http.js';
import { audited, type AuditAction } from './accounts/audit.handlers.js';
import type { ConsoleHandlers } from './handler-maps.js';

/**
 * Merchant operations that are commerce traffic, not management: not written to the audit log
 * (checkout sessions are the checkout's own record; x402 settlements are the chain's).
 */
const NOT_AUDITED = new Set(['createCheckoutSession', 'expireCheckoutSession', 'verifyX402Payment', 'settleX402Payment']);
/**
 * The console's management operations served by the domains (their service does the work for
 * every door): each success is written to the audit log under a telling action name.
 */
const CONSOLE_AUDIT_ACTIONS: Readonly<Record<string, AuditAction>> = {
  createConsoleProduct: { action: 'product.create', target: 'product', idFrom: 'result' },
  updateConsoleProduct: { action: 'product.update', target: 'product' },
  archiveConsoleProduct: { action: 'product.archive', target: 'product' },
  createConsolePrice: { action: 'price.create', target: 'price', idFrom: 'result' },
  updateConsolePrice: { action: 'price.update', target: 'price' },
  deactivateConsolePrice: { action: 'price.deactivate', target: 'price' },
  createConsolePaymentLink: { action: 'payment_link.create', target: 'payment_link', idFrom: 'result' },
  deactivateConsolePaymentLink: { action: 'payment_link.deactivate', target: 'payment_link' },
  refundConsoleOrder: { action: 'order.refund', target: 'order' },
  cancelConsoleSubscription: { action: 'subscription.cancel', target: 'subscription' },
  pauseConsoleSubscription: { action: 'subscription.pause', target: 'subscription' },
  resumeConsoleSubscription: { action: 'subscription.resume', target: 'subscription' },
  updateConsoleOrganization: { action: 'organization.update', target: 'organization', idFrom: 'org' },
  setConsoleReceivingWallet: { action: 'receiving_wallet.set', target: 'receiving_wallet' },
  deleteConsoleReceivingWallet: { action: 'receiving_wallet.delete', target: 'receiving_wallet' },
  createConsoleTaxRate: { action: 'tax_rate.create', target: 'tax_rate', idFrom: 'result' },
  archiveConsoleTaxRate: { action: 'tax_rate.archive', target: 'tax_rate' },
  updateConsoleTaxSettings: { action: 'tax_settings.update', target: 'organization', idFrom: 'org' },
};
/** Admin operations whose service writes its own, more telling, audit entry. */
const AUDITED_BY_SERVICE = new Set(['createOrgInvite', 'reissueOrgInviteLink', 'createPasswordResetLink']);

export interface AppDeps {
  config: Config;
  database: Database;
  clock: Clock;
  logger: Logger;
  services: Services;
  adminToken: string;
  /** Prometheus metrics of this process; `GET /metrics` on the admin listener (absent: no metrics). */
  metrics?: Metrics;
  /**
   * False until the start is complete (every listener up, the demo organization created): until
   * then `/readyz` answers 503 "starting", so a load balancer or script never sees ready early.
   * Absent (tests): ready as soon as the database answers.
   */
  started?: () => boolean;
}

/** What `/readyz` throws while the process is still starting. */
export class StillStarting extends Error {
  constructor() {
    super('Kassa is starting');
  }
}

const KIB = 1024;
/** Every body of the merchant, agent and admin APIs (the spec's 64 KiB session-creation limit). */
export const DEFAULT_BODY_LIMIT = 64 * KIB;
/** Telemetry ingest (documented in telemetry.yaml). */
export const INGEST_BODY_LIMIT = 5 * KIB * KIB;
/** A batch of up to 1,000 usage events. */
export const USAGE_EVENTS_BODY_LIMIT = KIB * KIB;

/** `/metrics` of an admin listener bound beyond loopback asks for the admin token (docs/operations.md). */
export const metricsAccess = (config: Pick<Config, 'adminHost'>, adminToken: string) =>
  isLoopbackHost(config.adminHost) ? {} : { token: adminToken };

const readiness = (deps: AppDeps) => async () => {
  if (deps.started && !deps.started()) throw new StillStarting();
  await deps.database.db.raw('select 1');
};

/** Routes a harness mounts next to the merchant API's, behind the same middleware (the checkout benchmark's floor). */
export interface MerchantAppExtras {
  extraRoutes?: (router: Router) => void;
}

export async function createMerchantApp(deps: AppDeps, extras: MerchantAppExtras = {}): Promise<Express> {
  const [merchant, consoleDoc] = await Promise.all([loadDocument('merchant'), loadDocument('console')]);
  const document = composeDocument('Kassa merchant API', [
    { doc: merchant, include: (op) => op.operationId !== 'getWebhookSigningKey' },
    { doc: consoleDoc, include: () => true },
  ]);
  const { orgs, catalog, webhooks, checkout, orders, subscriptions, cryptoPayments, commerceMetrics, usage, portal, accounts } = deps.services.modules;
  const merchantHandlers = {
    ...portal.handlers.merchant,
    ...cryptoPayments.handlers.merchant,
    ...orgs.handlers.merchant,
    ...catalog.handlers.merchant,
    ...webhooks.handlers.merchant,
    ...checkout.handlers.merchant,
    ...orders.handlers.merchant,
    ...subscriptions.handlers.merchant,
    ...commerceMetrics.handlers.merchant,
    ...usage.handlers.merchant,
    ...deps.services.modules.discounts.handlers.merchant,
    ...deps.services.modules.tax.handlers.merchant,
  } satisfies MerchantHandlers;
  // The console's management operations of the other domains are audited like the merchant
  // API's state changes, with a telling action name where one is given (the accounts domain's
  // write their own entries).
  const consoleHandlers = {
    ...accounts.handlers.console,
    // A read sent as POST (the definition is a body): nothing to audit.
    ...usage.handlers.console,
    ...audited(
      {
        ...catalog.handlers.console,
        ...orders.handlers.console,
        ...subscriptions.handlers.console,
        ...webhooks.handlers.console,
        ...deps.services.modules.telemetry.handlers.console,
        ...deps.services.modules.agentWallet.handlers.console,
        ...orgs.handlers.console,
        ...cryptoPayments.handlers.console,
        ...deps.services.modules.tax.handlers.console,
      },
      accounts.audit,
      { door: 'console', actions: CONSOLE_AUDIT_ACTIONS },
    ),
  } satisfies ConsoleHandlers;
  const handlers = {
    ...audited(merchantHandlers, accounts.audit, { door: 'merchant', skip: NOT_AUDITED }),
    ...consoleHandlers,
  };
  const limiter = new FixedWindowRateLimiter(deps.config.merchantRateLimitPerMinute, 60_000, deps.clock);
  const apiKeyAuth: Authenticator = async (req, op) => {
    const auth = await deps.services.orgs.authenticateApiKey(req.header('x-api-key'), op.operation['x-permission'] as string | undefined);
    limiter.hit(auth.apiKeyId);
    return auth;
  };
  return createOpenApiApp({
    name: 'merchant',
    document,
    handlers: handlers as unknown as Record<string, AnyHandler>,
    authenticators: { ApiKeyAuth: apiKeyAuth, ...accounts.authenticators },
    extraRoutes: (router) => {
      extras.extraRoutes?.(router);
      if (deps.services.stripeEvents) registerStripeEventRoute(router, deps.services.stripeEvents);
      if (deps.services.stripeConnectEvents) registerStripeEventRoute(router, deps.services.stripeConnectEvents, STRIPE_CONNECT_EVENTS_PATH);
      registerHostedRateLimits(router, { perMinute: deps.config.hostedRateLimitPerMinute, writesPerMinute: deps.config.hostedWriteRateLimitPerMinute }, deps.clock);
      guardHostedPages(router);
      refuseCrossSiteForms(router, HOSTED_FORM_PREFIXES, deps.config.publicBaseUrl);
      checkout.pages(router);
      subscriptions.pages(router);
      portal.pages(router);
      cryptoPayments.pages(router);
      registerConsoleRoutes(router);
      hostedPageFallbacks(router, deps.logger);
      registerDocsRoutes(router, {
        documents: ['merchant', 'console'],
        elsewhere: [
          { name: 'telemetry', baseUrl: deps.config.publicApiUrl },
          { name: 'agent-wallet', baseUrl: deps.config.publicApiUrl },
        ],
      });
    },
    logger: deps.logger,
    clock: deps.clock,
    validateResponses: deps.config.nodeEnv === 'test',
    bodyLimit: (req) => (req.path === '/v1/usage-events' ? USAGE_EVENTS_BODY_LIMIT : DEFAULT_BODY_LIMIT),
    errorFlavor: () => 'envelope',
    readiness: readiness(deps),
    writes: deps.database.reads,
    trustProxy: deps.config.trustProxy,
    metrics: deps.metrics,
    hsts: deps.config.publicBaseUrl.startsWith('https:'),
  });
}

const usesEnvelope = (req: Request) => req.path.startsWith('/v1/agent-wallet') || req.path.startsWith('/v1/webhooks');

/**
 * An OTLP exporter pointed at `{api_url}` instead of `{api_url}/v1/otlp` POSTs /v1/traces,
 * /v1/metrics or /v1/logs: the answer (405 on the two paths that exist for GET, 404 on the other)
 * names the endpoint it wanted, not a bare "method not allowed".
 */
function registerOtlpPathHints(router: Router, apiUrl: string): void {
  const fix = `Set OTEL_EXPORTER_OTLP_ENDPOINT=${apiUrl}/v1/otlp (the exporter appends /v1/traces): OTLP/HTTP traces go to POST /v1/otlp/v1/traces`;
  const hints: Record<string, AppError> = {
    '/v1/traces': new AppError('METHOD_NOT_ALLOWED', `POST /v1/traces is not the OTLP endpoint (GET /v1/traces lists traces). ${fix}`),
    '/v1/metrics': new AppError('METHOD_NOT_ALLOWED', `POST /v1/metrics is not an OTLP endpoint (GET /v1/metrics reads metrics; Kassa computes them from traces, so set OTEL_METRICS_EXPORTER=none). ${fix}`),
    '/v1/logs': new AppError('NOT_FOUND', `POST /v1/logs: Kassa takes no OTLP logs (set OTEL_LOGS_EXPORTER=none). ${fix}`),
  };
  router.post(Object.keys(hints), (req, _res, next) => next(hints[req.path]));
}

export async function createPlatformApp(deps: AppDeps): Promise<Express> {
  const [telemetry, agentWallet, merchant] = await Promise.all([
    loadDocument('telemetry'),
    loadDocument('agent-wallet'),
    loadDocument('merchant'),
  ]);
  const document = composeDocument('Kassa platform API', [
    { doc: telemetry, include: () => true },
    { doc: agentWallet, include: () => true },
    { doc: merchant, include: (op) => op.operationId === 'getWebhookSigningKey' },
  ]);
  const modules = deps.services.modules;
  const handlers = {
    ...modules.webhooks.handlers.platform,
    ...countIngest(modules.telemetry.handlers.platform, deps.metrics),
    ...modules.agentWallet.handlers.platform,
  } satisfies PlatformHandlers;
  return createOpenApiApp({
    name: 'platform',
    document,
    handlers: handlers as unknown as Record<string, AnyHandler>,
    authenticators: { ...modules.telemetry.authenticators, ...modules.agentWallet.authenticators },
    bodyCodecs: modules.telemetry.bodyCodecs,
    extraRoutes: (router) => {
      registerDocsRoutes(router, {
        documents: ['telemetry', 'agent-wallet'],
        elsewhere: [{ name: 'merchant', baseUrl: deps.config.publicBaseUrl }],
      });
      registerOtlpPathHints(router, deps.config.publicApiUrl);
    },
    logger: deps.logger,
    clock: deps.clock,
    validateResponses: deps.config.nodeEnv === 'test',
    bodyLimit: (req) => (req.path === '/v1/ingest' || req.path.startsWith('/v1/otlp/') ? INGEST_BODY_LIMIT : DEFAULT_BODY_LIMIT),
    errorFlavor: (req) => (usesEnvelope(req) ? 'envelope' : 'telemetry'),
    refineError: (error, thrown, req) => (usesEnvelope(req) ? error : modules.telemetry.refineError(error, thrown, req)),
    readiness: readiness(deps),
    writes: deps.database.reads,
    trustProxy: deps.config.trustProxy,
    metrics: deps.metrics,
    hsts: deps.config.publicApiUrl.startsWith('https:'),
  });
}

/** The deployment's test clock (TEST_CLOCK=true): moved forward by the operator; 404 otherwise. */
function testClockHandlers(clock: Clock): Pick<AdminHandlers, 'advanceTestClock'> {
  return {
    advanceTestClock: async ({ body }) => {
      if (!(clock instanceof ShiftedClock)) throw new AppError('NOT_FOUND', 'The test clock is off: the server runs without TEST_CLOCK=true (which production refuses)');
      clock.advance(body.seconds * 1000);
      return { status: 200, body: { success: true, message: 'Test clock advanced', data: { now: clock.now().toISOString(), shiftSeconds: Math.round(clock.shiftMs / 1000) } } };
    },
  };
}

export async function createAdminApp(deps: AppDeps): Promise<Express> {
  const admin = await loadDocument('admin');
  const document = composeDocument('Kassa admin API', [{ doc: admin, include: () => true }]);
  const { orgs, webhooks, catalog, orders, cryptoPayments, subscriptions, agentWallet, telemetry, accounts, usage } = deps.services.modules;
  const adminHandlers = {
    ...accounts.handlers.admin,
    ...orgs.handlers.admin,
    ...webhooks.handlers.admin,
    ...catalog.handlers.admin,
    ...orders.handlers.admin,
    ...cryptoPayments.handlers.admin,
    ...subscriptions.handlers.admin,
    ...agentWallet.handlers.admin,
    ...telemetry.handlers.admin,
    ...testClockHandlers(deps.clock),
    ...usage.handlers.admin,
  } satisfies AdminHandlers;
  const handlers = audited(adminHandlers, accounts.audit, { door: 'admin', skip: AUDITED_BY_SERVICE });
  const adminBearer: Authenticator = async (req) => {
    const match = /^Bearer (.+)$/.exec(req.header('authorization') ?? '');
    if (!match?.[1] || !constantTimeEqual(match[1], deps.adminToken)) throw unauthorized('Missing or invalid admin token');
    return undefined;
  };
  return createOpenApiApp({
    name: 'admin',
    document,
    handlers: handlers as unknown as Record<string, AnyHandler>,
    authenticators: { AdminBearer: adminBearer },
    // The admin listener is loopback-only by default; its reference is served there too.
    extraRoutes: (router) => {
      registerDocsRoutes(router, { documents: ['admin'] });
      // On loopback unauthenticated like /healthz; beyond it (ADMIN_TLS_TERMINATED) behind the
      // admin token. The reference above stays open: it is the published admin.yaml, no data.
      if (deps.metrics) registerMetricsRoute(router, deps.metrics, metricsAccess(deps.config, deps.adminToken));
    },
    logger: deps.logger,
    clock: deps.clock,
    validateResponses: deps.config.nodeEnv === 'test',
    bodyLimit: () => DEFAULT_BODY_LIMIT,
    errorFlavor: () => 'envelope',
    readiness: readiness(deps),
    writes: deps.database.reads,
    metrics: deps.metrics,
  });
}
