/**
 * Entry point: reads config, opens and migrates the database, starts the listeners (role `api`
 * or `all`) and the background worker (role `worker` or `all`), and shuts down cleanly on SIGTERM.
 */
import type { Server } from 'node:http';
import path from 'node:path';
import { configSecrets, loadConfig, ConfigError, type Config } from './config.js';
import { migrateLatest, openDatabase, type Database } from './db/knex.js';
import { systemClock } from './kernel/clock.js';
import { createLogger, type Logger } from './kernel/logger.js';
import { SecretValues } from './kernel/redaction.js';
import { SecretBox } from './kernel/secrets.js';
import { adminTokenFor, encryptionKeyFor } from './kernel/local-secrets.js';
import { createServices, type Services } from './services.js';
import { createAdminApp, createMerchantApp, createPlatformApp, type AppDeps } from './apps.js';
import { startWorker, workerJobs, type Worker } from './worker.js';
import { Metrics } from './observability/metrics.js';
import { KnexMetricsRepository } from './observability/metrics.repository.js';
import { createWorkerStatusApp } from './observability/http.js';

async function listen(app: import('express').Express, port: number, host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host, () => resolve(server));
    server.once('error', reject);
  });
}

/** First start on an empty embedded database: a demo organization and key, printed once. */
async function seedDemo(config: Config, services: Services, logger: Logger): Promise<void> {
  if (!config.seedDemo || config.databaseUrl) return;
  if ((await services.orgs.countOrganizations()) > 0) return;
  const org = await services.orgs.createOrganization({ name: 'Demo organization' });
  const key = await services.orgs.createApiKey(org.id, { name: 'demo' });
  logger.info({ orgId: org.id, apiKeyId: key.id }, 'created demo organization and API key');
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
    ].join('\n') + '\n',
  );
}

async function main(): Promise<void> {
  const config = loadConfig();
  const secretValues = new SecretValues();
  for (const value of configSecrets(config)) secretValues.add(value);
  const logger = createLogger({ level: config.logLevel, secretValues });
  if (!config.databaseUrl && config.role !== 'all') {
    throw new ConfigError('The embedded database can be opened by one process only: --role api/worker needs DATABASE_URL');
  }
  const database: Database = await openDatabase(
    config.databaseUrl ? { databaseUrl: config.databaseUrl, poolMax: config.databasePoolMax, preparedStatements: config.databasePreparedStatements } : { dataDir: path.join(config.dataDir, 'pgdata') },
  );
  await migrateLatest(database.db);
  const clock = systemClock;
  const encryptionKey = await encryptionKeyFor(config.dataDir, config.encryptionKey);
  secretValues.add(encryptionKey.toString('base64'));
  secretValues.add(encryptionKey.toString('hex'));
  const secretBox = new SecretBox(encryptionKey);
  const metrics = new Metrics({ repo: new KnexMetricsRepository(database.db), clock, role: config.role });
  const services = createServices({ db: database.db, clock, secretBox, config, logger, metrics });
  await services.signingKeys.ensureKey();
  const adminToken = await adminTokenFor(config.dataDir, config.adminToken);
  secretValues.add(adminToken);
  const deps: AppDeps = { config, database, clock, logger, services, adminToken, metrics };

  const servers: Server[] = [];
  if (config.role !== 'worker') {
    servers.push(await listen(await createMerchantApp(deps), config.merchantPort, config.host));
    servers.push(await listen(await createPlatformApp(deps), config.apiPort, config.host));
    servers.push(await listen(await createAdminApp(deps), config.adminPort, config.adminHost));
    logger.info(
      {
        merchant: config.publicBaseUrl,
        api: config.publicApiUrl,
        admin: `http://${config.adminHost}:${config.adminPort}`,
        database: database.kind,
      },
      'Kassa is listening',
    );
    await seedDemo(config, services, logger);
  } else {
    // A worker has no API listener; its admin port answers /healthz, /readyz and /metrics only.
    servers.push(await listen(createWorkerStatusApp(metrics, async () => void (await database.db.raw('select 1'))), config.adminPort, config.adminHost));
    logger.info({ status: `http://${config.adminHost}:${config.adminPort}`, database: database.kind }, 'Kassa worker started');
  }

  let worker: Worker | undefined;
  if (config.role !== 'api') {
    worker = startWorker(workerJobs(deps), logger);
  }

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
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`Configuration error: ${err.message}\n`);
  } else {
    process.stderr.write(`Kassa failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  }
  process.exit(1);
});
