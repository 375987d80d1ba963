/**
 * The only reader of process.env. Bad configuration fails at start with a message that names
 * the variable, never later at request time.
 */
import path from 'node:path';
import { CryptoConfigError, parseCryptoConfig, type CryptoConfig } from './crypto-payments/crypto-config.js';
import { urlSecretParts } from './kernel/redaction.js';
import { estimateTokenEntropyBits } from './kernel/token-strength.js';

export type Role = 'api' | 'worker' | 'all';

export interface Config {
  nodeEnv: string;
  role: Role;
  host: string;
  merchantPort: number;
  apiPort: number;
  adminPort: number;
  adminHost: string;
  /**
   * ADMIN_TLS_TERMINATED=true: the admin listener is bound beyond loopback on purpose, behind a
   * proxy that terminates TLS (the admin token must not cross a network in clear text). Required
   * for a non-loopback ADMIN_HOST in production; such a listener also asks for the admin token
   * on `/metrics`.
   */
  adminTlsTerminated: boolean;
  publicBaseUrl: string;
  publicApiUrl: string;
  /** PostgreSQL connection string; unset → embedded PGlite in `dataDir`. */
  databaseUrl: string | undefined;
  /** Connections this process may open to PostgreSQL. DATABASE_POOL_MAX, default 10. */
  databasePoolMax: number;
  /**
   * Run the request paths' hot statements as named (prepared) statements on PostgreSQL.
   * DATABASE_PREPARED_STATEMENTS, default true; false behind a pooler in transaction mode that
   * cannot keep them (PgBouncer before 1.21, or with max_prepared_statements = 0).
   */
  databasePreparedStatements: boolean;
  /**
   * Where migrations run (and take their session advisory lock): DATABASE_DIRECT_URL, default
   * DATABASE_URL. Set it to the server itself when DATABASE_URL goes through a pooler in
   * transaction mode (docs/operations.md, scaling).
   */
  databaseDirectUrl: string | undefined;
  /** Streaming replicas for reads that tolerate lag: DATABASE_REPLICA_URL, comma-separated. */
  databaseReplicaUrls: string[];
  /** A replica further behind the primary than this is skipped. DATABASE_REPLICA_MAX_LAG_MS, default 2000. */
  databaseReplicaMaxLagMs: number;
  /** How often each process checks its replicas' health and lag. DATABASE_REPLICA_CHECK_INTERVAL_MS, default 500. */
  databaseReplicaCheckIntervalMs: number;
  dataDir: string;
  /** Bearer token of the admin API; unset → generated into `<dataDir>/admin-token`. */
  adminToken: string | undefined;
  /** 32-byte key for secrets at rest (base64); unset → generated into `<dataDir>/encryption-key`. */
  encryptionKey: Buffer | undefined;
  logLevel: string;
  /** Create a demo organization and key on first start with an empty embedded database. */
  seedDemo: boolean;
  /**
   * Proxies in front of the listeners whose X-Forwarded-* headers are trusted (Express `trust
   * proxy` hop count): the client address is the entry the outermost trusted proxy appended, so
   * entries a client writes itself are never taken. TRUST_PROXY: false (0), true (1) or a count.
   */
  trustProxy: number;
  /**
   * Merchant API requests per API key per minute, counted per process (src/http/rate-limit.ts);
   * 0 turns the limit off. MERCHANT_RATE_LIMIT_PER_MINUTE.
   */
  merchantRateLimitPerMinute: number;
  /**
   * Hosted-page requests (checkout, payment links, subscription management) per client address
   * per minute, counted per process; 0 turns the limit off. HOSTED_RATE_LIMIT_PER_MINUTE.
   */
  hostedRateLimitPerMinute: number;
  /**
   * Of those, requests that open or change something (opening a payment link, the crypto e-mail
   * step, a card payment, a cancellation); 0 turns the limit off. HOSTED_WRITE_RATE_LIMIT_PER_MINUTE.
   */
  hostedWriteRateLimitPerMinute: number;
  telemetry: TelemetryConfig;
  /** Let webhook endpoints reach loopback addresses (local development and tests only; refused in production). */
  webhookAllowLoopback: boolean;
  /** TEST_CLOCK=true: the clock can be moved forward through the admin API (never in production). */
  testClock: boolean;
  /**
   * How long a worker's claim on a webhook delivery lasts before another worker may retry it
   * (a worker that died mid-delivery). WEBHOOK_DELIVERY_LEASE_SECONDS, at least 15 (the 10 s
   * attempt timeout plus a margin), default 60.
   */
  webhookLeaseSeconds: number;
  /**
   * Deliveries one worker claims and sends concurrently per pass (WEBHOOK_DELIVERY_BATCH_SIZE,
   * default 50), and its pause when nothing was due (WEBHOOK_DELIVERY_POLL_MS, default 100).
   */
  webhookBatchSize: number;
  webhookPollMs: number;
  /** Settled webhook events (and their deliveries and attempts) are deleted after this many days. */
  webhookRetentionDays: number;
  /**
   * USAGE_EVENT_RETENTION_DAYS: usage events stamped before 00:00 UTC this many days ago are refused
   * and their weeks dropped (migration 0380); undefined (the default): kept for ever.
   */
  usageEventRetentionDays?: number;
  /** How long the sandbox processor's asynchronous test cards stay pending. */
  sandboxSettleDelayMs: number;
  /** Which card processor takes card checkouts (docs/card-processors.md). */
  cardProcessor: CardProcessorConfig;
  /** Crypto checkout: watched chains, accepted tokens, matching rules (CRYPTO_* variables). */
  crypto: CryptoConfig;
  /**
   * Buyer e-mails (receipts, subscription changes, refunds; docs/buyer-emails.md): SMTP_URL
   * (smtp:// or smtps://, nodemailer's options in the query) and SMTP_FROM, the operator's sender
   * address (each organization's display name is the sender name). Unset: no e-mail at all.
   */
  smtp: { url: string; from: string } | undefined;
}

