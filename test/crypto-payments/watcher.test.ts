/**
 * Crypto checkout against a real local EVM (Hardhat 2 in-process, JSON-RPC over HTTP): sessions
 * quote an exact amount, the chain watcher (viem getLogs by cursor) sees ERC-20 transfers, orders
 * go PENDING → PAID / UNDERPAID with the configured confirmations, reorganizations, late payments,
 * restarts and concurrent workers, and the renewed cursor lease of long passes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getAddress } from 'viem';
import { createTestContext, type TestContext } from '../harness/context.js';
import { KnexCryptoRepository } from '../../src/crypto-payments/crypto.repository.js';
import { ChainWatcher } from '../../src/crypto-payments/chain-watcher.js';
import { ViemChainClient, type ChainClient } from '../../src/crypto-payments/chain-client.js';
import type { ChainConfig } from '../../src/crypto-payments/crypto-config.js';
import { createLogger } from '../../src/kernel/logger.js';
import { startLocalChain, USDC, type LocalChain } from './chain.js';
import { createPrice, createProduct } from '../catalog/fixtures.js';

const CONFIRMATIONS = 3;

let chain: LocalChain;
let ctx: TestContext;
let usdc: `0x${string}`;
let usdt: `0x${string}`;
let merchantWallet: `0x${string}`;
let buyer: `0x${string}`;
let stranger: `0x${string}`;
const logLines: string[] = [];
let keyCounter = 0;

/** Passes until idle. Time moves on between passes, as it does between a worker's runs (events get distinct times). */
async function runWatcher(watcher: ChainWatcher = ctx.services.chainWatcher): Promise<void> {
  for (let i = 0; i < 50; i++) {
    ctx.clock.advance(1000);
    if (!(await watcher.runOnce())) break;
  }
}

