/**
 * Starting Kassa: reads config, opens and migrates the database, starts the listeners (role `api`
 * or `all`) and the background worker (role `worker` or `all`), and shuts down cleanly on SIGTERM.
 * src/main.ts runs it; the checkout benchmark runs it with its floor route added.
 */
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { configSecrets, loadConfig, ConfigError, type Config } from './config.js';
import { migrateLatest, openDatabase, type Database } from './db/knex.js';
import { lockDataDir, type DataDirLock } from './db/data-dir-lock.js';
import { ShiftedClock, systemClock } from './kernel/clock.js';
import { createLogger, type Logger } from './kernel/logger.js';
import { SecretValues } from './kernel/redaction.js';
import { SecretBox } from './kernel/secrets.js';
import { StartupError } from './kernel/startup-error.js';
import { adminTokenFor, encryptionKeyFor } from './kernel/local-secrets.js';
import { KnexKeyCheckRepository } from './encryption-key/key-check.repository.js';
import { verifyEncryptionKey } from './encryption-key/key-check.service.js';
import { createServices, type Services } from './services.js';
import { createAdminApp, createMerchantApp, createPlatformApp, metricsAccess, type AppDeps } from './apps.js';
import type { Router } from 'express';
import { startWorker, type Worker } from './worker.js';
import { workerJobs } from './jobs.js';
import { Metrics } from './observability/metrics.js';
import { KnexMetricsRepository } from './observability/metrics.repository.js';
import { createWorkerStatusApp } from './observability/http.js';
import { buildConsole } from './console/build.js';

/** Where a listener binds, with the settings that chose it (for the message when it cannot). */
interface Address {
  port: number;
  portVariable: 'MERCHANT_PORT' | 'API_PORT' | 'ADMIN_PORT';
  host: string;
  hostVariable: 'HOST' | 'ADMIN_HOST';
}

function bindFailure(err: NodeJS.ErrnoException, { port, portVariable, host, hostVariable }: Address): StartupError {
  switch (err.code) {
    case 'EADDRINUSE':
      return new StartupError(`${portVariable} ${port} on ${host} is already in use by another process: stop that process or set ${portVariable} to a free port`);
    case 'EACCES':
      return new StartupError(`${portVariable} ${port} on ${host}: permission denied (ports below 1024 need privileges): set ${portVariable} to a port from 1024 up`);
    case 'EADDRNOTAVAIL':
      return new StartupError(`${hostVariable} ${host} is not an address of this machine (listening on ${portVariable} ${port})`);
    default:
      return new StartupError(`cannot listen on ${host}:${port} (${hostVariable}, ${portVariable}): ${err.message}`);
  }
}

// Not app.listen: Express 5 hands a bind error to the listen callback as if it had listened.
async function listen(app: import('express').Express, address: Address): Promise<Server> {
  const server = createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => reject(bindFailure(err, address)));
    server.listen(address.port, address.host, resolve);
  });
  return server;
}

const ADMIN_CLI = 'npm run -s admin --';
// An organization's name is anyone's text: no terminal control sequences reach the operator's screen.
const printable = (text: string) => text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');

/**
 * Tells the operator what to do next on every start of the API: the demo organization and key on
 * the first start of an empty embedded database (the key shown that once), else the organization
 * to use, or how to create one. Plain text for a terminal; one log line in production.
 */
async function greet(config: Config, services: Services, logger: Logger): Promise<void> {
  const say = (lines: string[]) => {
    if (config.nodeEnv === 'production') logger.info(lines.map((line) => line.trim()).filter(Boolean).join(' '));
    else process.stdout.write(['', ...lines, ''].join('\n') + '\n');
  };
  const count = await services.orgs.countOrganizations();
  if (count === 0 && config.seedDemo && !config.databaseUrl) {
    const org = await services.orgs.createOrganization({ name: 'Demo organization' });
    const key = await services.orgs.createApiKey(org.id, { name: 'demo' });
    logger.info({ orgId: org.id, apiKeyId: key.id }, 'created demo organization and API key');
    // The demo organization's owner, with a one-time sign-in link for the console (development
    // only: never in production, where the operator invites the first owner with the CLI).
    const signIn = config.nodeEnv === 'production' ? undefined : await demoOwnerSignInLink(services, org.id);
    // Printed to the terminal once, deliberately outside the logger (which never carries keys).
    process.stdout.write(
      [
        '',
        'Kassa demo organization created (shown once; set KASSA_SEED_DEMO=false to skip):',
        `  orgId:   ${org.id}`,
        `  API key: ${key.key}`,
        '',
        'Try it:',
        `  curl -s ${config.publicBaseUrl}/v1/me -H 'X-API-Key: ${key.key}'`,
        '',
        ...(signIn
          ? [
              `Console: a one-time sign-in link for the demo owner (${signIn.email}), valid 15 minutes:`,
              `  ${signIn.url}`,
              `  (to sign in with a password afterwards: ${ADMIN_CLI} user reset-password --email ${signIn.email})`,
              '',
            ]
          : []),
      ].join('\n') + '\n',
    );
    return;
  }
  if (count === 0) {
    const why = config.databaseUrl ? 'the demo organization is only created on the embedded database' : 'KASSA_SEED_DEMO=false';
    say([
      `Kassa has no organization yet (${why}). Create one, then an API key for it:`,
      `  ${ADMIN_CLI} org create --name "My shop"`,
      `  ${ADMIN_CLI} apikey create --org ORG_… --name backend`,
    ]);
    return;
  }
  if (count === 1) {
    const [org] = (await services.orgs.listOrganizations(1, 1)).records;
    // API keys are stored hashed: the one printed at creation cannot be shown again.
    say([
      `Kassa organization: ${org!.id} (${printable(org!.name)}). API keys are shown only when created; to make a new one:`,
      `  ${ADMIN_CLI} apikey create --org ${org!.id} --name backend`,
    ]);
    return;
  }
  say([
    `Kassa has ${count} organizations. List them, then make an API key for one (keys are shown only when created):`,
    `  ${ADMIN_CLI} org list`,
    `  ${ADMIN_CLI} apikey create --org ORG_… --name backend`,
  ]);
}

