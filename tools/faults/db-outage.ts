/**
 * `npm run fault:db-outage`: PostgreSQL disappears under load and comes back.
 *
 * A Kassa API process talks to its own throw-away database through a TCP proxy (so the shared
 * PostgreSQL server is never stopped). Eight clients create checkout sessions with fresh
 * Idempotency-Keys in a loop while the proxy
 *   1. is cut the way a stopped PostgreSQL looks (connections reset, new ones refused), then
 *      restored: every request must answer 201 or 503 SERVICE_UNAVAILABLE (never 500, never hang
 *      past the documented bound), and creations succeed again within 5 s of the restore with no
 *      restart;
 *   2. (--partition) blackholes the traffic like a network partition, then heals it.
 * With --stop there is no proxy: the API process uses a PostgreSQL server of its own
 * (startPrivatePostgres: initdb in a temporary folder), which is really stopped — first a clean
 * shutdown (`pg_ctl stop -m fast`: sessions terminated with 57P01), then a crash
 * (`-m immediate`: connections vanish, crash recovery at the next start) — and started again;
 * recovery is counted from the moment the restarted server accepts connections.
 * Afterwards, directly on the database: no session without its idempotency record and the reverse,
 * and every key that got 503 creates (or replays) exactly one session when retried.
 *
 * BENCH/FAULT_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres) is the server.
 * test/process/faults.test.ts runs the same scenario and asserts on what it returns.
 */
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import {
  DEFAULT_SERVER_URL,
  createDatabase,
  http,
  newDeployment,
  provisionMerchant,
  sleep,
  startDatabaseProxy,
  startKassa,
  startPrivatePostgres,
  type DatabaseProxy,
  type KassaProcess,
  type PrivatePostgres,
} from '../cluster.js';

/** The documented worst case for a request while PostgreSQL is stopped (README "Faults"). */
export const STOPPED_BOUND_MS = 5_000;
/** The documented worst case during a partition: client-side query timeout plus slack. */
export const PARTITION_BOUND_MS = 21_000;
export const RECOVERY_BOUND_MS = 5_000;

export interface Outcome {
  key: string;
  startedAt: number;
  ms: number;
  status: number;
  code?: string;
  sessionId?: string;
}

export type OutageMode = 'refuse' | 'blackhole' | 'stop-fast' | 'stop-immediate';

export interface PhaseReport {
  mode: OutageMode;
  /** Requests in flight when the database went away or started while it was away. */
  requestsDuringOutage: number;
  statusesDuringOutage: Record<string, number>;
  /** Slowest of those answers. */
  maxOutageLatencyMs: number;
  p50OutageLatencyMs: number;
  /** From the restore to the first 201 of a request started after it. */
  recoveryMs: number | null;
  unexpected: Outcome[];
}

export interface OutageReport {
  phases: PhaseReport[];
  /** Sessions without an idempotency record plus records without a session (must be 0). */
  orphans: number;
  /** Keys that answered 503, retried after the outage. */
  retried: number;
  /** Retried keys whose retry did not answer 201 (must be 0). */
  retryFailures: Outcome[];
  /** Keys answered with more than one session id (must be 0). */
  duplicateSessions: number;
  /** Distinct keys sent under load; after the retries, exactly this many sessions exist. */
  keys: number;
  sessionsCreated: number;
  bodyOf503?: unknown;
  serverLog: string;
}

const body = { pricingData: { amount: 1500, currency: 'USD', productData: { name: 'Outage test' } }, customerEmail: 'buyer@example.com' };

async function createSession(api: KassaProcess, apiKey: string, key: string, timeoutMs: number): Promise<Outcome> {
  const startedAt = Date.now();
  try {
    const res = await http('POST', `${api.merchantUrl}/v1/checkout-sessions`, {
      headers: { 'X-API-Key': apiKey, 'Idempotency-Key': key },
      body,
      timeoutMs,
    });
    return { key, startedAt, ms: Date.now() - startedAt, status: res.status, code: res.json?.error?.code, sessionId: res.json?.data?.id };
  } catch (err) {
    return { key, startedAt, ms: Date.now() - startedAt, status: 0, code: `client: ${(err as Error).name}` };
  }
}

const percentile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * (sorted.length - 1)))]! : 0;
};

/** How the database goes away and comes back: through the proxy, or by stopping a private server. */
interface OutageControl {
  cut(mode: OutageMode): Promise<void>;
  restore(): Promise<void>;
}

const DESCRIPTION: Record<OutageMode, string> = {
  refuse: 'stopped (connections reset, new ones refused)',
  blackhole: 'partitioned (no byte goes through)',
  'stop-fast': 'server stopped (pg_ctl stop -m fast: sessions terminated)',
  'stop-immediate': 'server crashed (pg_ctl stop -m immediate: connections vanish, crash recovery at start)',
};

