/**
 * `npm run fault:kill-worker`: a worker process is killed with SIGKILL in the middle of its work
 * and a new one takes over. Three rounds on one throw-away database, with an API process, a
 * local HTTPS webhook receiver that answers slowly (so deliveries are in flight at the kill) and
 * a local EVM (Hardhat in this process, JSON-RPC over HTTP, as in the crypto tests):
 *
 * 1. deliveries: N card payments queue N `order.paid` events; the worker is killed once a few
 *    have arrived; the replacement must deliver every event (nothing lost), re-send only the ones
 *    whose attempt the dead worker left unrecorded (at least once, each recorded as `abandoned`),
 *    and never have two attempts of one delivery in flight at once;
 * 2. renewals: M subscriptions are made due; the worker is killed while it renews them; the
 *    replacement must renew every one exactly once (one period-1 order, one `order.paid` for it,
 *    one `subscription.updated` per renewal) — renewals are transactional, so a kill rolls back;
 * 3. chain watching: K crypto sessions are paid on chain (one block each, confirmations mined);
 *    a worker scans them one block per pass from a slow node and is killed once the first session
 *    is COMPLETE, holding the chain cursor's lease mid-pass. The workers run with a short lease
 *    (CRYPTO_WATCHER_LEASE_SECONDS=20; 30 by default), which lapses for real: the replacement,
 *    started after the kill, must leave the chain alone until then, then resume from the cursor the dead
 *    worker saved and finish every session exactly once (one PAID order, one `order.pending`, one
 *    `order.paid`, one transfer row each).
 *
 * FAULT_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres) is the server.
 * test/process/faults.test.ts runs the same scenario and asserts on what it returns.
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import {
  DEFAULT_SERVER_URL,
  MONTHLY,
  ONE_TIME,
  REPO_ROOT,
  createCheckout,
  createDatabase,
  http,
  newDeployment,
  payOnHostedPage,
  provisionMerchant,
  sleep,
  startKassa,
  cryptoOneTime,
  setReceivingWallet,
  tallyCryptoSessions,
  waitFor,
  type KassaProcess,
} from '../cluster.js';
import { startReceiver } from '../../test/webhooks/receiver.js';
import { cryptoChainsEnv, startLocalChain, USDC } from '../../test/crypto-payments/chain.js';

export const LEASE_SECONDS = 15;
/**
 * The chain watcher's cursor lease in round 3, waited out for real: short, yet long enough for the
 * replacement worker to boot (a few seconds on a loaded 2-core machine) while the lease still lives.
 */
export const CHAIN_LEASE_SECONDS = 20;
/** Confirmations of the local chain in round 3. */
const CONFIRMATIONS = 3;
/** How long the local node takes to answer eth_getLogs in round 3 (a slow node keeps passes in flight). */
const SLOW_LOGS_MS = 100;

export interface KillWorkerReport {
  deliveries: {
    events: number;
    receivedAtKill: number;
    leasedAtKill: number;
    /** Events the receiver never got (must be 0). */
    lost: string[];
    /** Events received more than once. */
    duplicates: string[];
    /** Duplicated events whose delivery has no `abandoned` attempt (must be 0: a duplicate is only allowed for a lost attempt). */
    unexplainedDuplicates: string[];
    abandonedAttempts: number;
    notSucceeded: number;
    maxConcurrentPerId: number;
    secondsToDrain: number;
  };
  renewals: {
    subscriptions: number;
    renewedAtKill: number;
    /** Subscriptions without exactly one period-1 order (must be 0). */
    wrongOrderCount: number;
    /** Renewal orders without exactly one order.paid event (must be 0). */
    wrongPaidEvents: number;
    /** Subscriptions without exactly one subscription.updated event (must be 0). */
    wrongUpdatedEvents: number;
    notRenewed: number;
  };
  chainWatching: {
    sessions: number;
    completedAtKill: number;
    paidAtKill: number;
    /** The dead worker held the chain cursor's lease at the kill (it was mid-pass). */
    leaseHeldAtKill: boolean;
    /** The cursor the dead worker saved last (the next block to scan). */
    cursorAtKill: number;
    /** eth_getLogs calls while the dead worker's lease was live (must be 0: one scanner per chain), and whether the cursor moved meanwhile. */
    scansWhileLeased: number;
    cursorMovedWhileLeased: boolean;
    /** From the kill to the expiry of the dead worker's last lease (at most CHAIN_LEASE_SECONDS). */
    secondsLeaseOutlivedKill: number;
    /** How long the replacement was up (ready) while that lease still lived: > 0, or it had nothing to leave alone. */
    secondsReplacementWaited: number;
    /** Where the replacement's first scan started (must be cursorAtKill: nothing skipped, nothing rescanned from scratch). */
    resumedFrom: number | null;
    /** Sessions not COMPLETE at the end (must be 0). */
    notComplete: number;
    /** Sessions without exactly one order, or whose order is not PAID (must be 0). */
    wrongOrders: number;
    /** Sessions without exactly one order.pending / order.paid event, or one delivery of it (must be 0). */
    wrongPendingEvents: number;
    wrongPaidEvents: number;
    wrongPaidDeliveries: number;
    /** Sessions without exactly one crypto_transfers row; and all rows (must equal sessions). */
    wrongTransfers: number;
    transferRows: number;
    /** The cursor reached the chain head. */
    cursorAtHead: boolean;
    /** From the lease's expiry to every session PAID. */
    secondsToFinish: number;
    /** From the kill to every session PAID: the lease's remaining life plus the replacement's scanning. */
    secondsToRecover: number;
  };
  logs: string;
}

