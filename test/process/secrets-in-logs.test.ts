/**
 * No secret reaches a log: a real server process (`src/main.ts`, debug level) is driven with
 * every kind of credential and card data it accepts, valid and invalid (console passwords, session
 * cookies, CSRF, invite and password reset tokens included), the bearer tokens of the
 * hosted pages' paths, and a chain RPC URL carrying a provider key in its path and query (the node
 * refuses it and echoes the key); its whole output (stdout and stderr, from start to shutdown) is
 * searched for each of them. Runs on the embedded database, or on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MONTHLY,
  ONE_TIME,
  createCheckout,
  cryptoOneTime,
  http,
  newDeployment,
  payOnHostedPage,
  provisionMerchant,
  setReceivingWallet,
  startKassa,
  waitFor,
  type KassaProcess,
  type ThrowAwayDatabase,
} from '../../tools/cluster.js';
import { createAgentClient } from '../../src/client/agent.js';
import { migratedDataDir, migratedDatabase } from '../harness/migrated-data-dir.js';

let server: KassaProcess;
let db: ThrowAwayDatabase | undefined;
let dataDir: string | undefined;
let adminToken: string;
let encryptionKey: string;
let output = '';
const secrets: Record<string, string> = {};
const CHAIN = 31337;
let rpcNode: Server;
let rpcHost: string;

/** A chain node that refuses the provider key of its URL and, as some providers do, repeats it. */
async function startRefusingNode(pathKey: string, queryKey: string): Promise<void> {
  rpcNode = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32001, message: `invalid API key ${pathKey} or ${queryKey}` } }));
    });
  });
  await new Promise<void>((resolve) => rpcNode.listen(0, '127.0.0.1', resolve));
  rpcHost = `127.0.0.1:${(rpcNode.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  const serverUrl = process.env.TEST_DATABASE_URL;
  // The run's migrated database (the first start is not this file's subject).
  db = serverUrl ? await migratedDatabase(serverUrl, 'kassa_logs') : undefined;
  dataDir = serverUrl ? undefined : await migratedDataDir('kassa-logs-');
  secrets['RPC key in the URL path'] = `rpcPathKey${randomBytes(12).toString('hex')}`;
  secrets['RPC key in the URL query'] = `rpcQueryKey${randomBytes(12).toString('hex')}`;
  await startRefusingNode(secrets['RPC key in the URL path'], secrets['RPC key in the URL query']);
  const chains = [{
    chainId: CHAIN, name: 'Local', rpcUrl: `http://${rpcHost}/v2/${secrets['RPC key in the URL path']}?apikey=${secrets['RPC key in the URL query']}`,
    confirmations: 1, explorerUrl: 'https://local.test', blockRange: 10, initialLookback: 0, tokens: { USDC: '0x5FbDB2315678afecb367f032d93F642f64180aa3' },
  }];
  // Without DATABASE_URL the process opens its own embedded database in that DATA_DIR.
  const deployment = newDeployment(db?.url ?? '', {
    ...(dataDir ? { DATA_DIR: dataDir } : {}),
    LOG_LEVEL: 'debug', MERCHANT_RATE_LIMIT_PER_MINUTE: '5', CRYPTO_CHAINS: JSON.stringify(chains), CRYPTO_POLL_INTERVAL_MS: '200',
  });
  adminToken = deployment.adminToken;
  encryptionKey = deployment.encryptionKey;
  server = await startKassa(deployment, { role: 'all', name: 'logs', readyTimeoutMs: 170_000 });
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await db?.drop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
  await new Promise((resolve) => rpcNode?.close(resolve));
});

const tokenOf = (url: string) => new URL(url).pathname.split('/')[2]!;

