/**
 * Crypto checkout creation, quotes, the hosted instructions page and the receiving-wallet admin
 * API and CLI. No chain is contacted here (quotes need configuration only); on-chain behaviour is
 * in watcher.test.ts.
 */
import { execFile } from 'node:child_process';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createLink, createPrice, createProduct } from '../catalog/fixtures.js';
import { nodeEntryArgs, CHILD_COMMAND_TIMEOUT_MS } from '../../tools/node-entry.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CHAIN_A = 31337; // USDC and USDT
const CHAIN_B = 31338; // USDC only
const USDC_A = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const USDT_A = '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512';
const USDC_B = '0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0';
const WALLET = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';
const WALLET_B = '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359';

let ctx: TestContext;
let key = 0;

const create = (body: Record<string, unknown>, org = ctx.orgA) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', org.apiKey).set('Idempotency-Key', `k-${++key}`).send(body);

const crypto = (amount: number, extra: Record<string, unknown> = {}, currency = 'USDC') => ({
  provider: 'CRYPTO',
  pricingData: { amount, currency, productData: { name: 'Conference ticket' } },
  customerEmail: 'buyer@example.com',
  ...extra,
});

beforeAll(async () => {
  ctx = await createTestContext({
    env: {
      CRYPTO_CHAINS: JSON.stringify([
        { chainId: CHAIN_A, name: 'Local A', rpcUrl: 'http://127.0.0.1:9', confirmations: 2, explorerUrl: 'https://a.test', blockRange: 10, initialLookback: 0, tokens: { USDC: USDC_A, USDT: USDT_A } },
        { chainId: CHAIN_B, name: 'Local B', rpcUrl: 'http://127.0.0.1:9', confirmations: 2, explorerUrl: 'https://b.test', blockRange: 10, initialLookback: 0, tokens: { USDC: USDC_B } },
      ]),
      CRYPTO_AMOUNT_OFFSET_RANGE: '3',
      CRYPTO_LATE_PAYMENT_WINDOW_SECONDS: '600',
    },
  });
});

afterAll(async () => {
  await ctx?.close();
});