/**
 * The sandbox (no setup; test cards on Kassa's own page) or Stripe (STRIPE_SECRET_KEY and
 * STRIPE_WEBHOOK_SECRET). `apiBaseUrl` (STRIPE_API_BASE_URL) points the SDK at another
 * Stripe-shaped server: stripe-mock in development, the test harness's server in tests.
 * `timeoutMs` (STRIPE_TIMEOUT_MS, default 10 000) bounds each attempt of a call to Stripe;
 * `reconcileIntervalMs` (STRIPE_RECONCILE_INTERVAL_MS, default 60 000) paces the reconciliation job.
 */
export type CardProcessorConfig =
  | { kind: 'sandbox' }
  | {
      kind: 'stripe';
      secretKey: string;
      webhookSecret: string;
      /** STRIPE_CONNECT_WEBHOOK_SECRET: the signing secret of the Connect endpoint ("events on connected accounts": `account.updated`); optional. */
      connectWebhookSecret?: string;
      apiBaseUrl: string | undefined;
      timeoutMs: number;
      reconcileIntervalMs: number;
    };

/** Telemetry API settings (openapi/telemetry.yaml leaves their values to the deployment). */
export interface TelemetryConfig {
  /** Traces an organization may store per calendar month (UTC). TELEMETRY_MONTHLY_TRACE_QUOTA. */
  monthlyTraceQuota: number;
  /** Requests per key per window. TELEMETRY_RATE_LIMIT. */
  rateLimit: number;
  /** Fixed window length. TELEMETRY_RATE_LIMIT_WINDOW_SECONDS. */
  rateLimitWindowSeconds: number;
  /**
   * Per-model prices in USD per million tokens, merged over the built-in table
   * (src/telemetry/prices.ts). TELEMETRY_PRICES, JSON: {"model": {"input": 2.5, "output": 10}}.
   */
  prices: Record<string, { input: number; output: number }>;
}

function positiveInt(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 1) throw new ConfigError(`${name} must be a positive integer, got "${raw}"`);
  return value;
}