export async function runDbOutage(
  options: { serverUrl?: string; partition?: boolean; stopServer?: boolean; clients?: number; log?: (line: string) => void } = {},
): Promise<OutageReport> {
  const log = options.log ?? (() => {});
  const clients = options.clients ?? 8;
  const privateServer = options.stopServer ? await startPrivatePostgres() : undefined;
  try {
    return await outageOn(privateServer, options, log, clients);
  } finally {
    await privateServer?.destroy();
  }
}

async function outageOn(
  privateServer: PrivatePostgres | undefined,
  options: { serverUrl?: string; partition?: boolean },
  log: (line: string) => void,
  clients: number,
): Promise<OutageReport> {
  const serverUrl = privateServer?.url ?? options.serverUrl ?? DEFAULT_SERVER_URL;
  const db = await createDatabase(serverUrl, 'kassa_fault');
  let proxy: DatabaseProxy | undefined;
  const control: OutageControl = privateServer
    ? { cut: (mode) => privateServer.stop(mode === 'stop-immediate' ? 'immediate' : 'fast'), restore: () => privateServer.start() }
    : { cut: (mode) => proxy!.cut(mode as 'refuse' | 'blackhole'), restore: () => proxy!.restore() };
  const direct = new pg.Client({ connectionString: db.url });
  let api: KassaProcess | undefined;
  try {
    if (!privateServer) proxy = await startDatabaseProxy(db.url);
    const deployment = newDeployment(proxy?.url ?? db.url, { MERCHANT_RATE_LIMIT_PER_MINUTE: '0' });
    api = await startKassa(deployment, { role: 'api', name: 'api' });
    const merchant = await provisionMerchant(api.adminUrl, deployment.adminToken);
    log(`api process up (pid ${api.child.pid}), database ${db.name} ${proxy ? `behind proxy :${proxy.port}` : `on its own PostgreSQL server :${privateServer!.port}`}`);

    const outcomes: Outcome[] = [];
    let running = true;
    const requestTimeout = options.partition ? 60_000 : 30_000;
    const loops = Array.from({ length: clients }, async () => {
      while (running) {
        const outcome = await createSession(api!, merchant.apiKey, randomUUID(), requestTimeout);
        outcomes.push(outcome);
        // A client that just got 503 backs off a little, as the contract asks.
        if (outcome.status !== 201) await sleep(50);
      }
    });

    const phases: PhaseReport[] = [];
    const modes: OutageMode[] = privateServer ? ['stop-fast', 'stop-immediate'] : options.partition ? ['refuse', 'blackhole'] : ['refuse'];
    await sleep(1500);
    for (const mode of modes) {
      // The partition outlasts the client-side query timeout, so requests stuck on a connection
      // whose bytes go nowhere have to be answered by it.
      const outageMs = mode === 'blackhole' ? 25_000 : 3000;
      const cutAt = Date.now();
      await control.cut(mode);
      log(`database ${DESCRIPTION[mode]} for ${outageMs} ms`);
      await sleep(outageMs);
      const restoringAt = Date.now();
      await control.restore();
      // A restarted server counts as back once it accepts connections (pg_ctl start -w).
      const restoredAt = Date.now();
      log(`database back${privateServer ? ` (the server took ${restoredAt - restoringAt} ms to start)` : ''}`);
      // Keep the load on until every request started during the outage has answered, then a bit.
      const bound = mode === 'blackhole' ? PARTITION_BOUND_MS : STOPPED_BOUND_MS;
      const settleUntil = Date.now() + Math.max(3000, mode === 'blackhole' ? bound - outageMs + 1000 : 3000);
      while (Date.now() < settleUntil) await sleep(100);
      // In flight at the cut or started during the outage.
      const during = outcomes.filter((o) => o.startedAt < restoredAt && o.startedAt + o.ms > cutAt);
      const firstOk = outcomes.filter((o) => o.startedAt >= restoredAt && o.status === 201).sort((a, b) => a.startedAt + a.ms - (b.startedAt + b.ms))[0];
      const statuses: Record<string, number> = {};
      for (const o of during) statuses[`${o.status}${o.code ? ` ${o.code}` : ''}`] = (statuses[`${o.status}${o.code ? ` ${o.code}` : ''}`] ?? 0) + 1;
      phases.push({
        mode,
        requestsDuringOutage: during.length,
        statusesDuringOutage: statuses,
        maxOutageLatencyMs: Math.max(0, ...during.map((o) => o.ms)),
        p50OutageLatencyMs: percentile(during.map((o) => o.ms), 0.5),
        recoveryMs: firstOk ? firstOk.startedAt + firstOk.ms - restoredAt : null,
        unexpected: outcomes.filter((o) => o.startedAt >= cutAt - 1000 && !(o.status === 201 || (o.status === 503 && o.code === 'SERVICE_UNAVAILABLE'))),
      });
    }
    running = false;
    await Promise.all(loops);

    // One 503 body, for the envelope check.
    await control.cut(privateServer ? 'stop-fast' : 'refuse');
    const sample = await http('POST', `${api.merchantUrl}/v1/checkout-sessions`, { headers: { 'X-API-Key': merchant.apiKey, 'Idempotency-Key': randomUUID() }, body });
    await control.restore();

    // Retry every key that was refused: a retry with the same key must settle it exactly once.
    const refused = outcomes.filter((o) => o.status !== 201);
    const retryFailures: Outcome[] = [];
    const retries: Outcome[] = [];
    for (const o of refused) {
      const retry = await createSession(api, merchant.apiKey, o.key, 30_000);
      retries.push(retry);
      if (retry.status !== 201) retryFailures.push(retry);
    }
    const sessionsOfKey = new Map<string, Set<string>>();
    for (const o of [...outcomes, ...retries]) {
      if (o.status !== 201 || !o.sessionId) continue;
      sessionsOfKey.set(o.key, (sessionsOfKey.get(o.key) ?? new Set()).add(o.sessionId));
    }

    await direct.connect();
    const orphanRows = await direct.query(
      `SELECT count(*)::int AS n FROM checkout_sessions s WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.checkout_session_id = s.id)
       UNION ALL
       SELECT count(*)::int FROM idempotency_keys k WHERE NOT EXISTS (SELECT 1 FROM checkout_sessions s WHERE s.id = k.checkout_session_id)`,
    );
    const orphans = orphanRows.rows.reduce((sum: number, r: { n: number }) => sum + r.n, 0);
    const sessions = await direct.query(`SELECT count(*)::int AS n FROM checkout_sessions`);
    return {
      phases,
      orphans,
      retried: refused.length,
      retryFailures,
      duplicateSessions: [...sessionsOfKey.values()].filter((ids) => ids.size > 1).length,
      keys: new Set(outcomes.map((o) => o.key)).size,
      sessionsCreated: sessions.rows[0].n,
      bodyOf503: sample.status === 503 ? sample.json : { status: sample.status, body: sample.json },
      serverLog: api.output(),
    };
  } finally {
    await direct.end().catch(() => {});
    await api?.stop();
    await proxy?.close();
    if (!privateServer) await db.drop(); // a private server goes with its folder
  }
}