describe('receiving wallets (admin API)', () => {
  it('refuses a session before any wallet is set: 403 naming the set-up step', async () => {
    const res = await create(crypto(1_000_000));
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('FORBIDDEN');
    expect(res.body.error.message).toContain('set-wallet');
  });

  it('validates and checksums addresses, and knows only configured chains', async () => {
    const url = (chain: number, org = ctx.orgA.orgId) => `/v1/orgs/${org}/receiving-wallets/${chain}`;
    const badChecksum = WALLET.replace('aAeb', 'AaEB');
    expect((await ctx.admin.put(url(CHAIN_B)).send({ address: badChecksum })).status).toBe(400);
    expect((await ctx.admin.put(url(CHAIN_B)).send({ address: '0x1234' })).status).toBe(400);
    expect((await ctx.admin.put(url(CHAIN_B)).send({ address: `0x${'0'.repeat(40)}` })).status).toBe(400);
    const unknownChain = await ctx.admin.put(url(8453)).send({ address: WALLET });
    expect(unknownChain.status).toBe(400);
    expect(unknownChain.body.error.message).toContain('not a configured chain');
    expect((await ctx.admin.put(url(CHAIN_B, 'ORG_unknown')).send({ address: WALLET })).status).toBe(404);
    expect((await ctx.admin.put(url(CHAIN_B)).send({ address: WALLET, extra: 1 })).status).toBe(400);

    const set = await ctx.admin.put(url(CHAIN_B)).send({ address: WALLET_B.toLowerCase() });
    expect(set.status).toBe(200);
    expect(set.body.data).toMatchObject({ orgId: ctx.orgA.orgId, chainId: CHAIN_B, chain: `eip155:${CHAIN_B}`, chainName: 'Local B', address: WALLET_B });
    const list = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets`);
    expect(list.body.data.map((w: { chainId: number }) => w.chainId)).toEqual([CHAIN_B]);
  });

  it('uses a chain that accepts the token: USDT needs a wallet on chain A (403 otherwise)', async () => {
    const usdt = await create(crypto(2_000_000, {}, 'USDT'));
    expect(usdt.status).toBe(403);
    expect(usdt.body.error.message).toContain('accepts USDT');
    const usdc = await create(crypto(2_000_000));
    expect(usdc.status).toBe(201);
    expect(usdc.body.data.crypto).toMatchObject({ chainId: CHAIN_B, tokenAddress: USDC_B, recipient: WALLET_B });
  });

  it('sets a wallet with the CLI `org set-wallet`; the preferred chain is the first configured', async () => {
    const server: Server = ctx.apps.admin.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const adminUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const env: NodeJS.ProcessEnv = { ...process.env, ADMIN_URL: adminUrl, ADMIN_TOKEN: ctx.adminToken };
      for (const name of ['ADMIN_HOST', 'ADMIN_PORT', 'DATA_DIR']) delete env[name];
      const run = (args: string[]) =>
        new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
          execFile(process.execPath, [...nodeEntryArgs('scripts/admin.ts'), ...args], { cwd: repoRoot, env, timeout: CHILD_COMMAND_TIMEOUT_MS }, (error, stdout, stderr) =>
            resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
          );
        });
      const ok = await run(['org', 'set-wallet', '--org', ctx.orgA.orgId, '--chain', String(CHAIN_A), '--address', WALLET.toLowerCase()]);
      expect(ok.stderr).toBe('');
      expect(ok.code).toBe(0);
      expect(JSON.parse(ok.stdout)).toMatchObject({ chainId: CHAIN_A, address: WALLET });
      const bad = await run(['org', 'set-wallet', '--org', ctx.orgA.orgId, '--chain', String(CHAIN_A), '--address', WALLET.replace('aAeb', 'AaEB')]);
      expect(bad.code).toBe(1);
      expect(JSON.parse(bad.stderr).error).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    const res = await create(crypto(2_000_000));
    expect(res.body.data.crypto).toMatchObject({ chainId: CHAIN_A, tokenAddress: USDC_A, recipient: WALLET });
  });
});

describe('creating a crypto session', () => {
  it('refuses prices crypto checkout cannot take (400)', async () => {
    const usd = await create(crypto(1500, {}, 'USD'));
    expect(usd.status).toBe(400);
    expect(usd.body.error.message).toContain('USDC or USDT');
    const sub = await create({ ...crypto(1_000_000), pricingData: { amount: 1_000_000, currency: 'USDC', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', productData: { name: 'Pro' } } });
    expect(sub.status).toBe(400);
    expect(sub.body.error.message).toContain('ONE_TIME');
    // A card price cannot be sold on the crypto rail, nor a USDC amount by card.
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Plan' });
    const card = await createPrice(ctx, product.productId, { amount: 900, currency: 'USD' });
    expect((await create({ provider: 'CRYPTO', pricingId: card.pricingId })).status).toBe(400);
    expect((await create({ pricingData: { amount: 1_000_000, currency: 'USDC', productData: { name: 'x' } } })).status).toBe(400);
  });

  it('applies the crypto expiry bounds 60-86400 s, default 3600', async () => {
    for (const expiresIn of [59, 86401]) {
      const res = await create(crypto(1_100_000, { expiresIn }));
      expect(res.status, String(expiresIn)).toBe(400);
    }
    const short = await create(crypto(1_100_000, { expiresIn: 60 }));
    expect(short.status).toBe(201);
    expect(Date.parse(short.body.data.expiresAt) - Date.parse(short.body.data.createdAt)).toBe(60_000);
    const byDefault = await create(crypto(1_100_000));
    expect(Date.parse(byDefault.body.data.expiresAt) - Date.parse(byDefault.body.data.createdAt)).toBe(3_600_000);
  });

  it('does not apply the card-only organization checks; a frozen organization is refused', async () => {
    await ctx.admin.patch(`/v1/orgs/${ctx.orgA.orgId}`).send({ cardVerified: false, cardAccountEnabled: false }).expect(200);
    try {
      expect((await create(crypto(1_200_000))).status).toBe(201);
      expect((await create({ pricingData: { amount: 900, currency: 'USD', productData: { name: 'x' } } })).status).toBe(403);
      await ctx.admin.patch(`/v1/orgs/${ctx.orgA.orgId}`).send({ frozen: true }).expect(200);
      const frozen = await create(crypto(1_200_000));
      expect(frozen.status).toBe(403);
      expect(frozen.body.error.message).toContain('frozen');
    } finally {
      await ctx.admin.patch(`/v1/orgs/${ctx.orgA.orgId}`).send({ frozen: false, cardVerified: true, cardAccountEnabled: true }).expect(200);
    }
  });

  it('quotes the price plus the smallest free offset, per wallet and token, reserved in the database', async () => {
    const a = (await create(crypto(5_000_000))).body.data;
    const b = (await create(crypto(5_000_000))).body.data;
    const c = (await create(crypto(2_500_000, { quantity: 2 }))).body.data; // same total, same wallet
    expect([a.crypto.amountUnits, b.crypto.amountUnits, c.crypto.amountUnits]).toEqual(['5000000', '5000001', '5000002']);
    expect(a.amount).toBe(5_000_000);
    // Every distinct amount is held (the range is 3 here): 503, retry later.
    const full = await create(crypto(5_000_000));
    expect(full.status).toBe(503);
    expect(full.body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(full.headers['retry-after']).toBe('60');
    // The same price in USDT (another token) is independent.
    expect((await create(crypto(5_000_000, {}, 'USDT'))).body.data.crypto.amountUnits).toBe('5000000');
    // Reservations last until expiresAt + the late-payment window (600 s here); then the amount is reused.
    ctx.clock.advance((3600 + 600 + 1) * 1000);
    const again = (await create(crypto(5_000_000))).body.data;
    expect(again.crypto.amountUnits).toBe('5000000');
  });

  it('gives concurrent checkouts distinct amounts, enforced by the reservation key (not memory)', async () => {
    const results = await Promise.all(Array.from({ length: 6 }, () => create(crypto(4_400_000))));
    const created = results.filter((r) => r.status === 201).map((r) => r.body.data.crypto.amountUnits);
    expect(created.sort()).toEqual(['4400000', '4400001', '4400002']);
    expect(results.filter((r) => r.status === 503)).toHaveLength(3);
  });

  it('replays an idempotent creation with the same quote', async () => {
    const body = crypto(6_000_000);
    const first = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'same-crypto').send(body);
    const second = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'same-crypto').send(body);
    expect(second.status).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body.data.crypto).toEqual(first.body.data.crypto);
    const next = (await create(crypto(6_000_000))).body.data;
    expect(next.crypto.amountUnits).toBe('6000001');
  });
});

describe('hosted page', () => {
  it('asks the e-mail first, then shows the instructions with a QR code, under the strict CSP', async () => {
    const res = await create({ provider: 'CRYPTO', pricingData: { amount: 12_340_000, currency: 'USDC', productData: { name: 'Workshop <seat>' } }, cancelUrl: 'https://shop.example/cart' });
    expect(res.status).toBe(201);
    const session = res.body.data;
    expect(session.customerEmail).toBeNull();
    expect(session.crypto.amountUnits).toBeNull();
    const pagePath = new URL(session.url).pathname;

    const ask = await ctx.merchant.get(pagePath);
    expect(ask.status).toBe(200);
    expect(ask.text).toContain(`action="${pagePath}/crypto-email"`);
    expect(ask.text).toContain('Workshop &lt;seat&gt;');
    expect(ask.text).not.toContain('data-testid="instructions"');

    const invalid = await ctx.merchant.post(`${pagePath}/crypto-email`).type('form').send({ email: 'not-an-email' });
    expect(invalid.status).toBe(400);
    expect(invalid.text).toContain('valid e-mail');

    const given = await ctx.merchant.post(`${pagePath}/crypto-email`).type('form').send({ email: 'ada@example.com' });
    expect(given.status).toBe(303);
    expect(given.headers.location).toBe(pagePath);

    const page = await ctx.merchant.get(pagePath);
    expect(page.status).toBe(200);
    const csp = page.headers['content-security-policy'];
    expect(csp).toContain("img-src 'self' data:");
    expect(csp).not.toContain('script-src');
    expect(page.text).not.toMatch(/<script/i);
    expect(page.text).toMatch(/<meta http-equiv="refresh" content="\d+">/);
    expect(page.text).toContain('exactly 12.34 USDC');
    expect(page.text).toContain('Local A');
    expect(page.text).toContain(WALLET);
    expect(page.text).toContain(USDC_A);
    const qr = /<img src="data:image\/svg\+xml;base64,([A-Za-z0-9+/=]+)"/.exec(page.text);
    expect(qr).not.toBeNull();
    expect(Buffer.from(qr![1]!, 'base64').toString()).toMatch(/^<svg[^>]*viewBox/);

    const read = await ctx.merchant.get(`/v1/checkout-sessions/${session.id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(read.body.data.customerEmail).toBe('ada@example.com');
    expect(read.body.data.crypto.amountUnits).toBe('12340000');
    // A second e-mail post changes nothing.
    await ctx.merchant.post(`${pagePath}/crypto-email`).type('form').send({ email: 'eve@example.com' }).expect(303);
    const still = await ctx.merchant.get(`/v1/checkout-sessions/${session.id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(still.body.data).toMatchObject({ customerEmail: 'ada@example.com', crypto: { amountUnits: '12340000' } });
  });

  it('shows an exact amount with its offset digits, and never takes a card for a crypto session', async () => {
    await create(crypto(7_000_000));
    const second = (await create(crypto(7_000_000))).body.data;
    const pagePath = new URL(second.url).pathname;
    const page = await ctx.merchant.get(pagePath);
    expect(page.text).toContain('exactly 7.000001 USDC');
    expect(page.text).toContain('7000001 base units');
    const card = await ctx.merchant.post(`${pagePath}/pay`).type('form').send({ email: 'a@example.com', cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
    expect(card.status).toBe(400);
    const after = await ctx.merchant.get(`/v1/checkout-sessions/${second.id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(after.body.data).toMatchObject({ status: 'CREATED', orderId: null });
  });

  it('opens a payment link of a crypto price; the page asks for the e-mail', async () => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Lifetime' });
    const price = await createPrice(ctx, product.productId, { amount: 29_000_000, currency: 'USDC', provider: 'CRYPTO' });
    const link = await createLink(ctx, price.pricingId);
    const opened = await ctx.merchant.get(new URL(link.paymentLinkUrl).pathname).query({ merchant_reference: 'ref-9' });
    expect(opened.status).toBe(303);
    const page = await ctx.merchant.get(opened.headers.location!);
    expect(page.status).toBe(200);
    expect(page.text).toContain('/crypto-email"');
    // A catalog crypto price is also usable by pricingId.
    const viaApi = await create({ provider: 'CRYPTO', pricingId: price.pricingId, customerEmail: 'x@example.com' });
    expect(viaApi.status).toBe(201);
    expect(viaApi.body.data.crypto).toMatchObject({ tokenSymbol: 'USDC', amountUnits: '29000000' });
  });

  it('an expired crypto session page refuses payment', async () => {
    const s = (await create(crypto(8_100_000, { expiresIn: 60 }))).body.data;
    ctx.clock.advance(61_000);
    const page = await ctx.merchant.get(new URL(s.url).pathname);
    expect(page.status).toBe(410);
    expect(page.text).not.toContain('data-testid="instructions"');
  });
});

describe('removing receiving wallets', () => {
  it('removes a wallet (404 when there is none); without any wallet crypto checkout is 403 again', async () => {
    const url = (chain: number) => `/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${chain}`;
    const removed = await ctx.admin.delete(url(CHAIN_A));
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    expect(removed.body.data).toMatchObject({ chainId: CHAIN_A, address: WALLET });
    expect((await ctx.admin.delete(url(CHAIN_A))).status).toBe(404);
    // USDC falls back to the next configured chain with a wallet.
    expect((await create(crypto(9_100_000))).body.data.crypto).toMatchObject({ chainId: CHAIN_B, recipient: WALLET_B });
    await ctx.admin.delete(url(CHAIN_B)).expect(200);
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets`)).body.data).toEqual([]);
    expect((await create(crypto(9_100_000))).status).toBe(403);
    // Another organization's wallets are its own.
    expect((await ctx.admin.get(`/v1/orgs/ORG_unknown/receiving-wallets`)).status).toBe(404);
  });
});