function prices(env: Env, name: string): TelemetryConfig['prices'] {
  const raw = env[name];
  if (raw === undefined || raw === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError(`${name} must be JSON like {"gpt-4o": {"input": 2.5, "output": 10}}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError(`${name} must be a JSON object of model name to {input, output} USD per million tokens`);
  }
  const out: TelemetryConfig['prices'] = {};
  for (const [model, price] of Object.entries(parsed as Record<string, unknown>)) {
    const p = price as { input?: unknown; output?: unknown } | null;
    const ok = (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v >= 0;
    if (!p || typeof p !== 'object' || !ok(p.input) || !ok(p.output) || Object.keys(p).length !== 2) {
      throw new ConfigError(`${name}: "${model}" must be {"input": <USD per 1M tokens>, "output": <USD per 1M tokens>}`);
    }
    out[model] = { input: p.input as number, output: p.output as number };
  }
  return out;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function port(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 65535) throw new ConfigError(`${name} must be a port number 0-65535, got "${raw}"`);
  return value;
}

/** At least two monthly periods and the grace hour (MIN_USAGE_RETENTION_DAYS in src/usage/usage-events.service.ts). */
function usageEventRetentionDays(env: Env): number | undefined {
  const raw = env.USAGE_EVENT_RETENTION_DAYS;
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 63) throw new ConfigError(`USAGE_EVENT_RETENTION_DAYS must be a whole number of days, at least 63 (a monthly billing period and the one before it), got "${raw}"`);
  return value;
}

function nonNegativeInt(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) throw new ConfigError(`${name} must be a non-negative integer, got "${raw}"`);
  return value;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]?.toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

function trustProxy(env: Env): number {
  const raw = env.TRUST_PROXY?.trim().toLowerCase();
  if (raw === undefined || raw === '') return 0;
  if (/^\d{1,2}$/.test(raw)) return Number(raw);
  // `true` is one load balancer: its entry is the last one, whatever the client sent before it.
  if (['1', 'true', 'yes', 'on'].includes(raw)) return 1;
  if (['0', 'false', 'no', 'off'].includes(raw)) return 0;
  throw new ConfigError(`TRUST_PROXY must be true, false or the number of proxies in front (0-99), got "${env.TRUST_PROXY}"`);
}

function url(env: Env, name: string, fallback: string): string {
  const raw = env[name] || fallback;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an absolute URL, got "${raw}"`);
  }
  if (!['http:', 'https:'].includes(parsed.protocol)) throw new ConfigError(`${name} must be http(s), got "${raw}"`);
  return raw.replace(/\/+$/, '');
}

function smtp(env: Env): Config['smtp'] {
  const raw = env.SMTP_URL;
  if (!raw) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError('SMTP_URL must be an smtp:// or smtps:// URL');
  }
  if (parsed.protocol !== 'smtp:' && parsed.protocol !== 'smtps:') throw new ConfigError(`SMTP_URL must be an smtp:// or smtps:// URL, got ${parsed.protocol}`);
  const from = env.SMTP_FROM ?? '';
  if (!/^[^\s@<>"]+@[^\s@<>"]+$/.test(from)) throw new ConfigError('SMTP_FROM must be the sender address (receipts@pay.example.com) when SMTP_URL is set');
  return { url: raw, from };
}

function testClock(env: Env): boolean {
  const on = bool(env, 'TEST_CLOCK', false);
  if (on && env.NODE_ENV === 'production') throw new ConfigError('TEST_CLOCK=true is for development and tests only; it is refused when NODE_ENV=production');
  return on;
}

function webhookAllowLoopback(env: Env): boolean {
  const allow = bool(env, 'WEBHOOK_ALLOW_LOOPBACK', false);
  // An SSRF hole by design: never in production, whatever else is configured.
  if (allow && env.NODE_ENV === 'production') throw new ConfigError('WEBHOOK_ALLOW_LOOPBACK=true is for development and tests only; it is refused when NODE_ENV=production');
  return allow;
}

