/**
 * `webhook listen` survives a server restart: `src/main.ts` (what `npm start` runs) as a separate
 * process on a temporary DATA_DIR, the CLI listening and forwarding to a local receiver, the server
 * stopped and started again on the same data; the same listener forwards the next order.paid.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
import { migratedDataDir } from '../harness/migrated-data-dir.js';
import { RECONNECT_CAP_MS, reconnectDelayMs } from '../../scripts/admin/webhook.js';
import { nodeEntryArgs } from '../../tools/node-entry.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const ADMIN_TOKEN = `kadm_listen_${'x'.repeat(24)}`;

let dataDir: string;
let ports: { merchant: number; api: number; admin: number };
let server: ChildProcess | undefined;
let serverOutput = '';

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

async function until(condition: () => boolean | Promise<boolean>, what: () => string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function startServer(): Promise<void> {
  serverOutput = '';
  server = spawn(process.execPath, nodeEntryArgs('src/main.ts'), {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      MERCHANT_PORT: String(ports.merchant),
      API_PORT: String(ports.api),
      ADMIN_PORT: String(ports.admin),
      PUBLIC_BASE_URL: `http://127.0.0.1:${ports.merchant}`,
      PUBLIC_API_URL: `http://127.0.0.1:${ports.api}`,
      ADMIN_TOKEN,
      KASSA_SEED_DEMO: 'false',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  server.stdout!.on('data', (chunk) => (serverOutput += chunk));
  server.stderr!.on('data', (chunk) => (serverOutput += chunk));
  for (const port of Object.values(ports)) {
    await until(
      async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.ok === true,
      () => `port ${port} to be ready:\n${serverOutput.slice(-3000)}`,
    );
  }
}

async function stopServer(): Promise<void> {
  if (!server || server.exitCode !== null) return;
  const exited = new Promise((resolve) => server!.once('exit', resolve));
  server.kill('SIGTERM');
  await exited;
}

async function api(port: number, method: string, route: string, body?: unknown, headers: Record<string, string> = {}): Promise<any> {
  const res = await fetch(`http://127.0.0.1:${port}${route}`, {
    method,
    headers: { ...(body ? { 'Content-Type': 'application/json' } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = (await res.json()) as { data: any };
  expect(res.status, JSON.stringify(json)).toBeLessThan(300);
  return json.data;
}
const admin = (method: string, route: string, body?: unknown) => api(ports.admin, method, route, body, { Authorization: `Bearer ${ADMIN_TOKEN}` });

let paid = 0;
/** A buyer pays a checkout session on the hosted page (sandbox card); returns the order id. */
async function payOrder(apiKey: string, pricingId: string): Promise<string> {
  const session = await api(ports.merchant, 'POST', '/v1/checkout-sessions', { pricingId, customerEmail: `buyer${++paid}@example.com` }, { 'X-API-Key': apiKey, 'Idempotency-Key': `listen-${paid}` });
  const form = new URLSearchParams({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  const res = await fetch(`http://127.0.0.1:${ports.merchant}${new URL(session.url).pathname}/pay`, { method: 'POST', body: form, redirect: 'manual' });
  expect(res.status).toBe(303);
  const read = await api(ports.merchant, 'GET', `/v1/checkout-sessions/${session.id}`, undefined, { 'X-API-Key': apiKey });
  return read.orderId;
}

/** Kassa runs here on the embedded database whatever TEST_DATABASE_URL says (as a new user's first start), so the PostgreSQL run would repeat it unchanged. */
const embeddedOnly = process.env.TEST_DATABASE_URL !== undefined;

beforeAll(async () => {
  if (embeddedOnly) return;
  // The run's migrated database: the restart is this file's subject, not the first start.
  dataDir = await migratedDataDir('kassa-listen-');
  ports = { merchant: await freePort(), api: await freePort(), admin: await freePort() };
  await startServer();
}, 150_000);

afterAll(async () => {
  if (embeddedOnly) return;
  await stopServer();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}, 30_000);

describe.skipIf(embeddedOnly)(skippedUnless('webhook listen across a server restart', 'embeddedOnly'), () => {
  it('stays alive, says once that it lost and regained the server, and forwards the next event', { timeout: 400_000 }, async () => {
    const org = await admin('POST', '/v1/orgs', { name: 'Listening shop' });
    const { key } = await admin('POST', `/v1/orgs/${org.orgId}/api-keys`, { name: 'backend' });
    const product = await admin('POST', `/v1/orgs/${org.orgId}/products`, { name: 'Plan' });
    const { pricingId } = await admin('POST', `/v1/products/${product.productId}/prices`, { amount: 1500, currency: 'USD' });

    const received: string[] = [];
    const receiver = http.createServer((req, res) => {
      received.push(String(req.headers['webhook-id']));
      req.resume().on('end', () => res.writeHead(200).end());
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const forward = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;

    const env: NodeJS.ProcessEnv = { ...process.env, ADMIN_URL: `http://127.0.0.1:${ports.admin}`, ADMIN_TOKEN };
    const listener = spawn(process.execPath, [...nodeEntryArgs('scripts/admin.ts'), 'webhook', 'listen', '--org', org.orgId, '--forward', forward, '--interval-ms', '200'], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    listener.stdout.on('data', (chunk) => (stdout += chunk));
    listener.stderr.on('data', (chunk) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => listener.once('exit', (code) => resolve(code)));
    const forwardedTypes = () =>
      stdout
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as { eventId: string; type: string; status: number });
    try {
      await until(() => stderr.includes('Listening'), () => `the listener to start: ${stderr}`);
      await payOrder(key, pricingId);
      await until(() => forwardedTypes().some((e) => e.type === 'order.paid'), () => `the first order.paid: ${stdout}\n${stderr}`);

      await stopServer();
      await until(() => stderr.includes('Lost the connection'), () => `the listener to notice: ${stderr}`);
      expect(listener.exitCode).toBeNull();
      await startServer();

      await payOrder(key, pricingId);
      await until(() => forwardedTypes().filter((e) => e.type === 'order.paid').length === 2, () => `the second order.paid: ${stdout}\n${stderr}`);
      expect(listener.exitCode).toBeNull();

      const paidEvents = forwardedTypes().filter((e) => e.type === 'order.paid');
      expect(paidEvents.map((e) => e.status)).toEqual([200, 200]);
      expect(received).toEqual(expect.arrayContaining(paidEvents.map((e) => e.eventId)));
      // Quiet: stdout holds only forwarded events; stderr one line to start, one when lost, one when back.
      const status = stderr.trim().split('\n');
      expect(status).toHaveLength(3);
      expect(status[0]).toMatch(/^Listening for events of ORG_/);
      expect(status[1]).toMatch(/^Lost the connection: Cannot reach the admin API/);
      expect(status[2]).toMatch(/^Reconnected to the admin API after \d+ s/);
    } finally {
      listener.kill('SIGINT');
      const code = await exited;
      await new Promise((resolve) => receiver.close(resolve));
      expect(code).toBe(0);
    }
  });
});

describe('reconnection backoff', () => {
  it('doubles from half a second up to the cap, with half of each delay random', () => {
    expect([0, 1, 2, 3].map((attempt) => reconnectDelayMs(attempt, () => 0))).toEqual([250, 500, 1000, 2000]);
    expect([0, 1, 2, 3].map((attempt) => reconnectDelayMs(attempt, () => 1))).toEqual([500, 1000, 2000, 4000]);
    expect(reconnectDelayMs(20, () => 1)).toBe(RECONNECT_CAP_MS);
    expect(reconnectDelayMs(1000, () => 0)).toBe(RECONNECT_CAP_MS / 2);
  });
});
