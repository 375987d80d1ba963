/**
 * No secret reaches a log: a real server process (`src/main.ts`, debug level) is driven with
 * every kind of credential and card data it accepts, valid and invalid, and its whole output
 * (stdout and stderr, from start to shutdown) is searched for each of them. Runs on the embedded
 * database, or on PostgreSQL when TEST_DATABASE_URL is set.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ONE_TIME,
  createCheckout,
  createDatabase,
  http,
  newDeployment,
  payOnHostedPage,
  provisionMerchant,
  startKassa,
  type KassaProcess,
  type ThrowAwayDatabase,
} from '../../tools/cluster.js';
import { createAgentClient } from '../../src/client/agent.js';

let server: KassaProcess;
let db: ThrowAwayDatabase | undefined;
let adminToken: string;
let encryptionKey: string;
let output = '';
const secrets: Record<string, string> = {};

beforeAll(async () => {
  const serverUrl = process.env.TEST_DATABASE_URL;
  db = serverUrl ? await createDatabase(serverUrl, 'kassa_logs') : undefined;
  // Without DATABASE_URL the process opens its own embedded database in a temporary DATA_DIR.
  const deployment = newDeployment(db?.url ?? '', { LOG_LEVEL: 'debug', MERCHANT_RATE_LIMIT_PER_MINUTE: '5' });
  adminToken = deployment.adminToken;
  encryptionKey = deployment.encryptionKey;
  // The embedded database migrates from scratch in the child: slow on a busy CI machine.
  server = await startKassa(deployment, { role: 'all', name: 'logs', readyTimeoutMs: 170_000 });
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await db?.drop();
});

describe('logs of a real run', () => {
  it('never contain an API key, token, Agent Wallet Key or card number it handled', async () => {
    const merchant = await provisionMerchant(server.adminUrl, adminToken, 'Log audit');
    secrets['merchant API key'] = merchant.apiKey;
    const me = (key: string) => http('GET', `${server.merchantUrl}/v1/me`, { headers: { 'X-API-Key': key } });
    expect((await me(merchant.apiKey)).status).toBe(200);
    secrets['a wrong API key'] = `${merchant.apiKey.slice(0, -4)}abcd`;
    expect((await me(secrets['a wrong API key']!)).status).toBe(401);
    const admin = { Authorization: `Bearer ${adminToken}` };
    // A second key goes over the limit of 5 per minute: the 429 path logs too.
    const second = await http('POST', `${server.adminUrl}/v1/orgs/${merchant.orgId}/api-keys`, { headers: admin, body: { name: 'second' } });
    expect(second.status).toBe(201);
    secrets['rate-limited API key'] = second.json.data.key;
    for (let i = 0; i < 5; i++) expect((await me(secrets['rate-limited API key']!)).status).toBe(200);
    expect((await me(secrets['rate-limited API key']!)).status).toBe(429);

    secrets['a wrong admin token'] = `kadm_${randomBytes(18).toString('hex')}`;
    expect((await http('GET', `${server.adminUrl}/v1/orgs`, { headers: { Authorization: `Bearer ${secrets['a wrong admin token']}` } })).status).toBe(401);

    const project = await http('POST', `${server.adminUrl}/v1/orgs/${merchant.orgId}/telemetry-projects`, { headers: admin, body: { name: 'Logs' } });
    expect(project.status).toBe(201);
    const telemetryKey = await http('POST', `${server.adminUrl}/v1/orgs/${merchant.orgId}/telemetry-keys`, { headers: admin, body: { projectId: project.json.data.projectId } });
    expect(telemetryKey.status).toBe(201);
    secrets['telemetry key'] = telemetryKey.json.data.key;
    expect((await http('GET', `${server.apiUrl}/v1/projects`, { headers: { Authorization: `Bearer ${secrets['telemetry key']}` } })).status).toBe(200);
    expect((await http('GET', `${server.apiUrl}/v1/projects`, { headers: { Authorization: `Bearer ${secrets['telemetry key']}x` } })).status).toBe(401);

    const wallet = await http('POST', `${server.adminUrl}/v1/orgs/${merchant.orgId}/wallets`, { headers: admin, body: { name: 'Logs' } });
    expect(wallet.status).toBe(201);
    const agent = await http('POST', `${server.adminUrl}/v1/orgs/${merchant.orgId}/agents`, { headers: admin, body: { name: 'Logs agent', walletId: wallet.json.data.walletId } });
    expect(agent.status).toBe(201);
    secrets['Agent Wallet Key'] = agent.json.data.agentWalletKey;
    const client = createAgentClient({ agentWalletKey: secrets['Agent Wallet Key']!, baseUrl: server.apiUrl });
    await client.history({ limit: 1 });

    // Card data typed on the hosted page, paid and declined.
    secrets['card number'] = '4242424242424242';
    secrets['declined card number'] = '4000000000000002';
    const paid = await createCheckout(server.merchantUrl, merchant.apiKey, ONE_TIME, 'logs-1');
    expect(await payOnHostedPage(paid.url, secrets['card number'])).toBe(303);
    const declined = await createCheckout(server.merchantUrl, merchant.apiKey, ONE_TIME, 'logs-2');
    expect(await payOnHostedPage(declined.url, secrets['declined card number'])).toBe(402);

    // A body that carries a key where it does not belong is refused without being echoed.
    const smuggled = await http('POST', `${server.merchantUrl}/v1/checkout-sessions`, {
      headers: { 'X-API-Key': secrets['a wrong API key']!, 'Idempotency-Key': 'logs-3' },
      body: { ...ONE_TIME, password: merchant.apiKey },
    });
    expect(smuggled.status).toBe(401);

    secrets['admin token'] = adminToken;
    secrets['encryption key'] = encryptionKey;
    await server.stop();
    output = server.output();
    // The run did log (requests, failures), so an empty log cannot pass for a clean one.
    expect(output).toContain('"path":"/v1/me"');
    expect(output).toContain('"status":401');
    expect(output).toContain('"status":429');
    expect(output).toContain('shutting down');
    for (const [what, value] of Object.entries(secrets)) {
      expect(value.length, what).toBeGreaterThan(12);
      expect(output.includes(value), `${what} appears in the logs`).toBe(false);
    }
    // Card numbers also not in a spaced or partial form beyond the last four digits.
    expect(output).not.toMatch(/4242[ -]?4242[ -]?4242/);
  }, 120_000);
});