const DEMO_OWNER_EMAIL = 'owner@demo.kassa.localhost';

/** Makes the demo owner (no password yet) and a one-time sign-in link for them. */
async function demoOwnerSignInLink(services: Services, orgId: string): Promise<{ email: string; url: string }> {
  const accounts = services.modules.accounts.accounts;
  const { user } = await accounts.ensureMember(orgId, DEMO_OWNER_EMAIL, 'owner', 'Demo owner');
  const { url } = await accounts.createSignInLink(orgId, user.id);
  return { email: DEMO_OWNER_EMAIL, url };
}

/**
 * Migrations take a session advisory lock and build indexes CONCURRENTLY, which a pooler in
 * transaction mode cannot carry: with DATABASE_DIRECT_URL they run on a connection of their own
 * to the server itself, closed once they are done.
 */
async function migrate(config: Config, database: Database, logger: Logger): Promise<void> {
  if (!config.databaseDirectUrl || config.databaseDirectUrl === config.databaseUrl) {
    await migrateLatest(database.db);
    return;
  }
  const direct = await openDatabase({ databaseUrl: config.databaseDirectUrl, poolMax: 2, preparedStatements: false, logger });
  try {
    await migrateLatest(direct.db);
  } finally {
    await direct.close();
  }
}

/** What the start opened so far, closed in reverse order when a later step fails. */
const opened: Array<() => Promise<unknown>> = [];

/**
 * SIGTERM or SIGINT during the start (before the shutdown below is installed): the step under way
 * (a migration, PGlite writing its files) is let finish, then the start stops at the next step,
 * closes what it opened (listeners, the database, the DATA_DIR lock) and exits 0. Node's default
 * (killed by the signal mid-write) would leave an embedded database to recover on its next start.
 */
let stopRequested: string | undefined;
/** The started process's clean shutdown, once installed. */
let stopStarted: ((signal: string) => void) | undefined;
class StopDuringStart extends Error {}
/** Ends the start here when a stop was asked for during the step before. */
function unlessStopped<T>(value: T): T {
  if (stopRequested) throw new StopDuringStart(stopRequested);
  return value;
}

export interface BootOptions {
  /** Routes mounted on the merchant listener besides the product's (the benchmark's floor route). */
  merchantRoutes?: (router: Router, deps: AppDeps) => void;
}