async function main(): Promise<void> {
  const partition = process.argv.includes('--partition');
  const stopServer = process.argv.includes('--stop');
  const report = await runDbOutage({ serverUrl: process.env.FAULT_POSTGRES_URL, partition, stopServer, log: (line) => console.log(`- ${line}`) });
  let ok = true;
  for (const phase of report.phases) {
    const bound = phase.mode === 'blackhole' ? PARTITION_BOUND_MS : STOPPED_BOUND_MS;
    const checks: Array<[string, boolean]> = [
      [`only 201 or 503 SERVICE_UNAVAILABLE (unexpected: ${phase.unexpected.length})`, phase.unexpected.length === 0],
      [`slowest answer during the outage ${phase.maxOutageLatencyMs} ms <= ${bound} ms`, phase.maxOutageLatencyMs <= bound],
      [`recovered ${phase.recoveryMs ?? 'never'} ms after the restore (<= ${RECOVERY_BOUND_MS} ms, no restart)`, phase.recoveryMs !== null && phase.recoveryMs <= RECOVERY_BOUND_MS],
    ];
    console.log(`\n${{ refuse: 'PostgreSQL stopped', blackhole: 'network partition', 'stop-fast': 'PostgreSQL server shut down', 'stop-immediate': 'PostgreSQL server crashed' }[phase.mode]}: ${phase.requestsDuringOutage} requests during the outage, p50 ${phase.p50OutageLatencyMs} ms`);
    console.log(`  statuses: ${JSON.stringify(phase.statusesDuringOutage)}`);
    for (const [label, pass] of checks) {
      console.log(`  ${pass ? 'ok  ' : 'FAIL'} ${label}`);
      ok &&= pass;
    }
  }
  const checks: Array<[string, boolean]> = [
    [`503 body is the error envelope: ${JSON.stringify(report.bodyOf503)}`, (report.bodyOf503 as { error?: { code?: string } })?.error?.code === 'SERVICE_UNAVAILABLE'],
    [`no half-written session (orphans: ${report.orphans})`, report.orphans === 0],
    [`${report.retried} refused keys retried: all 201 (failures: ${report.retryFailures.length})`, report.retryFailures.length === 0],
    [`one session per key (keys answered with two sessions: ${report.duplicateSessions}; ${report.sessionsCreated} sessions for ${report.keys} keys)`, report.duplicateSessions === 0 && report.sessionsCreated === report.keys],
  ];
  console.log('\nafterwards');
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