describe('logs of a real run', () => {
  it('never contain an API key, token, Agent Wallet Key, card number, password, console session, invite or reset token it handled', async () => {
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

    // The hosted pages' bearer tokens, through every page: the access log names routes, not paths.
    secrets['paid checkout page token'] = tokenOf(paid.url);
    secrets['declined checkout page token'] = tokenOf(declined.url);
    const pages = await provisionMerchant(server.adminUrl, adminToken, 'Log audit pages');
    secrets['second merchant API key'] = pages.apiKey;
    const subscription = await createCheckout(server.merchantUrl, pages.apiKey, MONTHLY, 'logs-sub');
    secrets['subscription checkout page token'] = tokenOf(subscription.url);
    expect((await http('GET', subscription.url)).status).toBe(200);
    expect(await payOnHostedPage(subscription.url)).toBe(303);
    const complete = await http('GET', `${subscription.url}/complete`);
    const manage = /href="(\/subscriptions\/manage\/[0-9A-Za-z]+)"/.exec(complete.text)![1]!;
    secrets['subscription manage token'] = manage.split('/').pop()!;
    expect((await http('GET', `${server.merchantUrl}${manage}`)).status).toBe(200);
    expect((await http('GET', `${server.merchantUrl}${manage}/nope`)).status).toBe(404);
    expect((await http('POST', `${server.merchantUrl}${manage}/cancel`)).status).toBe(200);
    const product = await http('POST', `${server.adminUrl}/v1/orgs/${pages.orgId}/products`, { headers: admin, body: { name: 'Linked' } });
    const price = await http('POST', `${server.adminUrl}/v1/products/${product.json.data.productId}/prices`, { headers: admin, body: { amount: 500, currency: 'USD' } });
    const link = await http('POST', `${server.adminUrl}/v1/prices/${price.json.data.pricingId}/payment-links`, { headers: admin });
    expect(link.status).toBe(201);
    secrets['payment link token'] = tokenOf(link.json.data.paymentLinkUrl);
    const opened = await http('GET', `${link.json.data.paymentLinkUrl}?ref=logs`);
    expect(opened.status).toBe(303);
    secrets['payment link checkout page token'] = opened.headers.get('location')!.split('/').pop()!;

    // A crypto session gives the chain watcher an address to watch: its passes fail on the refusing node.
    await setReceivingWallet(server.adminUrl, adminToken, pages.orgId, CHAIN, '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed');
    const crypto = await createCheckout(server.merchantUrl, pages.apiKey, cryptoOneTime(2_000_000), 'logs-crypto');
    secrets['crypto checkout page token'] = tokenOf(crypto.url);
    expect((await http('GET', crypto.url)).status).toBe(200);
    await waitFor('a failed chain watcher pass', async () => server.output().includes('crypto chain watcher pass failed'), 60_000);

    // People (console document): an invite accepted with a password, the session and its CSRF
    // token in use, a wrong password and an unknown address, a password reset and its new password.
    const invite = await http('POST', `${server.adminUrl}/v1/orgs/${pages.orgId}/invites`, { headers: admin, body: { email: 'logs-owner@example.com', role: 'owner' } });
    expect(invite.status).toBe(201);
    const linkToken = (url: string) => new URL(url).hash.slice('#token='.length);
    secrets['invite token'] = linkToken(invite.json.data.url);
    secrets['member password'] = `pw-${randomBytes(12).toString('hex')}`;
    const accepted = await http('POST', `${server.merchantUrl}/v1/console/invites/accept`, { body: { token: secrets['invite token'], password: secrets['member password'] } });
    expect(accepted.status).toBe(200);
    secrets['console session token'] = /__Host-kassa_session=([^;]+)/.exec(accepted.headers.get('set-cookie')!)![1]!;
    secrets['console CSRF token'] = accepted.json.data.csrfToken;
    const cookie = { Cookie: `__Host-kassa_session=${secrets['console session token']}` };
    expect((await http('GET', `${server.merchantUrl}/v1/console/session`, { headers: cookie })).status).toBe(200);
    const consoleKey = await http('POST', `${server.merchantUrl}/v1/console/api-keys`, { headers: { ...cookie, 'X-CSRF-Token': secrets['console CSRF token']! }, body: { name: 'console' } });
    expect(consoleKey.status).toBe(201);
    secrets['API key made in the console'] = consoleKey.json.data.key;
    // The console's developer tools: a telemetry key and Agent Wallet Keys (created, rotated).
    const writing = { ...cookie, 'X-CSRF-Token': secrets['console CSRF token']! };
    const consoleProject = await http('POST', `${server.merchantUrl}/v1/console/telemetry-projects`, { headers: writing, body: { name: 'Console logs' } });
    expect(consoleProject.status).toBe(201);
    const consoleTelemetryKey = await http('POST', `${server.merchantUrl}/v1/console/telemetry-keys`, { headers: writing, body: { projectId: consoleProject.json.data.projectId } });
    expect(consoleTelemetryKey.status).toBe(201);
    secrets['telemetry key made in the console'] = consoleTelemetryKey.json.data.key;
    const consoleAgent = await http('POST', `${server.merchantUrl}/v1/console/agents`, { headers: writing, body: { name: 'Console agent' } });
    expect(consoleAgent.status).toBe(201);
    secrets['Agent Wallet Key made in the console'] = consoleAgent.json.data.agentWalletKey;
    const rotatedAgent = await http('POST', `${server.merchantUrl}/v1/console/agents/${consoleAgent.json.data.agentId}/rotate-key`, { headers: writing, body: {} });
    expect(rotatedAgent.status).toBe(200);
    secrets['Agent Wallet Key rotated in the console'] = rotatedAgent.json.data.agentWalletKey;
    expect((await http('POST', `${server.merchantUrl}/v1/console/invites`, { headers: cookie, body: { email: 'x@example.com', role: 'viewer' } })).status).toBe(403);
    secrets['a wrong password'] = `wrong-${randomBytes(12).toString('hex')}`;
    expect((await http('POST', `${server.merchantUrl}/v1/console/sign-in`, { body: { email: 'logs-owner@example.com', password: secrets['a wrong password'] } })).status).toBe(401);
    expect((await http('POST', `${server.merchantUrl}/v1/console/sign-in`, { body: { email: 'nobody@example.com', password: secrets['a wrong password'] } })).status).toBe(401);
    const reset = await http('POST', `${server.adminUrl}/v1/users/password-reset`, { headers: admin, body: { email: 'logs-owner@example.com' } });
    expect(reset.status).toBe(201);
    secrets['password reset token'] = linkToken(reset.json.data.url);
    secrets['new password'] = `new-${randomBytes(12).toString('hex')}`;
    expect((await http('POST', `${server.merchantUrl}/v1/console/password-resets/complete`, { body: { token: secrets['password reset token'], password: secrets['new password'] } })).status).toBe(204);
    // The reset signed the session out: the cookie is refused now.
    expect((await http('GET', `${server.merchantUrl}/v1/console/session`, { headers: cookie })).json.data).toEqual({ signedIn: false });
    const signedIn = await http('POST', `${server.merchantUrl}/v1/console/sign-in`, { body: { email: 'logs-owner@example.com', password: secrets['new password'] } });
    expect(signedIn.status).toBe(200);
    secrets['second console session token'] = /__Host-kassa_session=([^;]+)/.exec(signedIn.headers.get('set-cookie')!)![1]!;

    secrets['admin token'] = adminToken;
    secrets['encryption key'] = encryptionKey;
    await server.stop();
    output = server.output();
    // The run did log (requests, failures), so an empty log cannot pass for a clean one.
    expect(output).toContain('"route":"/v1/me"');
    expect(output).toContain('"status":401');
    expect(output).toContain('"status":429');
    expect(output).toContain('shutting down');
    for (const route of ['/checkout/{token}', '/checkout/{token}/pay', '/subscriptions/manage/{token}/cancel', '/pay/{linkToken}']) expect(output).toContain(`"route":"${route}"`);
    expect(output).toContain('"msg":"crypto chain watcher pass failed"');
    expect(output).toContain(`"rpcHost":"${rpcHost}"`);
    for (const [what, value] of Object.entries(secrets)) {
      expect(value.length, what).toBeGreaterThan(12);
      expect(output.includes(value), `${what} appears in the logs`).toBe(false);
    }
    // Card numbers also not in a spaced or partial form beyond the last four digits.
    expect(output).not.toMatch(/4242[ -]?4242[ -]?4242/);
  }, 120_000);
});
