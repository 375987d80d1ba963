/**
 * The API process of `npm run bench:checkout`: the three production listeners, composed as
 * `src/main.ts --role api` composes them, plus the benchmark's floor route (tools/bench-floor.ts)
 * on the merchant listener, behind the same middleware. The product never mounts the floor; only
 * this harness does. Started by scripts/bench/checkout.ts through tools/cluster.ts (startKassa).
 */
import type { Server } from 'node:http';
import { loadConfig } from '../../src/config.js';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { systemClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { adminTokenFor, encryptionKeyFor } from '../../src/kernel/local-secrets.js';
import { createServices } from '../../src/services.js';
import { createAdminApp, createMerchantApp, createPlatformApp, type AppDeps } from '../../src/apps.js';
import { Metrics } from '../../src/observability/metrics.js';
import { KnexMetricsRepository } from '../../src/observability/metrics.repository.js';
import { BenchFloorRepository, registerBenchFloor } from '../../tools/bench-floor.js';

const config = loadConfig();
if (!config.databaseUrl) throw new Error('the checkout benchmark runs on PostgreSQL: set DATABASE_URL');
const logger = createLogger({ level: config.logLevel });
const database = await openDatabase({ databaseUrl: config.databaseUrl, poolMax: config.databasePoolMax, preparedStatements: config.databasePreparedStatements });
await migrateLatest(database.db);
const clock = systemClock;
const secretBox = new SecretBox(await encryptionKeyFor(config.dataDir, config.encryptionKey));
const metrics = new Metrics({ repo: new KnexMetricsRepository(database.db), clock, role: 'api' });
const services = createServices({ db: database.db, clock, secretBox, config, logger, metrics });
await services.signingKeys.ensureKey();
const deps: AppDeps = { config, database, clock, logger, services, adminToken: await adminTokenFor(config.dataDir, config.adminToken), metrics };

const floor = new BenchFloorRepository(database.db);
const listen = (app: import('express').Express, port: number, host: string) =>
  new Promise<Server>((resolve, reject) => {
    const server = app.listen(port, host, () => resolve(server));
    server.once('error', reject);
  });
const servers = [
  await listen(await createMerchantApp(deps, { extraRoutes: (router) => registerBenchFloor(router, floor, clock) }), config.merchantPort, config.host),
  await listen(await createPlatformApp(deps), config.apiPort, config.host),
  await listen(await createAdminApp(deps), config.adminPort, config.adminHost),
];
logger.info({ merchant: config.publicBaseUrl }, 'checkout benchmark server listening, with the floor route');

process.on('SIGTERM', () => {
  void Promise.all(servers.map((server) => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  })))
    .then(() => database.close())
    .then(() => process.exit(0));
});
