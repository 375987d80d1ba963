/**
 * Every command the admin CLI registers, run through the CLI's own entry (scripts/admin/run.ts, what
 * `scripts/admin.ts` runs with the process's argv and streams) against the admin app listening on
 * an ephemeral port, over HTTP, with its effects read back. In-process: the child-process contract
 * (one JSON document on stdout, JSON errors on stderr, exit codes 1 and 2, the token file) is
 * test/admin-cli.test.ts's; here a child per command cost CI minutes and proved nothing more.
 * `webhook listen`, which runs until stopped, still runs as a child process. The command list
 * comes from commander's program object (scripts/admin/program.ts), so the last tests fail when a
 * registered command was not run successfully here, and when docs/cli.md documents a command the
 * program does not register (or the other way round).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminClient, createContext } from '../scripts/admin/cli.js';
import { runAdminCli, type AdminCliResult } from './harness/admin-cli.js';
import { buildProgram } from '../scripts/admin/program.js';
import { createTestContext, type TestContext } from './harness/context.js';
import { nodeEntryArgs } from '../tools/node-entry.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let ctx: TestContext;
let server: Server;
let adminUrl: string;
let tmp: string;

/** `noun verb` of every command the program registers (commander's own `help` left out). */
function registeredCommands(): string[] {
  const program = buildProgram(createContext(createAdminClient({ baseUrl: 'http://127.0.0.1:9', token: () => 'unused' }), () => {}));
  return program.commands.flatMap((noun) => noun.commands.map((verb) => `${noun.name()} ${verb.name()}`)).sort();
}

/** `noun verb` of every `npm run -s admin -- noun verb …` line in docs/cli.md's code blocks. */
function documentedCommands(): string[] {
  const doc = readFileSync(path.join(repoRoot, 'docs/cli.md'), 'utf8');
  const found = new Set<string>();
  for (const block of doc.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const line of block[1]!.split('\n')) {
      const match = /^npm run -s admin -- ([a-z][a-z0-9-]*) ([a-z][a-z0-9-]*)/.exec(line.trim());
      if (match) found.add(`${match[1]} ${match[2]}`);
    }
  }
  return [...found].sort();
}

/** Commands that ran and exited 0 in this file. */
const ranSuccessfully = new Set<string>();

async function cli(args: string[]): Promise<AdminCliResult> {
  const result = await runAdminCli(adminUrl, ctx.adminToken, args);
  if (result.code === 0) ranSuccessfully.add(args.slice(0, 2).join(' '));
  return result;
}

/** Runs a command that must succeed and returns its JSON document. */
async function ok(args: string[]): Promise<any> {
  const result = await cli(args);
  expect(result.stderr, `${args.join(' ')}: ${result.stderr}`).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout);
}

const asA = <T extends { set(name: string, value: string): T }>(req: T): T => req.set('X-API-Key', ctx.orgA.apiKey);