function cardProcessor(env: Env): CardProcessorConfig {
  const secretKey = env.STRIPE_SECRET_KEY || undefined;
  const webhookSecret = env.STRIPE_WEBHOOK_SECRET || undefined;
  const production = env.NODE_ENV === 'production';
  if (!secretKey && !webhookSecret) {
    if (env.STRIPE_API_BASE_URL) throw new ConfigError('STRIPE_API_BASE_URL is set without STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET');
    // The sandbox accepts test card numbers as payment: production must not take it by accident.
    if (production && !bool(env, 'KASSA_ALLOW_SANDBOX_IN_PRODUCTION', false)) {
      throw new ConfigError(
        'NODE_ENV=production with the sandbox card processor: set STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET to take real card payments, or KASSA_ALLOW_SANDBOX_IN_PRODUCTION=true to run the sandbox on purpose',
      );
    }
    return { kind: 'sandbox' };
  }
  if (!secretKey || !webhookSecret) throw new ConfigError('STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET are set together: one without the other cannot take card payments');
  // Secret (sk_) or restricted (rk_) keys; a publishable key (pk_) cannot create sessions.
  if (!/^(sk|rk)_(test|live)_[A-Za-z0-9]+$/.test(secretKey)) throw new ConfigError('STRIPE_SECRET_KEY must be a Stripe secret or restricted key (sk_test_…, sk_live_…, rk_…)');
  if (!/^whsec_[A-Za-z0-9+/=_-]+$/.test(webhookSecret)) throw new ConfigError("STRIPE_WEBHOOK_SECRET must be the endpoint's signing secret (whsec_…)");
  const connectWebhookSecret = env.STRIPE_CONNECT_WEBHOOK_SECRET || undefined;
  if (connectWebhookSecret && !/^whsec_[A-Za-z0-9+/=_-]+$/.test(connectWebhookSecret)) {
    throw new ConfigError("STRIPE_CONNECT_WEBHOOK_SECRET must be the Connect endpoint's signing secret (whsec_…)");
  }
  let apiBaseUrl: string | undefined;
  if (env.STRIPE_API_BASE_URL) {
    apiBaseUrl = url(env, 'STRIPE_API_BASE_URL', '');
    // The secret key travels to this address: never in clear text, or anywhere but Stripe, in production.
    if (production) throw new ConfigError('STRIPE_API_BASE_URL is for development and tests only; it is refused when NODE_ENV=production');
  }
  return {
    kind: 'stripe',
    secretKey,
    webhookSecret,
    ...(connectWebhookSecret && { connectWebhookSecret }),
    apiBaseUrl,
    timeoutMs: positiveInt(env, 'STRIPE_TIMEOUT_MS', 10_000),
    // How often the worker reads Stripe's event list for events whose webhook was missed.
    reconcileIntervalMs: positiveInt(env, 'STRIPE_RECONCILE_INTERVAL_MS', 60_000),
  };
}

function databasePoolMax(env: Env): number {
  // Migrations hold one connection (an advisory lock) while knex migrates on another.
  const max = positiveInt(env, 'DATABASE_POOL_MAX', 10);
  if (max < 2) throw new ConfigError(`DATABASE_POOL_MAX must be at least 2, got "${max}"`);
  return max;
}

