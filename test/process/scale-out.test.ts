/**
 * Scale-out on one PostgreSQL: two `--role api` and two `--role worker` processes (real child
 * processes of `src/main.ts`) share one database and nothing else. They start together on an
 * empty database (migrations serialize on an advisory lock), and then:
 * - concurrent creations with one Idempotency-Key, spread over both API processes, make one session;
 * - an asynchronous sandbox payment is settled once although both workers poll for it (one
 *   `order.paid` event);
 * - webhook deliveries are claimed by one worker at a time (never two attempts of one delivery in
 *   flight), every event arrives, and the attempts both workers report add up to the deliveries;
 * - due subscription renewals are taken by both workers and each period is renewed once;
 * - crypto checkout paid on a local EVM (Hardhat in this process, JSON-RPC over HTTP to the
 *   workers): both workers watch the chain; every session is paid once (one order, one
 *   `order.pending`, one `order.paid`, one transfer row), including a block that both workers are
 *   made to scan at the same time (the cursor's lease taken from the first one mid-scan), and the
 *   cursor reaches the head.
 * Runs only with TEST_DATABASE_URL (the embedded database is single-process by design).
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
import {
  MONTHLY,
  ONE_TIME,
  REPO_ROOT,
  createCheckout,
  createDatabase,
  cryptoOneTime,
  http,
  newDeployment,
  payOnHostedPage,
  provisionMerchant,
  setReceivingWallet,
  startKassa,
  tallyCryptoSessions,
  waitFor,
  type KassaProcess,
  type ThrowAwayDatabase,
} from '../../tools/cluster.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';
import { cryptoChainsEnv, startLocalChain, USDC, type LocalChain } from '../crypto-payments/chain.js';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { migrationSource } from '../../src/db/migrations/index.js';

const serverUrl = process.env.TEST_DATABASE_URL;
const CONFIRMATIONS = 3;

describe.skipIf(!serverUrl)(skippedUnless('two API processes and two workers on one PostgreSQL', 'postgresOnly'), () => {
  let db: ThrowAwayDatabase;
  let direct: pg.Client;
  let receiver: Receiver;
  let api1: KassaProcess;
  let api2: KassaProcess;
  let workers: KassaProcess[];
  let merchant: { orgId: string; apiKey: string };
  let chain: LocalChain;
  let usdc: `0x${string}`;
  /** Every eth_getLogs range the workers asked the node for. */
  const scans: Array<[number, number]> = [];
  /** Set by the crypto test: the first scan of `block` is held until a second scan of it arrives. */
  let rendezvous: { block: number; release?: () => void; met: boolean } | undefined;
  const count = async (sql: string, params: unknown[] = []) => Number((await direct.query(sql, params)).rows[0].n);

  beforeAll(async () => {
    [db, chain] = await Promise.all([
      createDatabase(serverUrl!, 'kassa_scale'),
      // Genesis now: the child processes run on the real clock, and quotes match block times.
      startLocalChain({
        initialDate: new Date().toISOString(),
        onRequest: async (method, params) => {
          if (method !== 'eth_getLogs') return;
          const filter = params[0] as { fromBlock: string; toBlock: string };
          const range: [number, number] = [Number(filter.fromBlock), Number(filter.toBlock)];
          scans.push(range);
          const r = rendezvous;
          if (!r || r.met || range[0] > r.block || range[1] < r.block) return;
          if (r.release) {
            r.met = true;
            r.release();
            return;
          }
          // The first worker to scan the block waits here with the cursor's lease expired under
          // it (as if it had stalled past the lease): the other worker takes the cursor, reads
          // the same unsaved position and scans the same blocks while the first is mid-scan.
          await new Promise<void>((resolve) => {
            r.release = resolve;
            setTimeout(resolve, 10_000);
            direct.query(`UPDATE crypto_chain_cursors SET leased_until = now() - interval '1 second'`).catch(() => {});
          });
        },
      }),
    ]);
    usdc = await chain.deployToken('USD Coin (test)', 'USDC');
    for (const buyer of chain.accounts.slice(2, 4)) await chain.mint(usdc, buyer, USDC(10_000));
    receiver = await startReceiver();
    const deployment = newDeployment(db.url, {
      WEBHOOK_ALLOW_LOOPBACK: 'true',
      NODE_EXTRA_CA_CERTS: path.join(REPO_ROOT, 'test/webhooks/fixtures/receiver-cert.pem'),
      SANDBOX_SETTLE_DELAY_MS: '300',
      MERCHANT_RATE_LIMIT_PER_MINUTE: '0',
      LOG_LEVEL: 'warn',
      // Small ranges: the cursor walks the chain in several leased steps.
      CRYPTO_CHAINS: cryptoChainsEnv(chain, usdc, { confirmations: CONFIRMATIONS, blockRange: 3 }),
      CRYPTO_POLL_INTERVAL_MS: '200',
    });
    // All four at once on an empty database: whoever gets the advisory lock migrates; the others
    // wait for it, so each readiness wait covers the whole migration (~18 s of CPU, several times
    // that under CI's load).
    const readyTimeoutMs = 240_000;
    [api1, api2, ...workers] = await Promise.all([
      startKassa(deployment, { role: 'api', name: 'api-1', readyTimeoutMs }),
      startKassa(deployment, { role: 'api', name: 'api-2', readyTimeoutMs }),
      startKassa(deployment, { role: 'worker', name: 'worker-1', readyTimeoutMs }),
      startKassa(deployment, { role: 'worker', name: 'worker-2', readyTimeoutMs }),
    ]);
    direct = new pg.Client({ connectionString: db.url });
    await direct.connect();
    merchant = await provisionMerchant(api1.adminUrl, deployment.adminToken);
    const endpoint = await http('POST', `${api2.merchantUrl}/v1/webhook`, {
      headers: { 'X-API-Key': merchant.apiKey },
      body: { name: 'Scale-out receiver', url: receiver.url(), events: ['order.paid', 'order.pending'] },
    });
    expect(endpoint.status).toBe(201);
    await setReceivingWallet(api2.adminUrl, deployment.adminToken, merchant.orgId, chain.chainId, chain.accounts[1]!);
  }, 360_000);

  afterAll(async () => {
    rendezvous?.release?.();
    await Promise.all([api1, api2, ...(workers ?? [])].filter(Boolean).map((p) => p.stop()));
    await direct?.end();
    await receiver?.close();
    await chain?.close();
    await db?.drop();
  });

  it('started together on an empty database: every process is up and the schema was migrated once', async () => {
    for (const p of [api1, api2, ...workers]) expect(p.child.exitCode).toBeNull();
    expect(await count(`SELECT count(*) AS n FROM knex_migrations`)).toBe(await count(`SELECT count(DISTINCT name) AS n FROM knex_migrations`));
  });

  it('concurrent creations with one Idempotency-Key over both API processes make one session', async () => {
    const key = randomUUID();
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        http('POST', `${(i % 2 ? api1 : api2).merchantUrl}/v1/checkout-sessions`, { headers: { 'X-API-Key': merchant.apiKey, 'Idempotency-Key': key }, body: ONE_TIME }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(16).fill(201));
    const ids = new Set(results.map((r) => r.json.data.id));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(15);
    expect(await count(`SELECT count(*) AS n FROM checkout_sessions WHERE org_id = $1 AND id = ANY($2)`, [merchant.orgId, [...ids]])).toBe(1);
    expect(await count(`SELECT count(*) AS n FROM idempotency_keys WHERE org_id = $1 AND key = $2`, [merchant.orgId, key])).toBe(1);
    // The same key with other parameters is refused by either process.
    const reused = await http('POST', `${api1.merchantUrl}/v1/checkout-sessions`, { headers: { 'X-API-Key': merchant.apiKey, 'Idempotency-Key': key }, body: { ...ONE_TIME, quantity: 2 } });
    expect(reused.status).toBe(409);
    expect(reused.json.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('an asynchronous sandbox payment is settled exactly once although both workers poll for it', async () => {
    const session = await createCheckout(api1.merchantUrl, merchant.apiKey, ONE_TIME, randomUUID());
    // Paid through the other API process: the hosted page works on any of them.
    expect(await payOnHostedPage(session.url, '4000000000000077', api2.merchantUrl)).toBe(303);
    const order = await waitFor(
      'the payment to settle',
      async () => {
        const res = await http('GET', `${api2.merchantUrl}/v1/checkout-sessions/${session.id}`, { headers: { 'X-API-Key': merchant.apiKey } });
        const orderId = res.json?.data?.orderId as string | undefined;
        if (!orderId) return undefined;
        const o = await http('GET', `${api1.merchantUrl}/v1/orders/${orderId}`, { headers: { 'X-API-Key': merchant.apiKey } });
        return o.json?.data?.status === 'PAID' ? o.json.data : undefined;
      },
      20_000,
      100,
    );
    const events = await direct.query(`SELECT id, type FROM webhook_events WHERE payload->'order'->>'orderId' = $1 ORDER BY seq`, [order.orderId]);
    expect(events.rows.map((e) => e.type)).toEqual(['order.pending', 'order.paid']);
    const paidEventId = events.rows[1].id as string;
    await waitFor('order.paid to be delivered', async () => receiver.received.some((r) => r.headers['webhook-id'] === paidEventId), 20_000);
    // Give a duplicate (if any) time to show up before counting.
    await new Promise((r) => setTimeout(r, 1500));
    expect(receiver.received.filter((r) => r.headers['webhook-id'] === paidEventId)).toHaveLength(1);
  });

  it('webhook deliveries: each event arrives, one attempt at a time, and the workers’ attempts add up', async () => {
    receiver.reset();
    // A slow receiver keeps deliveries in flight while the other worker polls.
    receiver.respond = () => ({ status: 200, body: 'ok', delayMs: 150 });
    const payments = 24;
    await Promise.all(
      Array.from({ length: payments }, async (_, i) => {
        const via = i % 2 ? api1 : api2;
        const session = await createCheckout(via.merchantUrl, merchant.apiKey, ONE_TIME, randomUUID());
        expect(await payOnHostedPage(session.url, '4242424242424242', via.merchantUrl)).toBe(303);
      }),
    );
    await waitFor('every delivery to succeed', async () => (await count(`SELECT count(*) AS n FROM webhook_deliveries WHERE org_id = $1 AND status = 'pending'`, [merchant.orgId])) === 0, 45_000, 200);
    const deliveries = await direct.query(
      `SELECT d.event_id, d.status, count(a.id) AS attempts, max(a.status_code) AS code
         FROM webhook_deliveries d LEFT JOIN webhook_attempts a ON a.delivery_id = d.id
        WHERE d.org_id = $1 GROUP BY d.id`,
      [merchant.orgId],
    );
    expect(deliveries.rows.length).toBeGreaterThanOrEqual(payments);
    for (const row of deliveries.rows) {
      expect({ ...row, attempts: Number(row.attempts) }).toMatchObject({ status: 'succeeded', attempts: 1, code: 200 });
    }
    const received = receiver.received.map((r) => String(r.headers['webhook-id']));
    const fresh = deliveries.rows.map((r) => r.event_id as string).filter((id) => received.includes(id));
    expect(new Set(received).size).toBe(received.length);
    expect(fresh.length).toBe(received.length);
    expect(receiver.maxConcurrentPerId()).toBe(1);

    // Both workers' counters together: exactly one attempt per delivery in this database.
    const total = await count(`SELECT count(*) AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.org_id = $1`, [merchant.orgId]);
    let reported = 0;
    for (const worker of workers) {
      const scrape = await http('GET', `${worker.adminUrl}/metrics`);
      expect(scrape.status).toBe(200);
      const match = /^kassa_webhook_attempts_total\{outcome="succeeded",role="worker"\} (\d+)$/m.exec(scrape.text);
      reported += Number(match?.[1] ?? NaN);
    }
    expect(reported).toBe(total);
  });

  it('due renewals taken by both workers are renewed once per period', async () => {
    const subscriptions = 12;
    for (let i = 0; i < subscriptions; i++) {
      const session = await createCheckout(api1.merchantUrl, merchant.apiKey, MONTHLY, randomUUID());
      expect(await payOnHostedPage(session.url)).toBe(303);
    }
    await direct.query(`UPDATE subscriptions SET next_action_at = now() - interval '1 second' WHERE org_id = $1 AND status = 'ACTIVE'`, [merchant.orgId]);
    await waitFor(
      'every renewal',
      async () => (await count(`SELECT count(*) AS n FROM subscriptions WHERE org_id = $1 AND period_number = 1`, [merchant.orgId])) === subscriptions,
      30_000,
      200,
    );
    const perSubscription = await direct.query(
      `SELECT (SELECT count(*) FROM orders o WHERE o.subscription_id = s.id AND o.billing_period = 1) AS n FROM subscriptions s WHERE s.org_id = $1`,
      [merchant.orgId],
    );
    expect(perSubscription.rows.map((r) => Number(r.n))).toEqual(Array(subscriptions).fill(1));
    expect(await count(`SELECT count(*) AS n FROM webhook_events WHERE org_id = $1 AND type = 'subscription.updated'`, [merchant.orgId])).toBe(subscriptions);
  });

  it('crypto payments watched by both workers: each session paid once, also in a block both scan at the same time', async () => {
    const merchantWallet = chain.accounts[1]!;
    const [buyer1, buyer2] = chain.accounts.slice(2, 4) as [`0x${string}`, `0x${string}`];
    const sessionCount = 12;
    // Created over both API processes; distinct prices, so no two creations race for an amount.
    const sessions = await Promise.all(
      Array.from({ length: sessionCount }, async (_, i) => {
        const res = await http('POST', `${(i % 2 ? api1 : api2).merchantUrl}/v1/checkout-sessions`, {
          headers: { 'X-API-Key': merchant.apiKey, 'Idempotency-Key': randomUUID() },
          body: cryptoOneTime(3_000_000 + i * 10_000),
        });
        expect(res.status, res.text).toBe(201);
        expect(res.json.data.crypto).toMatchObject({ chainId: chain.chainId, tokenAddress: usdc, recipient: merchantWallet });
        return { id: res.json.data.id as string, amount: BigInt(res.json.data.crypto.amountUnits) };
      }),
    );
    const ids = sessions.map((s) => s.id);
    // Eight payments in eight consecutive blocks, while both workers poll the chain.
    const blocks: number[] = [];
    for (const session of sessions.slice(0, 8)) {
      const hash = await chain.transfer(usdc, buyer1, merchantWallet, session.amount);
      blocks.push(Number((await chain.rpc<{ blockNumber: string }>('eth_getTransactionReceipt', [hash])).blockNumber));
    }
    expect(blocks.every((b, i) => i === 0 || b === blocks[i - 1]! + 1)).toBe(true);
    // Four in one block that both workers scan at the same time (see `rendezvous`).
    await chain.setAutomine(false);
    const hashes: `0x${string}`[] = [];
    try {
      for (const [i, session] of sessions.slice(8).entries()) hashes.push(await chain.submitTransfer(usdc, i % 2 ? buyer2 : buyer1, merchantWallet, session.amount));
      rendezvous = { block: (await chain.blockNumber()) + 1, met: false };
      await chain.mine(1);
    } finally {
      await chain.setAutomine(true);
    }
    const shared = rendezvous.block;
    for (const hash of hashes) {
      const receipt = await chain.rpc<{ blockNumber: string; status: string }>('eth_getTransactionReceipt', [hash]);
      expect([Number(receipt.blockNumber), receipt.status]).toEqual([shared, '0x1']);
    }
    await waitFor('both workers to scan the shared block', async () => rendezvous!.met, 15_000, 50);
    await chain.mine(CONFIRMATIONS);
    const head = await chain.blockNumber();
    await waitFor(
      'every crypto order to be PAID',
      async () => (await tallyCryptoSessions(direct, ids)).every((t) => t.orderStatus === 'PAID'),
      30_000,
      200,
    );
    await waitFor('the cursor to reach the head', async () => (await count(`SELECT next_block AS n FROM crypto_chain_cursors WHERE chain_id = $1`, [chain.chainId])) === head + 1, 15_000, 100);

    // Each session once: COMPLETE, one PAID order, one order.pending, one order.paid (one
    // delivery of it), one transfer row; and no transfer row beyond the twelve payments.
    expect(await tallyCryptoSessions(direct, ids)).toEqual(
      [...ids].sort().map((id) => ({ id, status: 'COMPLETE', orders: 1, orderStatus: 'PAID', pendingEvents: 1, paidEvents: 1, paidDeliveries: 1, transfers: 1 })),
    );
    expect(await count(`SELECT count(*) AS n FROM crypto_transfers`)).toBe(sessionCount);
    expect(await count(`SELECT count(*) AS n FROM crypto_transfers WHERE status = 'CONFIRMED' AND order_id IS NOT NULL`)).toBe(sessionCount);
    // The shared block was scanned twice at once; the others were covered by the cursor's steps.
    expect(scans.filter(([from, to]) => from <= shared && shared <= to).length).toBeGreaterThanOrEqual(2);
    for (const block of blocks) expect(scans.some(([from, to]) => from <= block && block <= to)).toBe(true);
    // Both workers held the cursor (each reports the lag after a pass that held it).
    for (const worker of workers) {
      const scrape = await http('GET', `${worker.adminUrl}/metrics`);
      expect(scrape.text).toMatch(new RegExp(`^kassa_chain_watcher_lag_blocks\\{chain_id="${chain.chainId}"[^}]*\\} \\d+$`, 'm'));
    }
  }, 90_000);
});

describe.skipIf(!serverUrl)(skippedUnless('processes starting together on an empty database', 'postgresOnly'), () => {
  it('migrate once: knex alone fails the losers of the race, the advisory lock queues them', async () => {
    for (const locked of [false, true]) {
      const db = await createDatabase(serverUrl!, 'kassa_migrace');
      const handles = await Promise.all([0, 1, 2, 3].map(() => openDatabase({ databaseUrl: db.url })));
      try {
        const results = await Promise.allSettled(handles.map((h) => (locked ? migrateLatest(h.db) : h.db.migrate.latest({ migrationSource }))));
        const failed = results.filter((r) => r.status === 'rejected').length;
        if (locked) expect(failed).toBe(0);
        // Without the lock the race is usually lost by someone; it is not guaranteed, so only report it.
        else console.info(`plain knex migrations, 4 processes at once: ${failed} failed`);
      } finally {
        await Promise.all(handles.map((h) => h.close()));
        await db.drop();
      }
    }
  }, 120_000);
});