async function inParallel(total: number, concurrency: number, task: () => Promise<void>): Promise<void> {
  let started = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (started < total) {
        started++;
        await task();
      }
    }),
  );
}

export async function runKillWorker(
  options: { serverUrl?: string; events?: number; subscriptions?: number; cryptoPayments?: number; log?: (line: string) => void } = {},
): Promise<KillWorkerReport> {
  const log = options.log ?? (() => {});
  const serverUrl = options.serverUrl ?? DEFAULT_SERVER_URL;
  const eventCount = options.events ?? 30;
  const subscriptionCount = options.subscriptions ?? 40;
  const cryptoCount = options.cryptoPayments ?? 12;
  /** eth_getLogs calls the workers made: when, and from which block. */
  const scans: Array<{ at: number; from: number }> = [];
  let slowLogs = false;
  // Genesis now: the workers run on the real clock, and quotes match block times.
  const chain = await startLocalChain({
    initialDate: new Date().toISOString(),
    onRequest: async (method, params) => {
      if (method !== 'eth_getLogs') return;
      scans.push({ at: Date.now(), from: Number((params[0] as { fromBlock: string }).fromBlock) });
      if (slowLogs) await sleep(SLOW_LOGS_MS);
    },
  });
  const db = await createDatabase(serverUrl, 'kassa_fault');
  const direct = new pg.Client({ connectionString: db.url });
  const receiver = await startReceiver();
  const processes: KassaProcess[] = [];
  const start = async (role: 'api' | 'worker', name: string, waitReady = true) => {
    const p = await startKassa(deployment, { role, name, waitReady });
    processes.push(p);
    return p;
  };
  let deployment!: ReturnType<typeof newDeployment>;
  try {
    const usdc = await chain.deployToken('USD Coin (test)', 'USDC');
    const [, merchantWallet, buyer] = chain.accounts as [`0x${string}`, `0x${string}`, `0x${string}`];
    await chain.mint(usdc, buyer, USDC(10_000));
    deployment = newDeployment(db.url, {
      WEBHOOK_ALLOW_LOOPBACK: 'true',
      NODE_EXTRA_CA_CERTS: path.join(REPO_ROOT, 'test/webhooks/fixtures/receiver-cert.pem'),
      WEBHOOK_DELIVERY_LEASE_SECONDS: String(LEASE_SECONDS),
      MERCHANT_RATE_LIMIT_PER_MINUTE: '0',
      // One block per pass: scanning the payments takes many leased steps.
      CRYPTO_CHAINS: cryptoChainsEnv(chain, usdc, { confirmations: CONFIRMATIONS, blockRange: 1 }),
      CRYPTO_POLL_INTERVAL_MS: '200',
      CRYPTO_WATCHER_LEASE_SECONDS: String(CHAIN_LEASE_SECONDS),
    });
    const api = await start('api', 'api');
    await direct.connect();
    const merchant = await provisionMerchant(api.adminUrl, deployment.adminToken);
    const endpoint = await http('POST', `${api.merchantUrl}/v1/webhook`, {
      headers: { 'X-API-Key': merchant.apiKey },
      body: { name: 'fault receiver', url: receiver.url(), events: ['order.paid'] },
    });
    if (endpoint.status !== 201) throw new Error(`webhook endpoint: ${endpoint.status} ${endpoint.text}`);

    // ---- 1. deliveries -------------------------------------------------------------------
    // Slow answers keep a batch of attempts in flight for most of the time.
    receiver.respond = () => ({ status: 200, body: 'ok', delayMs: 700 });
    await inParallel(eventCount, 4, async () => {
      const session = await createCheckout(api.merchantUrl, merchant.apiKey, ONE_TIME, randomUUID());
      const status = await payOnHostedPage(session.url);
      if (status !== 303) throw new Error(`payment answered ${status}`);
    });
    const events = (await direct.query(`SELECT id FROM webhook_events WHERE org_id = $1 AND type = 'order.paid'`, [merchant.orgId])).rows.map((r) => r.id as string);
    log(`${events.length} order.paid events queued; starting worker 1`);
    const worker1 = await start('worker', 'worker-1');
    await waitFor('the first deliveries', async () => receiver.received.length >= 3, 60_000, 20);
    await worker1.kill();
    const receivedAtKill = receiver.received.length;
    const leasedAtKill = Number(
      (await direct.query(`SELECT count(*) AS n FROM webhook_deliveries WHERE org_id = $1 AND status = 'pending' AND lease_until > now()`, [merchant.orgId])).rows[0].n,
    );
    log(`worker 1 killed (SIGKILL) with ${receivedAtKill} requests received and ${leasedAtKill} deliveries leased; starting worker 2`);
    const killedAt = Date.now();
    const worker2 = await start('worker', 'worker-2');
    await waitFor(
      'every delivery to finish',
      async () => Number((await direct.query(`SELECT count(*) AS n FROM webhook_deliveries WHERE org_id = $1 AND status = 'pending'`, [merchant.orgId])).rows[0].n) === 0,
      LEASE_SECONDS * 1000 + 60_000,
      250,
    );
    const secondsToDrain = (Date.now() - killedAt) / 1000;
    // Requests still being answered when the delivery was recorded: let them land.
    await sleep(1000);
    const receivedIds = receiver.received.map((r) => String(r.headers['webhook-id']));
    const timesReceived = new Map<string, number>();
    for (const id of receivedIds) timesReceived.set(id, (timesReceived.get(id) ?? 0) + 1);
    const duplicates = [...timesReceived].filter(([, n]) => n > 1).map(([id]) => id);
    const abandoned = await direct.query(
      `SELECT d.event_id FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.org_id = $1 AND a.error LIKE 'abandoned:%'`,
      [merchant.orgId],
    );
    const abandonedEvents = new Set(abandoned.rows.map((r) => r.event_id as string));
    const notSucceeded = Number((await direct.query(`SELECT count(*) AS n FROM webhook_deliveries WHERE org_id = $1 AND status <> 'succeeded'`, [merchant.orgId])).rows[0].n);
    const deliveries = {
      events: events.length,
      receivedAtKill,
      leasedAtKill,
      lost: events.filter((id) => !timesReceived.has(id)),
      duplicates,
      unexplainedDuplicates: duplicates.filter((id) => !abandonedEvents.has(id)),
      abandonedAttempts: abandoned.rows.length,
      notSucceeded,
      maxConcurrentPerId: receiver.maxConcurrentPerId(),
      secondsToDrain,
    };

    // ---- 2. renewals ---------------------------------------------------------------------
    await worker2.stop();
    receiver.respond = () => ({ status: 200, body: 'ok' });
    const subscriptionIds: string[] = [];
    await inParallel(subscriptionCount, 4, async () => {
      const session = await createCheckout(api.merchantUrl, merchant.apiKey, MONTHLY, randomUUID());
      const status = await payOnHostedPage(session.url);
      if (status !== 303) throw new Error(`subscription payment answered ${status}`);
    });
    for (const row of (await direct.query(`SELECT id FROM subscriptions WHERE org_id = $1 AND status = 'ACTIVE'`, [merchant.orgId])).rows) subscriptionIds.push(row.id);
    // Due now: the renewal of period 1 is what the next worker pass does.
    await direct.query(`UPDATE subscriptions SET next_action_at = now() - interval '1 second' WHERE org_id = $1`, [merchant.orgId]);
    const renewedCount = async () =>
      Number((await direct.query(`SELECT count(*) AS n FROM orders WHERE org_id = $1 AND subscription_id IS NOT NULL AND billing_period = 1`, [merchant.orgId])).rows[0].n);
    log(`${subscriptionIds.length} subscriptions due; starting worker 3`);
    const worker3 = await start('worker', 'worker-3');
    await waitFor('the first renewals', async () => (await renewedCount()) >= 3, 60_000, 5);
    await worker3.kill();
    const renewedAtKill = await renewedCount();
    log(`worker 3 killed (SIGKILL) after ${renewedAtKill} of ${subscriptionIds.length} renewals; starting worker 4`);
    const worker4 = await start('worker', 'worker-4');
    await waitFor(
      'every renewal',
      async () => Number((await direct.query(`SELECT count(*) AS n FROM subscriptions WHERE org_id = $1 AND period_number = 1`, [merchant.orgId])).rows[0].n) === subscriptionIds.length,
      60_000,
      250,
    );
    const perSubscription = await direct.query(
      `SELECT s.id,
              (SELECT count(*) FROM orders o WHERE o.subscription_id = s.id AND o.billing_period = 1) AS orders,
              (SELECT count(*) FROM webhook_events e JOIN orders o ON o.subscription_id = s.id AND o.billing_period = 1
                 WHERE e.type = 'order.paid' AND e.payload->'order'->>'orderId' = o.id) AS paid_events,
              (SELECT count(*) FROM webhook_events e WHERE e.type = 'subscription.updated' AND e.payload->'subscription'->>'subscriptionId' = s.id) AS updated_events,
              s.period_number
         FROM subscriptions s WHERE s.org_id = $1`,
      [merchant.orgId],
    );
    const rows = perSubscription.rows as Array<{ orders: string; paid_events: string; updated_events: string; period_number: number }>;
    const renewals = {
      subscriptions: subscriptionIds.length,
      renewedAtKill,
      wrongOrderCount: rows.filter((r) => Number(r.orders) !== 1).length,
      wrongPaidEvents: rows.filter((r) => Number(r.paid_events) !== 1).length,
      wrongUpdatedEvents: rows.filter((r) => Number(r.updated_events) !== 1).length,
      notRenewed: rows.filter((r) => r.period_number !== 1).length,
    };

    // ---- 3. chain watching --------------------------------------------------------------
    await worker4.stop();
    await setReceivingWallet(api.adminUrl, deployment.adminToken, merchant.orgId, chain.chainId, merchantWallet);
    const sessionIds: string[] = [];
    for (let i = 0; i < cryptoCount; i++) {
      const res = await http('POST', `${api.merchantUrl}/v1/checkout-sessions`, {
        headers: { 'X-API-Key': merchant.apiKey, 'Idempotency-Key': randomUUID() },
        body: cryptoOneTime(2_000_000 + i * 10_000),
      });
      if (res.status !== 201) throw new Error(`crypto checkout: ${res.status} ${res.text}`);
      sessionIds.push(res.json.data.id);
      // Paid at once, one block per payment.
      await chain.transfer(usdc, buyer, merchantWallet, BigInt(res.json.data.crypto.amountUnits));
    }
    await chain.mine(CONFIRMATIONS);
    const head = await chain.blockNumber();
    const countOf = async (status: 'COMPLETE' | 'PAID') =>
      (await tallyCryptoSessions(direct, sessionIds)).filter((t) => (status === 'PAID' ? t.orderStatus === 'PAID' : t.status === 'COMPLETE')).length;
    const cursor = async () =>
      (
        await direct.query(
          `SELECT next_block, lease_owner, leased_until > now() AS leased, (extract(epoch FROM leased_until) * 1000)::float8 AS leased_until_ms
             FROM crypto_chain_cursors WHERE chain_id = $1`,
          [chain.chainId],
        )
      ).rows[0] as { next_block: string | null; lease_owner: string | null; leased: boolean | null; leased_until_ms: number | null } | undefined;
    slowLogs = true;
    log(`${sessionIds.length} crypto sessions paid in blocks up to ${head - CONFIRMATIONS}; starting worker 5`);
    // Not waiting for readiness: the watcher starts with the process.
    const worker5 = await start('worker', 'worker-5', false);
    await waitFor(
      'the first crypto session to complete',
      async () => {
        if (worker5.child.exitCode !== null) throw new Error(`worker 5 exited: ${worker5.output().slice(-2000)}`);
        return (await countOf('COMPLETE')) >= 1;
      },
      60_000,
      5,
    );
    await worker5.kill();
    const worker5KilledAt = Date.now();
    const completedAtKill = await countOf('COMPLETE');
    const paidAtKill = await countOf('PAID');
    const atKill = await cursor();
    const leaseHeldAtKill = atKill?.leased === true;
    const cursorAtKill = Number(atKill?.next_block ?? -1);
    log(`worker 5 killed (SIGKILL) with ${completedAtKill} of ${sessionIds.length} sessions complete (${paidAtKill} paid), cursor at block ${cursorAtKill}, lease ${leaseHeldAtKill ? 'held' : 'free'}; starting worker 6`);
    const replacementStarted = Date.now();
    await start('worker', 'worker-6');
    const replacementReady = Date.now();
    // The dead worker's lease keeps the chain to itself until it lapses: the replacement waits.
    // Its expiry is read until the replacement takes the cursor (a renewal the dead worker sent
    // just before the kill may still have landed after the first read).
    const deadOwner = atKill?.lease_owner ?? null;
    let leaseLapsed = Number(atKill?.leased_until_ms ?? worker5KilledAt);
    let cursorUnmoved = true;
    await waitFor(
      "the dead worker's lease to lapse",
      async () => {
        const row = await cursor();
        const held = deadOwner !== null && row?.lease_owner === deadOwner;
        if (held) leaseLapsed = Number(row.leased_until_ms);
        if (Date.now() < leaseLapsed) cursorUnmoved &&= Number(row?.next_block ?? -1) === cursorAtKill;
        return !held || row.leased !== true;
      },
      CHAIN_LEASE_SECONDS * 1000 + 15_000,
      50,
    );
    const scansWhileLeased = scans.filter((s) => s.at >= replacementStarted && s.at < leaseLapsed).length;
    log(`worker 5's cursor lease lapsed ${((leaseLapsed - worker5KilledAt) / 1000).toFixed(1)} s after the kill; worker 6 takes the chain over`);
    await waitFor('every crypto session to be paid', async () => (await countOf('PAID')) === sessionIds.length, 60_000, 100);
    const paidAt = Date.now();
    const secondsToFinish = (paidAt - leaseLapsed) / 1000;
    const cursorAtHead = await waitFor('the cursor to reach the head', async () => Number((await cursor())?.next_block) === head + 1, 15_000, 100).catch(() => false);
    slowLogs = false;
    const tally = await tallyCryptoSessions(direct, sessionIds);
    const chainWatching = {
      sessions: sessionIds.length,
      completedAtKill,
      paidAtKill,
      leaseHeldAtKill,
      cursorAtKill,
      scansWhileLeased,
      cursorMovedWhileLeased: !cursorUnmoved,
      secondsLeaseOutlivedKill: (leaseLapsed - worker5KilledAt) / 1000,
      secondsReplacementWaited: (leaseLapsed - replacementReady) / 1000,
      resumedFrom: scans.find((s) => s.at >= leaseLapsed)?.from ?? null,
      notComplete: tally.filter((t) => t.status !== 'COMPLETE').length,
      wrongOrders: tally.filter((t) => t.orders !== 1 || t.orderStatus !== 'PAID').length,
      wrongPendingEvents: tally.filter((t) => t.pendingEvents !== 1).length,
      wrongPaidEvents: tally.filter((t) => t.paidEvents !== 1).length,
      wrongPaidDeliveries: tally.filter((t) => t.paidDeliveries !== 1).length,
      wrongTransfers: tally.filter((t) => t.transfers !== 1).length,
      transferRows: Number((await direct.query(`SELECT count(*) AS n FROM crypto_transfers`)).rows[0].n),
      cursorAtHead: cursorAtHead === true,
      secondsToFinish,
      secondsToRecover: (paidAt - worker5KilledAt) / 1000,
    };
    return { deliveries, renewals, chainWatching, logs: processes.map((p) => `---- ${p.name}\n${p.output()}`).join('\n') };
  } finally {
    await Promise.all(processes.map((p) => p.stop()));
    await direct.end().catch(() => {});
    await receiver.close();
    await chain.close();
    await db.drop();
  }
}