async function start(options: BootOptions): Promise<void> {
  const config = loadConfig();
  const secretValues = new SecretValues();
  for (const value of configSecrets(config)) secretValues.add(value);
  const logger = createLogger({ level: config.logLevel, secretValues });
  const clock = config.testClock ? new ShiftedClock() : systemClock;
  if (!config.databaseUrl && config.role !== 'all') {
    throw new ConfigError('The embedded database can be opened by one process only: --role api/worker needs DATABASE_URL');
  }
  let lock: DataDirLock | undefined;
  if (!config.databaseUrl) {
    const held = await lockDataDir(config.dataDir, {
      now: clock.now(),
      onLost: (err) => {
        // Another process may have the folder now: stop writing to it at once, without closing.
        process.stderr.write(`Kassa stopped: it lost its lock on DATA_DIR ${config.dataDir}, another process may have taken the folder over (${err.message})\n`);
        process.exit(1);
      },
    });
    lock = held;
    opened.push(() => held.release());
    unlessStopped(undefined);
  }
  const database: Database = await openDatabase(
    config.databaseUrl
      ? {
          databaseUrl: config.databaseUrl,
          poolMax: config.databasePoolMax,
          preparedStatements: config.databasePreparedStatements,
          replicaUrls: config.databaseReplicaUrls,
          replicaMaxLagMs: config.databaseReplicaMaxLagMs,
          replicaCheckIntervalMs: config.databaseReplicaCheckIntervalMs,
          logger,
        }
      : { dataDir: path.join(config.dataDir, 'pgdata'), logger },
  );
  opened.push(() => database.close());
  unlessStopped(undefined);
  unlessStopped(await migrate(config, database, logger));
  const encryptionKey = unlessStopped(await encryptionKeyFor(config.dataDir, config.encryptionKey));
  secretValues.add(encryptionKey.key.toString('base64'));
  secretValues.add(encryptionKey.key.toString('hex'));
  const secretBox = new SecretBox(encryptionKey.key);
  // Before anything is sealed with the key (the first signing key below).
  const keyCheck = unlessStopped(await verifyEncryptionKey({ repo: new KnexKeyCheckRepository(database.db), box: secretBox, clock, keySource: encryptionKey.source }));
  if (keyCheck === 'recorded') logger.info('recorded the encryption key check value: later starts with another key are refused');
  const metrics = new Metrics({
    repo: new KnexMetricsRepository(database.db),
    clock,
    role: config.role,
    database: { pool: () => database.pool(), replicas: () => database.reads.status() },
  });
  const services = createServices({ db: database.db, reads: database.reads, clock, secretBox, config, logger, metrics });
  unlessStopped(await services.signingKeys.ensureKey());
  const adminToken = unlessStopped(await adminTokenFor(config.dataDir, config.adminToken));
  secretValues.add(adminToken);
  // Ready means ready: /readyz says 503 "starting" until every listener is up and the operator
  // has been greeted (the demo organization exists), not as soon as the first listener opens.
  let started = false;
  const deps: AppDeps = { config, database, clock, logger, services, adminToken, metrics, started: () => started };

  const servers: Server[] = [];
  const serve = async (app: import('express').Express, address: Address) => {
    const server = await listen(app, address);
    servers.push(server);
    opened.push(() => new Promise((resolve) => {
      server.close(resolve);
      server.closeAllConnections();
    }));
    unlessStopped(undefined);
  };
  const publicAddress = (port: number, portVariable: 'MERCHANT_PORT' | 'API_PORT'): Address => ({ port, portVariable, host: config.host, hostVariable: 'HOST' });
  const adminAddress: Address = { port: config.adminPort, portVariable: 'ADMIN_PORT', host: config.adminHost, hostVariable: 'ADMIN_HOST' };
  if (config.role !== 'worker') {
    // The console's bundles (web/dist/) are rebuilt when its sources changed since `npm install`;
    // a failed build leaves the API serving and says why (the console answers "not built").
    await buildConsole().then(
      (built) => built.built && logger.info({ script: built.script }, 'built the console (its sources changed)'),
      (err: Error) => logger.error({ err: err.message }, 'could not build the console (npm run build:console says why)'),
    );
    unlessStopped(undefined);
    const merchantRoutes = options.merchantRoutes;
    await serve(
      await createMerchantApp(deps, merchantRoutes && { extraRoutes: (router) => merchantRoutes(router, deps) }),
      publicAddress(config.merchantPort, 'MERCHANT_PORT'),
    );
    await serve(await createPlatformApp(deps), publicAddress(config.apiPort, 'API_PORT'));
    await serve(await createAdminApp(deps), adminAddress);
    logger.info(
      {
        merchant: config.publicBaseUrl,
        api: config.publicApiUrl,
        admin: `http://${config.adminHost}:${config.adminPort}`,
        database: database.kind,
      },
      'Kassa is listening',
    );
    unlessStopped(await greet(config, services, logger));
    started = true;
  } else {
    // A worker has no API listener; its admin port answers /healthz, /readyz and /metrics only.
    const workerReadiness = async () => {
      if (!started) throw new Error('Kassa is starting');
      await database.db.raw('select 1');
    };
    await serve(createWorkerStatusApp(metrics, workerReadiness, metricsAccess(config, adminToken)), adminAddress);
    logger.info({ status: `http://${config.adminHost}:${config.adminPort}`, database: database.kind }, 'Kassa worker started');
  }
  opened.length = 0;

  let worker: Worker | undefined;
  if (config.role !== 'api') {
    worker = startWorker(workerJobs(deps), logger);
  }
  started = true;

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), 10_000);
    force.unref();
    await Promise.all(
      servers.map((server) => new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      })),
    );
    await worker?.stop();
    await database.close();
    await lock?.release();
    process.exit(0);
  };
  stopStarted = (signal) => void shutdown(signal);
  // A stop asked for after the last step of the start: the shutdown, now.
  if (stopRequested) stopStarted(stopRequested);
}

/** Starts Kassa, or explains on stderr why it cannot and exits 1. */
export function boot(options: BootOptions = {}): void {
  const onSignal = (signal: string) => {
    if (stopStarted) stopStarted(signal);
    else stopRequested ??= signal;
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  start(options).catch(async (err) => {
    if (err instanceof StopDuringStart) {
      for (const close of opened.reverse()) await close().catch(() => {});
      process.stdout.write(`Kassa stopped during its start (${err.message}): closed what it had opened\n`);
      process.exit(0);
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`Configuration error: ${err.message}\n`);
    } else if (err instanceof StartupError) {
      process.stderr.write(`Kassa failed to start: ${err.message}\n`);
    } else {
      process.stderr.write(`Kassa failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
    }
    for (const close of opened.reverse()) await close().catch(() => {});
    process.exit(1);
  });
}
