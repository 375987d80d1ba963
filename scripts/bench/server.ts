/**
 * The process the benchmarks measure: the platform API (telemetry routes) on PostgreSQL, in
 * production mode, plus one provisioned organization with a project and key per environment.
 * Prints one JSON line `{"port","orgId","projects"}` on stdout once listening. Run by common.ts.
 *
 * BENCH_API_WORKERS (default 1) API processes share the port through node:cluster, the way a
 * deployment runs one API process per core: everything they share (rate-limit windows, quota,
 * rollup locks) lives in PostgreSQL, so any number of API processes can serve one database.
 */
import cluster from 'node:cluster';
import { randomBytes } from 'node:crypto';
import net, { type AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config.js';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { systemClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices } from '../../src/services.js';
import { createPlatformApp } from '../../src/apps.js';

const config = loadConfig({ ...process.env, NODE_ENV: 'production', KASSA_ALLOW_SANDBOX_IN_PRODUCTION: 'true' }, []);
const logger = createLogger({ level: config.logLevel });
const workers = Number(process.env.BENCH_API_WORKERS ?? 1);

async function open() {
  const database = await openDatabase({ databaseUrl: config.databaseUrl!, poolMax: Number(process.env.BENCH_POOL_MAX ?? 10) });
  const services = createServices({ db: database.db, clock: systemClock, secretBox: new SecretBox(randomBytes(32)), config, logger });
  return { database, services };
}

async function serve(port: number): Promise<number> {
  const { database, services } = await open();
  const app = await createPlatformApp({ config, database, clock: systemClock, logger, services, adminToken: randomBytes(16).toString('hex') });
  const server = app.listen(port, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  // Large ingest bodies on a busy box: do not let Node's defaults cut a slow request short.
  server.requestTimeout = 120_000;
  server.keepAliveTimeout = 65_000;
  process.on('SIGTERM', () => {
    server.close();
    server.closeAllConnections();
    void database.close().then(() => process.exit(0));
  });
  return (server.address() as AddressInfo).port;
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

if (cluster.isPrimary) {
  const { database, services } = await open();
  await migrateLatest(database.db);
  const environments = (process.env.BENCH_ENVIRONMENTS ?? 'production').split(',');
  const org = await services.orgs.createOrganization({ name: 'Bench' });
  const projects: Array<{ projectId: string; environment: string; key: string }> = [];
  for (const environment of environments) {
    const project = await services.telemetry.projects.create(org.id, { name: `Bench ${environment}`, environment: environment as 'production' });
    const key = await services.telemetry.keys.create(org.id, { projectId: project.id });
    projects.push({ projectId: project.id, environment, key: key.key });
  }
  await database.close();
  let port: number;
  if (workers <= 1) {
    port = await serve(0);
  } else {
    port = await freePort();
    let listening = 0;
    await new Promise<void>((resolve) => {
      for (let i = 0; i < workers; i++) {
        const worker = cluster.fork({ BENCH_PORT: String(port) });
        worker.on('listening', () => {
          if (++listening === workers) resolve();
        });
      }
    });
    process.on('SIGTERM', () => {
      for (const worker of Object.values(cluster.workers ?? {})) worker?.kill('SIGTERM');
      cluster.on('exit', () => {
        if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
      });
    });
  }
  process.stdout.write(`${JSON.stringify({ port, orgId: org.id, projects, pids: [process.pid, ...Object.values(cluster.workers ?? {}).map((w) => w!.process.pid)] })}\n`);
} else {
  await serve(Number(process.env.BENCH_PORT));
}