function postgresUrl(name: string, raw: string): string {
  if (!/^postgres(ql)?:\/\//.test(raw) || !URL.canParse(raw)) throw new ConfigError(`${name} must be a postgres:// or postgresql:// connection string`);
  return raw;
}

/** DATABASE_DIRECT_URL and DATABASE_REPLICA_URL: both only with DATABASE_URL (the embedded database has no replicas). */
function databaseTopology(env: Env): Pick<Config, 'databaseDirectUrl' | 'databaseReplicaUrls' | 'databaseReplicaMaxLagMs' | 'databaseReplicaCheckIntervalMs'> {
  const primary = env.DATABASE_URL || undefined;
  const direct = env.DATABASE_DIRECT_URL || undefined;
  const replicaList = (env.DATABASE_REPLICA_URL ?? '').split(',').map((u) => u.trim());
  if (replicaList.length > 1 && replicaList.some((u) => u === '')) throw new ConfigError('DATABASE_REPLICA_URL must be one or more postgres:// connection strings separated by commas, with none empty');
  const replicas = replicaList.filter((u) => u !== '');
  if ((direct || replicas.length > 0) && !primary) {
    throw new ConfigError(`${direct ? 'DATABASE_DIRECT_URL' : 'DATABASE_REPLICA_URL'} needs DATABASE_URL: the embedded database has no pooler and no replicas`);
  }
  if (direct) postgresUrl('DATABASE_DIRECT_URL', direct);
  replicas.forEach((u, i) => postgresUrl(`DATABASE_REPLICA_URL (entry ${i + 1})`, u));
  if (new Set(replicas).size !== replicas.length) throw new ConfigError('DATABASE_REPLICA_URL names one replica twice');
  if (replicas.includes(primary!) || (direct && replicas.includes(direct))) throw new ConfigError('DATABASE_REPLICA_URL must name the replicas, not the primary (DATABASE_URL)');
  const maxLagMs = positiveInt(env, 'DATABASE_REPLICA_MAX_LAG_MS', 2000);
  const checkIntervalMs = positiveInt(env, 'DATABASE_REPLICA_CHECK_INTERVAL_MS', 500);
  if (checkIntervalMs < 50) throw new ConfigError(`DATABASE_REPLICA_CHECK_INTERVAL_MS must be at least 50, got "${checkIntervalMs}"`);
  if (checkIntervalMs >= maxLagMs) throw new ConfigError(`DATABASE_REPLICA_CHECK_INTERVAL_MS (${checkIntervalMs}) must be below DATABASE_REPLICA_MAX_LAG_MS (${maxLagMs}): a replica's lag is only known at each check`);
  return { databaseDirectUrl: direct, databaseReplicaUrls: replicas, databaseReplicaMaxLagMs: maxLagMs, databaseReplicaCheckIntervalMs: checkIntervalMs };
}

function webhookLeaseSeconds(env: Env): number {
  const seconds = positiveInt(env, 'WEBHOOK_DELIVERY_LEASE_SECONDS', 60);
  if (seconds < 15) throw new ConfigError(`WEBHOOK_DELIVERY_LEASE_SECONDS must be at least 15 (the 10 s attempt timeout plus a margin), got "${seconds}"`);
  return seconds;
}

/** Loopback: 127.0.0.0/8, ::1 (and its IPv4-mapped forms), localhost. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return bare === 'localhost' || bare === '::1' || /^(::ffff:)?127(\.\d{1,3}){3}$/.test(bare);
}

/** At least 128 bits, as a generator gives: a hand-typed token is guessed long before 24 characters run out. */
const ADMIN_TOKEN_MIN_BITS = 128;

function adminListener(env: Env): { adminHost: string; adminToken: string | undefined; adminTlsTerminated: boolean } {
  const adminToken = env.ADMIN_TOKEN || undefined;
  if (env.ADMIN_TOKEN !== undefined && env.ADMIN_TOKEN.length < 24) {
    throw new ConfigError('ADMIN_TOKEN must be at least 24 characters');
  }
  const adminHost = env.ADMIN_HOST || '127.0.0.1';
  const adminTlsTerminated = bool(env, 'ADMIN_TLS_TERMINATED', false);
  if (env.NODE_ENV === 'production') {
    if (adminToken && estimateTokenEntropyBits(adminToken) < ADMIN_TOKEN_MIN_BITS) {
      throw new ConfigError(
        `ADMIN_TOKEN looks hand-made: production needs at least ${ADMIN_TOKEN_MIN_BITS} bits from a random generator. Generate one with \`openssl rand -hex 32\` (or leave ADMIN_TOKEN unset: Kassa then generates one into DATA_DIR/admin-token)`,
      );
    }
    if (!isLoopbackHost(adminHost) && !adminTlsTerminated) {
      throw new ConfigError(
        `ADMIN_HOST ${adminHost} is not a loopback address: in production the admin API (and its bearer token) would travel in clear text. Keep ADMIN_HOST=127.0.0.1, or put a TLS-terminating proxy in front of it and set ADMIN_TLS_TERMINATED=true`,
      );
    }
  }
  return { adminHost, adminToken, adminTlsTerminated };
}

function cryptoConfig(env: Env): CryptoConfig {
  try {
    return parseCryptoConfig(env);
  } catch (err) {
    if (err instanceof CryptoConfigError) throw new ConfigError(err.message);
    throw err;
  }
}

export function loadConfig(env: Env = process.env, argv: string[] = process.argv.slice(2)): Config {
  const roleFlag = argv.indexOf('--role');
  const role = (roleFlag >= 0 ? argv[roleFlag + 1] : env.KASSA_ROLE) || 'all';
  if (!['api', 'worker', 'all'].includes(role)) throw new ConfigError(`--role / KASSA_ROLE must be api, worker or all, got "${role}"`);
  const merchantPort = port(env, 'MERCHANT_PORT', 3000);
  const apiPort = port(env, 'API_PORT', 3001);
  let encryptionKey: Buffer | undefined;
  if (env.ENCRYPTION_KEY) {
    encryptionKey = Buffer.from(env.ENCRYPTION_KEY, 'base64');
    if (encryptionKey.length !== 32) throw new ConfigError('ENCRYPTION_KEY must be 32 bytes, base64-encoded (openssl rand -base64 32)');
  }
  const admin = adminListener(env);
  if (env.DATABASE_URL && !/^postgres(ql)?:\/\//.test(env.DATABASE_URL)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// or postgresql:// connection string');
  }
  return {
    nodeEnv: env.NODE_ENV || 'development',
    role: role as Role,
    host: env.HOST || '0.0.0.0',
    merchantPort,
    apiPort,
    adminPort: port(env, 'ADMIN_PORT', 3002),
    adminHost: admin.adminHost,
    adminTlsTerminated: admin.adminTlsTerminated,
    publicBaseUrl: url(env, 'PUBLIC_BASE_URL', `http://localhost:${merchantPort}`),
    publicApiUrl: url(env, 'PUBLIC_API_URL', `http://localhost:${apiPort}`),
    databaseUrl: env.DATABASE_URL || undefined,
    databasePoolMax: databasePoolMax(env),
    databasePreparedStatements: bool(env, 'DATABASE_PREPARED_STATEMENTS', true),
    ...databaseTopology(env),
    dataDir: path.resolve(env.DATA_DIR || './data'),
    adminToken: admin.adminToken,
    encryptionKey,
    logLevel: env.LOG_LEVEL || 'info',
    seedDemo: bool(env, 'KASSA_SEED_DEMO', true),
    trustProxy: trustProxy(env),
    merchantRateLimitPerMinute: nonNegativeInt(env, 'MERCHANT_RATE_LIMIT_PER_MINUTE', 6000),
    hostedRateLimitPerMinute: nonNegativeInt(env, 'HOSTED_RATE_LIMIT_PER_MINUTE', 120),
    hostedWriteRateLimitPerMinute: nonNegativeInt(env, 'HOSTED_WRITE_RATE_LIMIT_PER_MINUTE', 30),
    sandboxSettleDelayMs: nonNegativeInt(env, 'SANDBOX_SETTLE_DELAY_MS', 5000),
    webhookAllowLoopback: webhookAllowLoopback(env),
    testClock: testClock(env),
    smtp: smtp(env),
    webhookLeaseSeconds: webhookLeaseSeconds(env),
    webhookBatchSize: positiveInt(env, 'WEBHOOK_DELIVERY_BATCH_SIZE', 50),
    webhookPollMs: positiveInt(env, 'WEBHOOK_DELIVERY_POLL_MS', 100),
    webhookRetentionDays: positiveInt(env, 'WEBHOOK_RETENTION_DAYS', 30),
    usageEventRetentionDays: usageEventRetentionDays(env),
    crypto: cryptoConfig(env),
    // Last: a configuration error elsewhere is named before the card processor's production check.
    cardProcessor: cardProcessor(env),
    telemetry: {
      monthlyTraceQuota: positiveInt(env, 'TELEMETRY_MONTHLY_TRACE_QUOTA', 1_000_000),
      rateLimit: positiveInt(env, 'TELEMETRY_RATE_LIMIT', 1200),
      rateLimitWindowSeconds: positiveInt(env, 'TELEMETRY_RATE_LIMIT_WINDOW_SECONDS', 60),
      prices: prices(env, 'TELEMETRY_PRICES'),
    },
  };
}

/**
 * The configured values that are secrets wherever they appear: the logger blanks them by value
 * (src/kernel/redaction.ts). The admin token and encryption key, the database password, the
 * parts of each chain's RPC URL that may hold the provider's key, and the Stripe secrets.
 */
export function configSecrets(config: Config): string[] {
  const secrets = [config.adminToken, config.encryptionKey?.toString('base64'), config.encryptionKey?.toString('hex')];
  for (const databaseUrl of [config.databaseUrl, config.databaseDirectUrl, ...config.databaseReplicaUrls]) {
    if (!databaseUrl || !URL.canParse(databaseUrl)) continue;
    const database = new URL(databaseUrl);
    secrets.push(database.password);
    try {
      secrets.push(decodeURIComponent(database.password));
    } catch {
      // Not percent-encoded text: the raw form is the one that can appear.
    }
  }
  for (const chain of config.crypto.chains) secrets.push(...urlSecretParts(chain.rpcUrl));
  if (config.cardProcessor.kind === 'stripe') secrets.push(config.cardProcessor.secretKey, config.cardProcessor.webhookSecret, config.cardProcessor.connectWebhookSecret);
  // The SMTP password (SMTP_URL's user info), raw and decoded.
  if (config.smtp && URL.canParse(config.smtp.url)) {
    const password = new URL(config.smtp.url).password;
    secrets.push(password);
    try {
      secrets.push(decodeURIComponent(password));
    } catch {
      // Not percent-encoded text.
    }
  }
  return secrets.filter((value): value is string => Boolean(value));
}
