/**
 * The cluster tool's readiness: a server that took the child's admin port first and answers
 * anything (a catch-all receiver) is not taken for the child. Seen in CI on PostgreSQL: such a
 * server answered /readyz and the admin API, the start "succeeded", and the next call met
 * ECONNREFUSED with the child still starting (stripe-secrets-in-logs, secrets-in-logs).
 */
import { rm } from 'node:fs/promises';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDataDir, migratedDatabase } from '../harness/migrated-data-dir.js';
import { freePort, newDeployment, startKassa, type ThrowAwayDatabase } from '../../tools/cluster.js';

let impostor: http.Server;
let port: number;
let db: ThrowAwayDatabase | undefined;
let dataDir: string | undefined;

beforeAll(async () => {
  const serverUrl = process.env.TEST_DATABASE_URL;
  // The run's migrated database: the child reaches its bind without migrating from scratch.
  db = serverUrl ? await migratedDatabase(serverUrl, 'kassa_cluster_ready') : undefined;
  dataDir = serverUrl ? undefined : await migratedDataDir('kassa-cluster-ready-');
  port = await freePort();
  impostor = http.createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"data":[]}'));
  await new Promise<void>((resolve) => impostor.listen(port, '127.0.0.1', resolve));
}, 60_000);

afterAll(async () => {
  await new Promise<void>((resolve) => impostor?.close(() => resolve()));
  await db?.drop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describe('startKassa', () => {
  it('does not take a catch-all server on its admin port for the child: the child loses the port and the start says so', async () => {
    const deployment = newDeployment(db?.url ?? '', { ...(dataDir ? { DATA_DIR: dataDir } : {}), LOG_LEVEL: 'warn' });
    const started = startKassa(deployment, { role: 'all', name: 'impostor-port', adminPort: port, readyTimeoutMs: 120_000 });
    await expect(started).rejects.toThrow(/a port was taken before it could bind/);
  }, 150_000);
});