async function main(): Promise<void> {
  const report = await runKillWorker({ serverUrl: process.env.FAULT_POSTGRES_URL, log: (line) => console.log(`- ${line}`) });
  const d = report.deliveries;
  const r = report.renewals;
  const c = report.chainWatching;
  const checks: Array<[string, boolean]> = [
    [`deliveries: ${d.events} events, none lost (lost: ${d.lost.length})`, d.lost.length === 0],
    [`deliveries: all succeeded after the restart (not succeeded: ${d.notSucceeded}; drained ${d.secondsToDrain.toFixed(1)} s after the kill, lease ${LEASE_SECONDS} s)`, d.notSucceeded === 0],
    [`deliveries: ${d.duplicates.length} sent twice, each one an attempt the dead worker left unrecorded (${d.abandonedAttempts} abandoned attempts, unexplained: ${d.unexplainedDuplicates.length})`, d.unexplainedDuplicates.length === 0],
    [`deliveries: never two attempts of one delivery at once (max in flight per id: ${d.maxConcurrentPerId})`, d.maxConcurrentPerId <= 1],
    [`renewals: ${r.subscriptions} subscriptions, killed after ${r.renewedAtKill}; all renewed once (not renewed: ${r.notRenewed})`, r.notRenewed === 0 && r.renewedAtKill < r.subscriptions],
    [`renewals: exactly one period-1 order each (wrong: ${r.wrongOrderCount})`, r.wrongOrderCount === 0],
    [`renewals: exactly one order.paid per renewal order (wrong: ${r.wrongPaidEvents})`, r.wrongPaidEvents === 0],
    [`renewals: exactly one subscription.updated each (wrong: ${r.wrongUpdatedEvents})`, r.wrongUpdatedEvents === 0],
    [
      `chain: ${c.sessions} sessions paid on chain, worker killed mid-pass after ${c.completedAtKill} complete (${c.paidAtKill} paid) holding the cursor lease: ${c.leaseHeldAtKill}`,
      c.leaseHeldAtKill && c.completedAtKill < c.sessions,
    ],
    [
      `chain: the dead worker's lease lapsed ${c.secondsLeaseOutlivedKill.toFixed(1)} s after the kill (lease ${CHAIN_LEASE_SECONDS} s)`,
      c.secondsLeaseOutlivedKill <= CHAIN_LEASE_SECONDS,
    ],
    [
      `chain: the replacement, up ${c.secondsReplacementWaited.toFixed(1)} s before that, left the chain alone while the lease lived (scans meanwhile: ${c.scansWhileLeased}, cursor moved: ${c.cursorMovedWhileLeased})`,
      c.secondsReplacementWaited > 0 && c.scansWhileLeased === 0 && !c.cursorMovedWhileLeased,
    ],
    [`chain: then resumed at the saved cursor (block ${c.resumedFrom ?? 'none'}, saved ${c.cursorAtKill}) and reached the head: ${c.cursorAtHead}`, c.resumedFrom === c.cursorAtKill && c.cursorAtHead],
    [
      `chain: every session COMPLETE with one PAID order (not complete: ${c.notComplete}, wrong: ${c.wrongOrders}; ${c.secondsToFinish.toFixed(1)} s after the lease lapsed, recovered ${c.secondsToRecover.toFixed(1)} s after the kill)`,
      c.notComplete === 0 && c.wrongOrders === 0,
    ],
    [
      `chain: one order.pending, one order.paid and one delivery of it each (wrong: ${c.wrongPendingEvents}, ${c.wrongPaidEvents}, ${c.wrongPaidDeliveries})`,
      c.wrongPendingEvents === 0 && c.wrongPaidEvents === 0 && c.wrongPaidDeliveries === 0,
    ],
    [`chain: one transfer row each (wrong: ${c.wrongTransfers}; rows ${c.transferRows})`, c.wrongTransfers === 0 && c.transferRows === c.sessions],
  ];
  let ok = true;
  console.log('');
  for (const [label, pass] of checks) {
    console.log(`  ${pass ? 'ok  ' : 'FAIL'} ${label}`);
    ok &&= pass;
  }
  process.exitCode = ok ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