async function createSession(body: Record<string, unknown>, org = ctx.orgA) {
  const res = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', org.apiKey)
    .set('Idempotency-Key', `crypto-${++keyCounter}`)
    .send({ provider: 'CRYPTO', customerEmail: 'buyer@example.com', ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data;
}

const usdcSession = (amount: number, extra: Record<string, unknown> = {}) =>
  createSession({ pricingData: { amount, currency: 'USDC', productData: { name: 'Conference ticket' } }, ...extra });

async function getSession(id: string) {
  const res = await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', ctx.orgA.apiKey);
  expect(res.status).toBe(200);
  return res.body.data;
}

async function getOrder(id: string) {
  const res = await ctx.merchant.get(`/v1/orders/${id}`).set('X-API-Key', ctx.orgA.apiKey);
  expect(res.status).toBe(200);
  return res.body.data;
}

async function events(orderId: string): Promise<Array<{ type: string; order: any }>> {
  const rows = await ctx.testDb.database.db('webhook_events').select('type', 'payload', 'created_at').orderBy('seq');
  return rows
    .map((r: { type: string; payload: any }) => ({ type: r.type, order: (typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload).order }))
    .filter((e: { order?: { orderId: string } }) => e.order?.orderId === orderId);
}

async function transfersOf(txHash: string) {
  return ctx.testDb.database.db('crypto_transfers').where({ tx_hash: txHash });
}

beforeAll(async () => {
  chain = await startLocalChain();
  [, merchantWallet, buyer, stranger] = chain.accounts as [`0x${string}`, `0x${string}`, `0x${string}`, `0x${string}`];
  usdc = await chain.deployToken('USD Coin (test)', 'USDC');
  usdt = await chain.deployToken('Tether USD (test)', 'USDT');
  for (const who of [buyer, stranger]) {
    await chain.mint(usdc, who, USDC(100_000));
    await chain.mint(usdt, who, USDC(100_000));
  }
  ctx = await createTestContext({
    env: {
      LOG_LEVEL: 'warn',
      CRYPTO_CHAINS: JSON.stringify([
        {
          chainId: chain.chainId,
          name: 'Hardhat',
          rpcUrl: chain.url,
          confirmations: CONFIRMATIONS,
          explorerUrl: 'https://explorer.test',
          // Small ranges so the cursor walks several getLogs calls per pass.
          blockRange: 4,
          initialLookback: 1000,
          tokens: [
            { symbol: 'USDC', address: usdc, decimals: 6 },
            { symbol: 'USDT', address: usdt, decimals: 6 },
          ],
        },
      ]),
    },
    logDestination: { write: (line: string) => void logLines.push(line) },
  });
  const set = await ctx.admin.put(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${chain.chainId}`).send({ address: merchantWallet.toLowerCase() });
  expect(set.status, JSON.stringify(set.body)).toBe(200);
  expect(set.body.data.address).toBe(merchantWallet);
}, 120_000);

afterAll(async () => {
  await ctx?.close();
  await chain?.close();
});

describe('exact payment', () => {
  it('creates the order PENDING on first sight, then PAID after the configured confirmations', async () => {
    const session = await usdcSession(25_000_000, { merchantReference: 'inv-1', metadata: { cart: 'c1' } });
    expect(session.crypto).toEqual({
      chainId: chain.chainId,
      chain: `eip155:${chain.chainId}`,
      tokenSymbol: 'USDC',
      tokenAddress: usdc,
      recipient: merchantWallet,
      amountUnits: expect.stringMatching(/^250000\d\d$/),
    });
    const amount = BigInt(session.crypto.amountUnits);
    await runWatcher(); // the cursor starts; nothing to see yet
    const tx = await chain.transfer(usdc, buyer, merchantWallet, amount);
    await runWatcher();

    let read = await getSession(session.id);
    expect(read.status).toBe('COMPLETE');
    expect(read.url).toBeNull();
    expect(read.orderStatus).toBe('PENDING');
    let order = await getOrder(read.orderId);
    expect(order).toMatchObject({
      status: 'PENDING',
      displayStatus: 'Pending',
      provider: 'CRYPTO',
      amountCents: 25_000_000,
      amount: 25,
      currency: 'USDC',
      chain: `eip155:${chain.chainId}`,
      fromAddress: buyer,
      txHash: tx,
      amountReceivedCents: Number(amount),
      customerEmail: 'buyer@example.com',
      merchantReference: 'inv-1',
      merchantMetadata: { cart: 'c1' },
      checkoutSessionId: session.id,
    });
    expect(order).not.toHaveProperty('fundsSettled');
    expect(order).not.toHaveProperty('settledAvailableOn');

    // One block on top: 2 of 3 confirmations, still pending.
    await chain.mine(1);
    await runWatcher();
    expect((await getOrder(read.orderId)).status).toBe('PENDING');
    const page = await ctx.merchant.get(new URL(session.url).pathname);
    expect(page.text).toContain('Waiting for confirmations: 2 of 3');

    await chain.mine(1);
    await runWatcher();
    order = await getOrder(read.orderId);
    expect(order.status).toBe('PAID');
    // No processor stands between buyer and merchant: the payment is the transfer (txHash).
    expect(order).toMatchObject({ providerPaymentId: null, providerStatus: null, txHash: tx });
    read = await getSession(session.id);
    expect(read).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID' });

    const sent = await events(order.orderId);
    expect(sent.map((e) => e.type)).toEqual(['order.pending', 'order.paid']);
    expect(sent[1]!.order).toMatchObject({
      status: 'PAID',
      provider: 'CRYPTO',
      currency: 'usdc',
      amountCents: 25_000_000,
      merchantReference: 'inv-1',
      providerPaymentId: null,
      providerStatus: null,
      crypto: {
        chainId: `eip155:${chain.chainId}`,
        assetSymbol: 'USDC',
        txHash: tx,
        payer: `eip155:${chain.chainId}:${buyer}`,
        recipient: `eip155:${chain.chainId}:${merchantWallet}`,
      },
    });

    // from_address filters orders, case-insensitively.
    const list = await ctx.merchant.get('/v1/orders').query({ from_address: buyer.toLowerCase() }).set('X-API-Key', ctx.orgA.apiKey);
    expect(list.body.data.records.map((o: { orderId: string }) => o.orderId)).toContain(order.orderId);
    const none = await ctx.merchant.get('/v1/orders').query({ from_address: stranger }).set('X-API-Key', ctx.orgA.apiKey);
    expect(none.body.data.records.map((o: { orderId: string }) => o.orderId)).not.toContain(order.orderId);
    const paidPage = await ctx.merchant.get(new URL(session.url).pathname);
    expect(paidPage.text).toContain('Payment received');
  });

  it('matches two open sessions at the same price paid in reverse order, each to its own transfer', async () => {
    const first = await usdcSession(10_000_000);
    const second = await usdcSession(10_000_000);
    expect(first.crypto.amountUnits).not.toBe(second.crypto.amountUnits);
    expect(Math.abs(Number(first.crypto.amountUnits) - Number(second.crypto.amountUnits))).toBeLessThan(10_000);
    const txSecond = await chain.transfer(usdc, stranger, merchantWallet, BigInt(second.crypto.amountUnits));
    const txFirst = await chain.transfer(usdc, buyer, merchantWallet, BigInt(first.crypto.amountUnits));
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    const a = await getSession(first.id);
    const b = await getSession(second.id);
    expect(a.orderStatus).toBe('PAID');
    expect(b.orderStatus).toBe('PAID');
    expect(await getOrder(a.orderId)).toMatchObject({ txHash: txFirst, fromAddress: buyer, checkoutSessionId: first.id });
    expect(await getOrder(b.orderId)).toMatchObject({ txHash: txSecond, fromAddress: stranger, checkoutSessionId: second.id });
  });
});

describe('product access by wallet', () => {
  it('a paid crypto order of a catalog product grants access to the paying wallet', async () => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'E-book' });
    const price = await createPrice(ctx, product.productId, { amount: 9_000_000, currency: 'USDC', provider: 'CRYPTO' });
    const session = await createSession({ pricingId: price.pricingId });
    const check = () => ctx.merchant.get('/v1/entitlements/check').query({ wallet: stranger.toLowerCase(), product_id: product.productId }).set('X-API-Key', ctx.orgA.apiKey);
    expect((await check()).body.data.entitled).toBe(false);
    await chain.transfer(usdc, stranger, merchantWallet, BigInt(session.crypto.amountUnits));
    await runWatcher();
    expect((await check()).body.data.entitled).toBe(false); // PENDING grants nothing
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    const granted = await check();
    expect(granted.status).toBe(200);
    expect(granted.body.data.entitled).toBe(true);
  });
});

describe('amounts that are not exact', () => {
  it('records an underpayment as UNDERPAID (order.failed), never PAID; the session fails', async () => {
    const session = await usdcSession(40_000_000);
    const tx = await chain.transfer(usdc, buyer, merchantWallet, USDC(39));
    await runWatcher();
    const pending = await getSession(session.id);
    expect(pending.orderStatus).toBe('PENDING');
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    const read = await getSession(session.id);
    expect(read).toMatchObject({ status: 'FAILED', orderStatus: 'UNDERPAID' });
    const order = await getOrder(read.orderId);
    expect(order).toMatchObject({ status: 'UNDERPAID', displayStatus: 'Underpaid', amountCents: 40_000_000, amountReceivedCents: 39_000_000, txHash: tx });
    const sent = await events(order.orderId);
    expect(sent.map((e) => [e.type, e.order.status])).toEqual([
      ['order.pending', 'PENDING'],
      ['order.failed', 'UNDERPAID'],
    ]);
    const underpaid = await ctx.merchant.get('/v1/orders').query({ status: 'Underpaid' }).set('X-API-Key', ctx.orgA.apiKey);
    expect(underpaid.body.data.records.map((o: { orderId: string }) => o.orderId)).toContain(order.orderId);
    const page = await ctx.merchant.get(new URL(session.url).pathname);
    expect(page.text).toContain('less than the amount due');
  });

  it('marks an overpayment PAID and records what arrived', async () => {
    const session = await usdcSession(50_000_000);
    await chain.transfer(usdc, buyer, merchantWallet, USDC(52.5));
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    const read = await getSession(session.id);
    expect(read).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID' });
    const order = await getOrder(read.orderId);
    expect(order.amountCents).toBe(50_000_000);
    expect(order.amountReceivedCents).toBe(52_500_000);
  });

  it('ignores (but records and logs) a transfer from an unrelated sender with a non-matching amount', async () => {
    const session = await usdcSession(60_000_000);
    const before = (await ctx.merchant.get('/v1/orders').query({ size: 100 }).set('X-API-Key', ctx.orgA.apiKey)).body.data.total;
    const tx = await chain.transfer(usdc, stranger, merchantWallet, USDC(1234.56));
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    const after = (await ctx.merchant.get('/v1/orders').query({ size: 100 }).set('X-API-Key', ctx.orgA.apiKey)).body.data.total;
    expect(after).toBe(before);
    expect((await getSession(session.id)).status).toBe('CREATED');
    const [row] = await transfersOf(tx);
    expect(row).toMatchObject({ status: 'IGNORED', checkout_session_id: null, note: 'no open quote matches this amount' });
    expect(logLines.some((l) => l.includes(tx) && l.includes('ignored'))).toBe(true);
    const listed = await ctx.admin.get('/v1/crypto-transfers').query({ status: 'IGNORED', chainId: chain.chainId });
    expect(listed.status).toBe(200);
    expect(listed.body.data.records.find((t: { txHash: string }) => t.txHash === tx)).toMatchObject({ valueUnits: '1234560000', fromAddress: stranger, orderId: null });
    // The still-open session pays normally afterwards.
    await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    expect((await getSession(session.id)).orderStatus).toBe('PAID');
  });

  it('accepts a USDT session on the USDT contract only', async () => {
    const session = await createSession({ pricingData: { amount: 5_000_000, currency: 'USDT', productData: { name: 'Sticker' } } });
    expect(session.crypto).toMatchObject({ tokenSymbol: 'USDT', tokenAddress: usdt });
    // The same amount in USDC does not pay a USDT session.
    const wrong = await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    expect((await getSession(session.id)).orderId).toBeNull();
    expect((await transfersOf(wrong))[0]).toMatchObject({ status: 'IGNORED' });
    await chain.transfer(usdt, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    expect((await getSession(session.id)).orderStatus).toBe('PAID');
  });
});

describe('one transaction, one payment', () => {
  it('a second transfer to a paid session is recorded but changes nothing', async () => {
    const session = await usdcSession(7_000_000);
    await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    const paid = await getSession(session.id);
    const again = await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    const order = await getOrder(paid.orderId);
    expect(order.txHash).not.toBe(again);
    expect(order.status).toBe('PAID');
    expect((await transfersOf(again))[0]).toMatchObject({ status: 'IGNORED', note: 'the session already has a payment (duplicate transfer)' });
    expect((await events(order.orderId)).map((e) => e.type)).toEqual(['order.pending', 'order.paid']);
  });

  it('a transaction with two matching Transfer logs pays only one session', async () => {
    const a = await usdcSession(3_000_000);
    const b = await usdcSession(4_000_000);
    const tx = await chain.transferTwice(usdc, buyer, [merchantWallet, BigInt(a.crypto.amountUnits)], [merchantWallet, BigInt(b.crypto.amountUnits)]);
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    expect((await getSession(a.id)).orderStatus).toBe('PAID');
    expect((await getSession(b.id)).orderId).toBeNull();
    const rows = await transfersOf(tx);
    expect(rows).toHaveLength(2);
    expect(rows.find((r: { checkout_session_id: string | null }) => r.checkout_session_id === null)).toMatchObject({ status: 'IGNORED', note: 'its transaction already pays a session' });
  });
});

describe('late payment', () => {
  it('records a payment that arrives after expiry on an order; the session stays EXPIRED', async () => {
    const session = await usdcSession(8_000_000, { expiresIn: 60 });
    ctx.clock.advance(120_000);
    await chain.increaseTime(120);
    expect((await getSession(session.id)).status).toBe('EXPIRED');
    const page = await ctx.merchant.get(new URL(session.url).pathname);
    expect(page.status).toBe(410);
    const tx = await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await runWatcher();
    let read = await getSession(session.id);
    expect(read).toMatchObject({ status: 'EXPIRED', url: null, orderStatus: 'PENDING' });
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    read = await getSession(session.id);
    expect(read).toMatchObject({ status: 'EXPIRED', orderStatus: 'PAID' });
    expect(await getOrder(read.orderId)).toMatchObject({ status: 'PAID', txHash: tx, checkoutSessionId: session.id });
  });
});

describe('watcher restarts and concurrency', () => {
  it('resumes from its stored cursor and never counts a transfer twice, even when the range is rescanned', async () => {
    const session = await usdcSession(11_000_000);
    const tx = await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await runWatcher();
    const cursorBefore = await ctx.testDb.database.db('crypto_chain_cursors').where({ chain_id: chain.chainId }).first();
    expect(Number(cursorBefore.next_block)).toBe((await chain.blockNumber()) + 1);

    // A "restarted" worker: a new watcher object over the same database.
    const fresh = () => new ChainWatcher(new KnexCryptoRepository(ctx.testDb.database.db), ctx.services.payments, ctx.config.crypto, ctx.clock, createLogger({ level: 'silent' }));
    await chain.mine(1);
    await runWatcher(fresh());
    const cursorAfter = await ctx.testDb.database.db('crypto_chain_cursors').where({ chain_id: chain.chainId }).first();
    expect(Number(cursorAfter.next_block)).toBe((await chain.blockNumber()) + 1);

    // A crash before the cursor was saved: the same blocks are scanned again.
    await ctx.testDb.database.db('crypto_chain_cursors').where({ chain_id: chain.chainId }).update({ next_block: Number(cursorBefore.next_block) - 3, last_block_hash: null });
    await chain.mine(CONFIRMATIONS);
    await runWatcher(fresh());
    expect(await transfersOf(tx)).toHaveLength(1);
    const read = await getSession(session.id);
    expect(read.orderStatus).toBe('PAID');
    expect((await events(read.orderId)).map((e) => e.type)).toEqual(['order.pending', 'order.paid']);
  });

  it('two workers running at once create one order and one event per transition', async () => {
    const session = await usdcSession(12_000_000);
    const tx = await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await chain.mine(CONFIRMATIONS);
    const workers = [0, 1].map(() => new ChainWatcher(new KnexCryptoRepository(ctx.testDb.database.db), ctx.services.payments, ctx.config.crypto, ctx.clock, createLogger({ level: 'silent' })));
    await Promise.all(workers.map((w) => runWatcher(w)));
    await runWatcher(workers[1]);
    const read = await getSession(session.id);
    expect(read.orderStatus).toBe('PAID');
    expect(await transfersOf(tx)).toHaveLength(1);
    expect((await events(read.orderId)).map((e) => e.type)).toEqual(['order.pending', 'order.paid']);
  });

  it('a worker holding a stale copy of a transfer never moves it back from CONFIRMED', async () => {
    const session = await usdcSession(13_000_000);
    const tx = await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await runWatcher();
    const [pending] = await transfersOf(tx);
    expect(pending.status).toBe('PENDING');

    // Worker A read the transfers to follow (PENDING) and then stalled — its lease lapsed — while
    // worker B confirmed the payment. A then carries on with what it read.
    const repo = new KnexCryptoRepository(ctx.testDb.database.db);
    const staleCopies = await repo.transfersToFollow(chain.chainId, new Date(0), 100);
    expect(staleCopies.some((t) => t.txHash === tx)).toBe(true);
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    expect((await transfersOf(tx))[0].status).toBe('CONFIRMED');

    const stalled = new ChainWatcher(repo, ctx.services.payments, ctx.config.crypto, ctx.clock, createLogger({ level: 'silent' }));
    repo.transfersToFollow = async () => staleCopies;
    // Every status the transfer has in the database after each of the stalled worker's writes.
    const observed: string[] = [];
    const update = repo.updateTransfer.bind(repo);
    repo.updateTransfer = async (...args) => {
      const written = await update(...args);
      observed.push((await transfersOf(tx))[0].status);
      return written;
    };
    await chain.mine(1);
    await runWatcher(stalled);
    expect(observed.filter((status) => status !== 'CONFIRMED')).toEqual([]);

    const [after] = await transfersOf(tx);
    expect(after.status).toBe('CONFIRMED');
    const read = await getSession(session.id);
    expect(read.orderStatus).toBe('PAID');
    expect((await events(read.orderId)).map((e) => e.type)).toEqual(['order.pending', 'order.paid']);
    // And the compare-and-set itself: a write expecting PENDING is refused and changes nothing.
    const stale = staleCopies.find((t) => t.txHash === tx)!;
    expect(await repo.updateTransfer({ ...stale, confirmations: 0 }, 'PENDING')).toBe(false);
    expect((await transfersOf(tx))[0].status).toBe('CONFIRMED');
  });
});

describe('chain reorganization', () => {
  it('a transfer removed before confirmation fails the order and reopens the session; a new transfer pays it', async () => {
    const session = await usdcSession(13_000_000);
    await runWatcher();
    const snapshot = await chain.snapshot();
    const orphan = await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await runWatcher();
    let read = await getSession(session.id);
    expect(read.orderStatus).toBe('PENDING');
    const orderId = read.orderId;

    await chain.revert(snapshot);
    await chain.mine(2); // the replacing blocks, without the transfer
    await runWatcher();
    read = await getSession(session.id);
    expect(read).toMatchObject({ status: 'CREATED', orderId, orderStatus: 'FAILED' });
    expect(read.url).toEqual(expect.any(String));
    expect((await transfersOf(orphan))[0]).toMatchObject({ status: 'REMOVED' });
    const page = await ctx.merchant.get(new URL(read.url).pathname);
    expect(page.text).toContain('no longer on the chain');
    expect(page.text).toContain('data-testid="instructions"');

    const tx = await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await runWatcher();
    expect((await getSession(session.id)).orderStatus).toBe('PENDING');
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    read = await getSession(session.id);
    expect(read).toMatchObject({ status: 'COMPLETE', orderId, orderStatus: 'PAID' });
    expect(await getOrder(orderId)).toMatchObject({ txHash: tx, status: 'PAID' });
    expect((await events(orderId)).map((e) => [e.type, e.order.status, e.order.crypto.txHash])).toEqual([
      ['order.pending', 'PENDING', orphan],
      ['order.failed', 'FAILED', orphan],
      ['order.pending', 'PENDING', tx],
      ['order.paid', 'PAID', tx],
    ]);
    expect(getAddress(read.crypto.recipient)).toBe(merchantWallet);
    expect(logLines.some((l) => l.includes('chain reorganization detected'))).toBe(true);
  });

  it('the same transaction mined again after a reorganization pays the same order', async () => {
    const session = await usdcSession(14_000_000);
    await runWatcher();
    const raw = await chain.signTransfer(usdc, 2, merchantWallet, BigInt(session.crypto.amountUnits));
    const snapshot = await chain.snapshot();
    const tx = await chain.sendRaw(raw);
    await runWatcher();
    const orderId = (await getSession(session.id)).orderId;
    await chain.revert(snapshot);
    await chain.mine(2);
    await runWatcher();
    expect((await getSession(session.id)).orderStatus).toBe('FAILED');

    expect(await chain.sendRaw(raw)).toBe(tx); // re-broadcast: same hash, another block
    await chain.mine(CONFIRMATIONS);
    await runWatcher();
    const read = await getSession(session.id);
    expect(read).toMatchObject({ status: 'COMPLETE', orderId, orderStatus: 'PAID' });
    expect(await getOrder(orderId)).toMatchObject({ txHash: tx, fromAddress: buyer });
    const rows = await transfersOf(tx);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'CONFIRMED', order_id: orderId });
    expect((await events(orderId)).map((e) => e.type)).toEqual(['order.pending', 'order.failed', 'order.pending', 'order.paid']);
  });
});

/** The real node, with `after` told of each call once it answered (to move the clock as if the call had been slow, or to interleave another worker). */
function hookedClient(after: (method: keyof ChainClient) => void | Promise<void>): (chain: ChainConfig) => ChainClient {
  return (config) => {
    const node = new ViemChainClient(config.rpcUrl);
    const hooked = <T>(method: keyof ChainClient, answer: T) => Promise.resolve(after(method)).then(() => answer);
    return {
      blockNumber: async () => hooked('blockNumber', await node.blockNumber()),
      block: async (number) => hooked('block', await node.block(number)),
      transferLogs: async (tokens, recipients, from, to) => hooked('transferLogs', await node.transferLogs(tokens, recipients, from, to)),
      receipt: async (txHash) => hooked('receipt', await node.receipt(txHash)),
    };
  };
}

describe('cursor lease', () => {
  const cursorRow = async () =>
    (await ctx.testDb.database.db('crypto_chain_cursors').where({ chain_id: chain.chainId }).first()) as { next_block: string | number; lease_owner: string | null };
  const watcherWith = (clientFor: (chain: ChainConfig) => ChainClient, repo = new KnexCryptoRepository(ctx.testDb.database.db), logger = createLogger({ level: 'silent' })) =>
    new ChainWatcher(repo, ctx.services.payments, ctx.config.crypto, ctx.clock, logger, clientFor);
  const leaseMs = () => ctx.config.crypto.watcherLeaseSeconds * 1000;

  it('a pass longer than the lease renews it as it goes: it completes, saves its cursor, and no other watcher gets the chain meanwhile', async () => {
    expect(ctx.config.crypto.watcherLeaseSeconds).toBe(30);
    await runWatcher();
    const sessions = [await usdcSession(15_000_000), await usdcSession(16_000_000)];
    const txs: string[] = [];
    for (const session of sessions) txs.push(await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits)));
    await chain.mine(CONFIRMATIONS);
    const before = Number((await cursorRow()).next_block);
    const chainConfig = ctx.config.crypto.chains[0]!;

    // Every answer of the node takes 7 s of the watcher's clock; after each one a second watcher
    // tries the chain. Its RPC calls would show that it got the cursor.
    const intruderCalls: string[] = [];
    const intruder = watcherWith(hookedClient((method) => void intruderCalls.push(method)));
    const intruderPasses: Array<{ at: number; scanned: boolean }> = [];
    const started = ctx.clock.now().getTime();
    const slow = watcherWith(
      hookedClient(async () => {
        ctx.clock.advance(7_000);
        intruderPasses.push({ at: ctx.clock.now().getTime(), scanned: await intruder.pass(chainConfig) });
      }),
    );
    await slow.pass(chainConfig);

    // The chain stayed the slow watcher's throughout...
    expect(intruderPasses.every((p) => !p.scanned)).toBe(true);
    expect(intruderCalls).toEqual([]);
    // ...including after the lease it took at the start had run out.
    expect(ctx.clock.now().getTime() - started).toBeGreaterThan(leaseMs());
    expect(intruderPasses.filter((p) => p.at > started + leaseMs()).length).toBeGreaterThan(0);
    const after = await cursorRow();
    expect(Number(after.next_block)).toBe(before + chainConfig.blockRange);
    expect(after.lease_owner).toBeNull(); // released at the end of the pass
    for (const tx of txs) expect(await transfersOf(tx)).toHaveLength(1);

    await runWatcher();
    for (const session of sessions) {
      const read = await getSession(session.id);
      expect(read.orderStatus).toBe('PAID');
      expect((await events(read.orderId)).map((e) => e.type)).toEqual(['order.pending', 'order.paid']);
    }
  });

  it('a single slow RPC call does not lose the chain: a timer renews the lease while the pass waits', async () => {
    await runWatcher();
    const session = await usdcSession(17_000_000);
    const tx = await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await chain.mine(CONFIRMATIONS);
    const chainConfig = ctx.config.crypto.chains[0]!;
    const config = { ...ctx.config.crypto, watcherLeaseSeconds: 10 };
    const intruderCalls: string[] = [];
    const intruder = new ChainWatcher(new KnexCryptoRepository(ctx.testDb.database.db), ctx.services.payments, config, ctx.clock, createLogger({ level: 'silent' }), hookedClient((m) => void intruderCalls.push(m)));
    let stalled = false;
    let intruderScanned: boolean | undefined;
    const slow = new ChainWatcher(
      new KnexCryptoRepository(ctx.testDb.database.db),
      ctx.services.payments,
      config,
      ctx.clock,
      createLogger({ level: 'silent' }),
      hookedClient(async (method) => {
        if (method !== 'transferLogs' || stalled) return;
        stalled = true;
        // One eth_getLogs answer takes 9 s of the watcher's clock (no checkpoint in between) and,
        // in real time, until the renewal timer (every 3.3 s) has extended the lease: a fixed wait
        // of 4 s failed when a loaded machine ran the timer's write later.
        const leasedAtStart = new Date((await ctx.testDb.database.db('crypto_chain_cursors').where({ chain_id: chain.chainId }).first('leased_until')).leased_until).getTime();
        ctx.clock.advance(9_000);
        await expect
          .poll(async () => new Date((await ctx.testDb.database.db('crypto_chain_cursors').where({ chain_id: chain.chainId }).first('leased_until')).leased_until).getTime(), { timeout: 30_000 })
          .toBeGreaterThan(leasedAtStart);
        ctx.clock.advance(3_000); // 12 s in all: past the lease the pass took at its start
        intruderScanned = await intruder.pass(chainConfig);
      }),
    );
    await slow.pass(chainConfig);
    expect(stalled).toBe(true);
    expect(intruderScanned).toBe(false);
    expect(intruderCalls).toEqual([]);
    expect(await transfersOf(tx)).toHaveLength(1);
    expect((await cursorRow()).lease_owner).toBeNull();
  }, 60_000);

  it('renewing is a compare-and-set on the owner: only the holder extends it, and only until another worker takes it over', async () => {
    const repo = new KnexCryptoRepository(ctx.testDb.database.db);
    const at = (ms: number) => new Date(ctx.clock.now().getTime() + ms);
    expect(await repo.leaseCursor(chain.chainId, 'worker-x', at(0), at(30_000))).toBeDefined();
    expect(await repo.renewCursorLease(chain.chainId, 'worker-y', at(31_000))).toBe(false);
    expect(await repo.renewCursorLease(chain.chainId, 'worker-x', at(40_000))).toBe(true);
    // Lapsed at 40 s but nobody took it: still the holder's to renew.
    expect(await repo.renewCursorLease(chain.chainId, 'worker-x', at(75_000))).toBe(true);
    expect(await repo.leaseCursor(chain.chainId, 'worker-y', at(50_000), at(80_000))).toBeUndefined();
    // Lapsed at 75 s and taken over: the old holder can neither renew nor save.
    expect(await repo.leaseCursor(chain.chainId, 'worker-y', at(76_000), at(106_000))).toBeDefined();
    expect(await repo.renewCursorLease(chain.chainId, 'worker-x', at(107_000))).toBe(false);
    expect(await repo.saveCursor(chain.chainId, 'worker-x', 1, '0x00', at(77_000))).toBe(false);
    await repo.releaseCursor(chain.chainId, 'worker-y');
    expect((await cursorRow()).lease_owner).toBeNull();
  });

  it('a watcher whose lease lapsed and was taken over stops at its next checkpoint without saving its cursor', async () => {
    await runWatcher();
    const session = await usdcSession(17_000_000);
    const tx = await chain.transfer(usdc, buyer, merchantWallet, BigInt(session.crypto.amountUnits));
    await chain.mine(CONFIRMATIONS);
    const before = await cursorRow();
    const chainConfig = ctx.config.crypto.chains[0]!;

    // B holds the cursor from its first RPC call until the test lets it go on.
    let takenOver!: () => void;
    const bHasTheCursor = new Promise<void>((resolve) => (takenOver = resolve));
    let letBGoOn!: () => void;
    const bMayGoOn = new Promise<void>((resolve) => (letBGoOn = resolve));
    let ownerB: string | null = null;
    const b = watcherWith(
      hookedClient(async () => {
        if (ownerB !== null) return;
        ownerB = (await cursorRow()).lease_owner;
        takenOver();
        await bMayGoOn;
      }),
    );

    // A stalls in eth_getLogs for longer than its lease; B's pass meanwhile takes the lapsed lease.
    const repoA = new KnexCryptoRepository(ctx.testDb.database.db);
    let savesByA = 0;
    const save = repoA.saveCursor.bind(repoA);
    repoA.saveCursor = async (...args) => {
      savesByA++;
      return save(...args);
    };
    const linesA: string[] = [];
    const callsA: string[] = [];
    let passB: Promise<boolean> | undefined;
    const a = watcherWith(
      hookedClient(async (method) => {
        callsA.push(method);
        if (method !== 'transferLogs') return;
        ctx.clock.advance(leaseMs() + 1_000);
        passB = b.pass(chainConfig);
        await bHasTheCursor;
      }),
      repoA,
      createLogger({ level: 'warn', destination: { write: (line: string) => void linesA.push(line) } }),
    );
    expect(await a.runOnce()).toBe(false);

    // Stopped at the checkpoint after eth_getLogs: nothing recorded, the cursor neither saved nor freed.
    expect(callsA).toEqual(['blockNumber', 'block', 'transferLogs']);
    expect(savesByA).toBe(0);
    expect(await transfersOf(tx)).toHaveLength(0);
    const during = await cursorRow();
    expect(ownerB).toMatch(/^watcher-/);
    expect(during.lease_owner).toBe(ownerB);
    expect(Number(during.next_block)).toBe(Number(before.next_block));
    // Logged as the expected outcome of a stall, not as a failure.
    expect(linesA.map((l) => JSON.parse(l) as { level: number; msg: string })).toEqual([
      expect.objectContaining({ level: 40, msg: 'crypto chain watcher lost its cursor lease mid-pass; pass stopped', chainId: chain.chainId }),
    ]);

    letBGoOn();
    await passB;
    const after = await cursorRow();
    expect(Number(after.next_block)).toBeGreaterThan(Number(before.next_block));
    expect(after.lease_owner).toBeNull();
    await runWatcher();
    const read = await getSession(session.id);
    expect(read.orderStatus).toBe('PAID');
    expect(await transfersOf(tx)).toHaveLength(1);
    expect((await events(read.orderId)).map((e) => e.type)).toEqual(['order.pending', 'order.paid']);
  });
});