let sessions = 0;
/** A buyer pays a checkout session for `pricingId` on the hosted page (sandbox card); returns the order. */
async function paidOrder(pricingId: string): Promise<{ orderId: string; subscriptionId: string | null }> {
  const created = await asA(ctx.merchant.post('/v1/checkout-sessions'))
    .set('Idempotency-Key', `cli-${++sessions}`)
    .send({ pricingId, customerEmail: `buyer${sessions}@example.com` });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const session = (await asA(ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`))).body.data;
  const order = (await asA(ctx.merchant.get(`/v1/orders/${session.orderId}`))).body.data;
  return { orderId: order.orderId, subscriptionId: order.subscriptionId ?? null };
}

beforeAll(async () => {
  ctx = await createTestContext({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true' } });
  server = await new Promise<Server>((resolve) => {
    const s = ctx.apps.admin.listen(0, '127.0.0.1', () => resolve(s));
  });
  adminUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  tmp = await mkdtemp(path.join(os.tmpdir(), 'kassa-cli-commands-'));
});

afterAll(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await ctx?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('every admin CLI command, run through the CLI\'s entry', { timeout: 120_000 }, () => {
  let orgId: string;
  let productId: string;
  let oneTimePriceId: string;
  let subscriptionPriceId: string;

  it('org create / get / list / update', async () => {
    const org = await ok(['org', 'create', '--name', 'Every Command Ltd']);
    orgId = org.orgId;
    expect(await ok(['org', 'get', '--org', orgId])).toMatchObject({ orgId, name: 'Every Command Ltd' });
    expect((await ok(['org', 'list', '--size', '100'])).records.map((o: { orgId: string }) => o.orgId)).toContain(orgId);
    expect(await ok(['org', 'update', '--org', orgId, '--name', 'Every Command GmbH'])).toMatchObject({ orgId, name: 'Every Command GmbH' });
  });

  it('org set-wallet / wallets / remove-wallet', async () => {
    const chain = String(ctx.config.crypto.chains[0]!.chainId);
    const set = await ok(['org', 'set-wallet', '--org', orgId, '--chain', chain, '--address', '0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed']);
    expect(set).toMatchObject({ address: '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed' });
    expect(JSON.stringify(await ok(['org', 'wallets', '--org', orgId]))).toContain('0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed');
    await ok(['org', 'remove-wallet', '--org', orgId, '--chain', chain]);
    expect(JSON.stringify(await ok(['org', 'wallets', '--org', orgId]))).not.toContain('0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed');
  });

  it('org set-stripe-account / stripe-account / remove-stripe-account (sandbox: stored as given, not checked with Stripe)', async () => {
    expect(await ok(['org', 'stripe-account', '--org', orgId])).toEqual({ orgId, accountId: null, boundAt: null, state: null });
    expect(await ok(['org', 'set-stripe-account', '--org', orgId, '--account', 'acct_1Q2w3E4r5T6y7U8i'])).toMatchObject({ orgId, accountId: 'acct_1Q2w3E4r5T6y7U8i' });
    expect(await ok(['org', 'stripe-account', '--org', orgId])).toMatchObject({ accountId: 'acct_1Q2w3E4r5T6y7U8i' });
    const malformed = await cli(['org', 'set-stripe-account', '--org', orgId, '--account', 'acct_!']);
    expect(malformed.code).toBe(1);
    expect(JSON.parse(malformed.stderr)).toMatchObject({ error: { code: 'VALIDATION_ERROR', status: 400 } });
    expect(await ok(['org', 'remove-stripe-account', '--org', orgId])).toEqual({ orgId, accountId: null, boundAt: null, state: null });
  });

  it('apikey create / list / revoke', async () => {
    const created = await ok(['apikey', 'create', '--org', orgId, '--name', 'backend']);
    expect((await ctx.merchant.get('/v1/me').set('X-API-Key', created.key)).status).toBe(200);
    expect((await ok(['apikey', 'list', '--org', orgId])).map((k: { apiKeyId: string }) => k.apiKeyId)).toEqual([created.apiKeyId]);
    expect(await ok(['apikey', 'revoke', '--id', created.apiKeyId])).toMatchObject({ revoked: true });
    expect((await ctx.merchant.get('/v1/me').set('X-API-Key', created.key)).status).toBe(401);
  });

  it('product, price and paymentlink commands (organization A, so the merchant API can sell them)', async () => {
    productId = (await ok(['product', 'create', '--org', ctx.orgA.orgId, '--name', 'Every command plan'])).productId;
    expect(await ok(['product', 'update', '--product', productId, '--description', 'Sold by the CLI test'])).toMatchObject({ description: 'Sold by the CLI test' });
    expect((await ok(['product', 'list', '--org', ctx.orgA.orgId, '--search', 'every command'])).records.map((p: { productId: string }) => p.productId)).toEqual([productId]);
    oneTimePriceId = (await ok(['price', 'create', '--product', productId, '--amount', '2500', '--currency', 'USD'])).pricingId;
    subscriptionPriceId = (await ok(['price', 'create', '--product', productId, '--amount', '900', '--currency', 'USD', '--type', 'SUBSCRIPTION', '--interval', 'MONTH'])).pricingId;
    const spare = (await ok(['price', 'create', '--product', productId, '--amount', '100', '--currency', 'USD'])).pricingId;
    expect((await ok(['price', 'list', '--product', productId])).map((p: { pricingId: string }) => p.pricingId).sort()).toEqual([oneTimePriceId, subscriptionPriceId, spare].sort());
    const link = await ok(['paymentlink', 'create', '--price', spare]);
    expect(link.paymentLinkUrl).toMatch(/\/pay\//);
    expect(await ok(['paymentlink', 'deactivate', '--id', link.paymentLinkId])).toMatchObject({ isActive: false });
    expect(await ok(['price', 'deactivate', '--id', spare])).toMatchObject({ active: false });
  });

  it('order refund: part of a paid order (with a reason), then the rest; each refund is listed and announced', async () => {
    const { orderId } = await paidOrder(oneTimePriceId);
    const partial = await ok(['order', 'refund', '--order', orderId, '--amount', '1000', '--reason', 'duplicate']);
    expect(partial).toMatchObject({ orderId, status: 'PAID', amountRefundedCents: 1000 });
    const full = await ok(['order', 'refund', '--order', orderId]);
    expect(full).toMatchObject({ orderId, status: 'REFUNDED', amountRefundedCents: 2500 });
    const refunds = (await asA(ctx.merchant.get(`/v1/orders/${orderId}/refunds`))).body.data;
    expect(refunds.map((r: { amountCents: number; reason: string | null; source: string }) => [r.amountCents, r.reason, r.source])).toEqual([
      [1000, 'duplicate', 'kassa'],
      [1500, null, 'kassa'],
    ]);
    const announced = (await ctx.testDb.database.db('webhook_events').where({ type: 'order.refunded' }).orderBy('seq')).filter((e: { payload: unknown }) => JSON.stringify(e.payload).includes(orderId));
    expect(announced.map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload).order.amountRefundedCents)).toEqual([1000, 2500]);
    // An unknown reason is refused by the CLI itself.
    expect((await cli(['order', 'refund', '--order', orderId, '--reason', 'because'])).code).not.toBe(0);
    expect((await asA(ctx.merchant.get(`/v1/orders/${orderId}`))).body.data).toMatchObject({ status: 'REFUNDED' });
    // A refunded order has nothing left to refund: the API's 409, relayed with exit 1.
    const again = await cli(['order', 'refund', '--order', orderId]);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stderr).error).toMatchObject({ code: 'CONFLICT', status: 409 });
  });

  it('order list / get: the merchant API\'s filters as options, JSON or --table; another organization\'s order is NOT_FOUND', async () => {
    const { orderId } = await paidOrder(oneTimePriceId);
    const second = (await paidOrder(oneTimePriceId)).orderId;
    const all = await ok(['order', 'list', '--org', ctx.orgA.orgId, '--size', '100']);
    expect(all.records.map((o: { orderId: string }) => o.orderId)).toEqual(expect.arrayContaining([orderId, second]));
    // The same page the merchant API gives the organization for the same filters.
    const filtered = await ok(['order', 'list', '--org', ctx.orgA.orgId, '--status', 'paid', '--product', productId, '--provider', 'stripe', '--since', '2026-01-01', '--before', '2100-01-01T00:00:00Z', '--size', '1']);
    const merchant = (await asA(ctx.merchant.get(`/v1/orders?status=paid&product_id=${productId}&provider=STRIPE&date_from=1767225600&date_to=4102444800&size=1`))).body.data;
    expect(filtered).toEqual(merchant);
    expect(filtered.records).toHaveLength(1);
    const next = await ok(['order', 'list', '--org', ctx.orgA.orgId, '--status', 'paid', '--product', productId, '--size', '1', '--starting-after', filtered.nextCursor]);
    expect(next.records[0].orderId).not.toBe(filtered.records[0].orderId);
    expect((await ok(['order', 'list', '--org', ctx.orgA.orgId, '--size', '1', '--ending-before', next.records[0].orderId])).records).toHaveLength(1);
    expect(await ok(['order', 'get', '--org', ctx.orgA.orgId, '--order', orderId])).toEqual((await asA(ctx.merchant.get(`/v1/orders/${orderId}`))).body.data);
    const table = await cli(['order', 'list', '--org', ctx.orgA.orgId, '--size', '2', '--table']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/│ orderId +│/);
    expect(table.stdout).toContain('nextCursor: ');
    // Another organization's order, an unknown organization: the API's 404, exit 1.
    for (const args of [['order', 'get', '--org', ctx.orgB.orgId, '--order', orderId], ['order', 'list', '--org', 'ORG_000000000000000000000000']]) {
      const missing = await cli(args);
      expect(missing.code).toBe(1);
      expect(JSON.parse(missing.stderr).error).toMatchObject({ code: 'NOT_FOUND', status: 404 });
    }
    // A date the CLI cannot read is a usage error (exit 2); a status the API does not know, its 400.
    expect((await cli(['order', 'list', '--org', ctx.orgA.orgId, '--since', 'yesterday'])).code).toBe(2);
    const badStatus = await cli(['order', 'list', '--org', ctx.orgA.orgId, '--status', 'shipped']);
    expect(badStatus.code).toBe(1);
    expect(JSON.parse(badStatus.stderr).error).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
    // --tx-hash: the list's tx_hash filter (any case); a malformed hash is the API's 400.
    const hash = `0x${'c0ffee'.repeat(10)}abcd`;
    await ctx.testDb.database.db('orders').where({ id: second }).update({ chain: 'eip155:8453', tx_hash: hash });
    expect((await ok(['order', 'list', '--org', ctx.orgA.orgId, '--tx-hash', hash.toUpperCase().replace('0X', '0x')])).records.map((o: { orderId: string }) => o.orderId)).toEqual([second]);
    const badHash = await cli(['order', 'list', '--org', ctx.orgA.orgId, '--tx-hash', '0x1234']);
    expect(badHash.code).toBe(1);
    expect(JSON.parse(badHash.stderr).error).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
  });

  it('subscription pause / resume / cancel', async () => {
    const { subscriptionId } = await paidOrder(subscriptionPriceId);
    expect(subscriptionId).toMatch(/^SUB_/);
    expect(await ok(['subscription', 'pause', '--id', subscriptionId!])).toMatchObject({ subscriptionId, status: 'PAUSED' });
    expect(await ok(['subscription', 'resume', '--id', subscriptionId!])).toMatchObject({ subscriptionId, status: 'ACTIVE' });
    expect(await ok(['subscription', 'cancel', '--id', subscriptionId!])).toMatchObject({ subscriptionId, status: 'ACTIVE', cancelAtPeriodEnd: true });
    expect(await ok(['subscription', 'cancel', '--id', subscriptionId!, '--now'])).toMatchObject({ subscriptionId, status: 'CANCELED' });
    const read = (await asA(ctx.merchant.get(`/v1/subscriptions/${subscriptionId}`))).body.data;
    expect(read.status).toBe('CANCELED');
  });

  it('project and telemetry-key commands', async () => {
    const project = await ok(['project', 'create', '--org', orgId, '--name', 'Support bot']);
    expect((await ok(['project', 'list', '--org', orgId])).map((p: { projectId: string }) => p.projectId)).toEqual([project.projectId]);
    const key = await ok(['telemetry-key', 'create', '--org', orgId, '--project', project.projectId]);
    expect((await ok(['telemetry-key', 'list', '--org', orgId])).map((k: { telemetryKeyId: string }) => k.telemetryKeyId)).toEqual([key.telemetryKeyId]);
    expect(await ok(['telemetry-key', 'revoke', '--id', key.telemetryKeyId])).toMatchObject({ revoked: true });
  });

  it('wallet, agent, policy and credit commands; the example policy file is accepted', async () => {
    const wallet = await ok(['wallet', 'create', '--org', orgId, '--name', 'Payments']);
    expect((await ok(['wallet', 'list', '--org', orgId])).map((w: { walletId: string }) => w.walletId)).toEqual([wallet.walletId]);
    const agent = await ok(['agent', 'create', '--org', orgId, '--name', 'Shopper']);
    expect(agent.agentWalletKey).toEqual(expect.any(String));
    expect((await ok(['agent', 'list', '--org', orgId])).map((a: { agentId: string }) => a.agentId)).toEqual([agent.agentId]);
    expect(await ok(['agent', 'assign', '--agent', agent.agentId, '--wallet', wallet.walletId])).toMatchObject({ walletId: wallet.walletId });
    expect((await ok(['agent', 'rotate-key', '--agent', agent.agentId])).agentWalletKey).not.toBe(agent.agentWalletKey);
    expect(await ok(['agent', 'revoke', '--agent', agent.agentId])).toMatchObject({ revoked: true });

    const created = await ok(['policy', 'create', '--wallet', wallet.walletId, '--file', 'scripts/examples/agent-wallet-policy.json']);
    expect(created).toMatchObject({ walletId: wallet.walletId, name: 'USDC on Base: up to 5 USDC per payment, 20 USDC a day', chainType: 'ethereum' });
    expect(created.spendLimits).toHaveLength(1);
    expect((await ok(['policy', 'list', '--wallet', wallet.walletId])).map((p: { id: string }) => p.id)).toContain(created.id);
    await ok(['policy', 'delete', '--policy', created.id]);
    expect((await ok(['policy', 'list', '--wallet', wallet.walletId])).map((p: { id: string }) => p.id)).not.toContain(created.id);

    expect(await ok(['credit', 'grant', '--org', orgId, '--amount', '1.5'])).toMatchObject({ amount: 1_500_000, balanceMinor: 1_500_000 });
    expect(await ok(['credit', 'balance', '--org', orgId])).toMatchObject({ balanceMinor: 1_500_000, unit: 'USDC' });
  });

  it('signing-key rotate', async () => {
    const rotated = await ok(['signing-key', 'rotate', '--grace-seconds', '3600']);
    expect(rotated.keys.length).toBeGreaterThanOrEqual(2);
  });

  it('user invite / reset-password: print single-use links (the first owner of an organization)', async () => {
    const invite = await ok(['user', 'invite', '--org', orgId, '--email', 'first-owner@example.com', '--role', 'owner']);
    expect(invite).toMatchObject({ orgId, email: 'first-owner@example.com', role: 'owner' });
    expect(invite.url).toMatch(/\/console\/accept-invite#token=kinv_/);
    const token = new URL(invite.url).hash.slice('#token='.length);
    const accepted = await ctx.merchant.post('/v1/console/invites/accept').set('Origin', 'http://merchant.test').send({ token, password: 'correct horse battery staple' });
    expect(accepted.status).toBe(200);
    const reset = await ok(['user', 'reset-password', '--email', 'first-owner@example.com']);
    expect(reset.url).toMatch(/\/console\/reset-password#token=krst_/);
    // The account's sessions are listed, and signed out on request (issue 37: the operator's reset shows what else signs in).
    expect(reset).toMatchObject({ passkeys: [], removedPasskeys: 0, revokedSessions: 0 });
    expect(reset.sessions).toHaveLength(1);
    const revoked = await ok(['user', 'reset-password', '--email', 'first-owner@example.com', '--remove-passkeys', '--revoke-sessions']);
    expect(revoked).toMatchObject({ sessions: [], revokedSessions: 1 });
    // A member's invite (the console never shows its link): the operator prints a new one.
    const pending = await ctx.services.modules.accounts.accounts.invite({ orgId, email: 'second@example.com', role: 'viewer', by: { type: 'operator' }, clientAddress: null });
    const printed = await ok(['user', 'invite-link', '--org', orgId, '--invite', pending.link.id]);
    expect(printed).toMatchObject({ inviteId: pending.link.id, email: 'second@example.com' });
    expect(printed.url).toMatch(/\/console\/accept-invite#token=kinv_/);
    expect(printed.url).not.toBe(pending.url);
  });

  it('x402 relayer-create / relayer: created once (the key stays sealed), shown by address', async () => {
    const created = await ok(['x402', 'relayer-create']);
    expect(created.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(await ok(['x402', 'relayer'])).toEqual(created);
  });

  it('webhook test / deliveries / delivery / redeliver', async () => {
    // Loopback endpoints are allowed here (WEBHOOK_ALLOW_LOOPBACK); no worker runs, so deliveries stay queued.
    const endpoint = await asA(ctx.merchant.post('/v1/webhook')).send({ name: 'Ops', url: 'https://127.0.0.1:9/hooks', events: [] });
    expect(endpoint.status).toBe(201);
    const queued = await ok(['webhook', 'test', '--endpoint', endpoint.body.data.id, '--wait-seconds', '0']);
    expect(queued).toMatchObject({ eventType: 'webhook.test', status: 'pending' });
    const page = await ok(['webhook', 'deliveries', '--org', ctx.orgA.orgId, '--event', queued.eventId]);
    expect(page.records.map((d: { deliveryId: string }) => d.deliveryId)).toEqual([queued.deliveryId]);
    expect(await ok(['webhook', 'delivery', '--id', queued.deliveryId])).toMatchObject({ deliveryId: queued.deliveryId, eventId: queued.eventId });
    const again = await ok(['webhook', 'redeliver', '--delivery', queued.deliveryId]);
    expect(again).toMatchObject({ eventId: queued.eventId });
    expect(again.deliveryId).not.toBe(queued.deliveryId);
  });

  it('webhook listen --verbose forwards a new event to a local receiver, reports each poll, and stops on SIGINT', async () => {
    const received: string[] = [];
    const receiver = http.createServer((req, res) => {
      received.push(String(req.headers['webhook-id']));
      req.resume().on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const forward = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
    const env: NodeJS.ProcessEnv = { ...process.env, ADMIN_URL: adminUrl, ADMIN_TOKEN: ctx.adminToken };
    const child = spawn(process.execPath, [...nodeEntryArgs('scripts/admin.ts'), 'webhook', 'listen', '--org', ctx.orgA.orgId, '--forward', forward, '--interval-ms', '200', '--verbose'], {
      cwd: repoRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await until(() => stderr.includes('Listening'), () => stderr);
      const { orderId } = await paidOrder(oneTimePriceId);
      await until(() => stdout.includes('"order.paid"'), () => `${stdout}\n${stderr}`);
      const line = JSON.parse(stdout.split('\n').find((l) => l.includes('"order.paid"'))!);
      expect(line).toMatchObject({ type: 'order.paid', status: 204, error: null });
      expect(received).toContain(line.eventId);
      expect(orderId).toMatch(/^ORD_/);
      // Verbose: the polling chatter goes to stderr; stdout keeps one JSON line per forwarded event.
      expect(stderr).toMatch(/^poll: [1-9]\d* event\(s\), cursor \d+$/m);
      expect(stdout.trim().split('\n').every((l) => JSON.parse(l).eventId)).toBe(true);
    } finally {
      child.kill('SIGINT');
      const code = await exited;
      await new Promise((resolve) => receiver.close(resolve));
      expect(code).toBe(0);
    }
    ranSuccessfully.add('webhook listen');
  });

  it('meter list / show and usage show: a metered subscription\'s usage this period and estimated next charge; --meter keeps that meter\'s line; another organization\'s meter is NOT_FOUND', async () => {
    const meter = await asA(ctx.merchant.post('/v1/meters')).send({ name: 'CLI tokens', source: 'EVENTS', filter: { eventName: 'cli_tokens' }, aggregation: 'sum', property: 'tokens' });
    expect(meter.status).toBe(201);
    const meterId = meter.body.data.id as string;
    const metered = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'CLI metered plan' });
    const price = await ctx.admin.post(`/v1/products/${metered.id}/prices`).send({
      amount: 900,
      currency: 'USD',
      pricingType: 'SUBSCRIPTION',
      billingInterval: 'MONTH',
      meteredComponents: [{ meterId, includedUnits: 100, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.5' } }],
    });
    expect(price.status, JSON.stringify(price.body)).toBe(201);
    const { orderId } = await paidOrder(price.body.data.pricingId);
    const customerId = (await asA(ctx.merchant.get(`/v1/orders/${orderId}`))).body.data.customerId as string;
    const ingest = await asA(ctx.merchant.post('/v1/usage-events')).send({
      events: [{ id: 'cli-1', customer: { customerId }, name: 'cli_tokens', timestamp: ctx.clock.now().toISOString(), properties: { tokens: 130 } }],
    });
    expect(ingest.body.data.results[0].status).toBe('ACCEPTED');

    expect((await ok(['meter', 'list', '--org', ctx.orgA.orgId])).records.map((m: { id: string }) => m.id)).toContain(meterId);
    expect(await ok(['meter', 'show', '--org', ctx.orgA.orgId, '--meter', meterId])).toMatchObject({ id: meterId, name: 'CLI tokens', aggregation: 'sum' });
    const foreign = await cli(['meter', 'show', '--org', ctx.orgB.orgId, '--meter', meterId]);
    expect(foreign.code).toBe(1);
    expect(JSON.parse(foreign.stderr).error.code).toBe('NOT_FOUND');

    const usage = await ok(['usage', 'show', '--org', ctx.orgA.orgId, '--customer', customerId]);
    expect(usage.customerId).toBe(customerId);
    // 130 used, 100 included: 30 × 0.5 = 15 cents, with the next period's 900.
    expect(usage.subscriptions[0].estimatedTotalCents).toBe(915);
    expect(await ok(['usage', 'show', '--org', ctx.orgA.orgId, '--customer', customerId, '--meter', meterId])).toEqual([
      expect.objectContaining({ meterId, meter: 'CLI tokens', quantity: '130', includedUnits: 100, billableQuantity: '30', estimatedAmountCents: 15, currency: 'USD' }),
    ]);
  });

  it('product archive (last: checkout refuses an archived product)', async () => {
    expect(await ok(['product', 'archive', '--product', productId])).toMatchObject({ productId, status: 'ARCHIVED' });
  });

  it('ran every registered command successfully', () => {
    expect(registeredCommands().filter((command) => !ranSuccessfully.has(command))).toEqual([]);
  });
});

describe('docs/cli.md', () => {
  it('documents exactly the commands the CLI registers', () => {
    const registered = registeredCommands();
    const documented = documentedCommands();
    expect({ documentedButNotRegistered: documented.filter((c) => !registered.includes(c)), registeredButNotDocumented: registered.filter((c) => !documented.includes(c)) }).toEqual({
      documentedButNotRegistered: [],
      registeredButNotDocumented: [],
    });
  });
});

async function until(condition: () => boolean, describe: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting; output so far:\n${describe()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
