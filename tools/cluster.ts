/**
 * Kassa as real processes, for the scale-out and fault tests, `tools/faults/` and
 * `scripts/bench/`: a throw-away PostgreSQL database, `node --import tsx src/main.ts --role …`
 * children (in the test suite, its prebuilt module: tools/node-entry.ts) on free ports with their
 * output captured, a TCP proxy that can cut PostgreSQL away from them (without touching the
 * PostgreSQL server other sessions use), and a private PostgreSQL server of their own that can
 * really be stopped and started again.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { chown, mkdtemp, readdir } from 'node:fs/promises';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { nodeEntryArgs } from './node-entry.js';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DEFAULT_SERVER_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

export function databaseUrlOn(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export interface ThrowAwayDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/**
 * A database on `serverUrl`, dropped by `drop()`: empty (Kassa migrates it when it starts), or a
 * copy of `template`.
 */
export async function createDatabase(serverUrl: string, prefix: string, options: { template?: string } = {}): Promise<ThrowAwayDatabase> {
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    // CREATE DATABASE … TEMPLATE needs the template to have no other sessions; retry briefly when callers race.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`CREATE DATABASE ${name}${options.template ? ` TEMPLATE ${options.template}` : ''}`);
        break;
      } catch (err) {
        if (!options.template || attempt >= 20 || (err as { code?: string }).code !== '55006') throw err;
        await new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 200));
      }
    }
  } finally {
    await admin.end();
  }
  return {
    name,
    url: databaseUrlOn(serverUrl, name),
    drop: async () => {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
    server.once('error', reject);
  });
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns a value other than undefined/false, or throws after `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs: number, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ''}`);
    await sleep(everyMs);
  }
}

export type Role = 'api' | 'worker' | 'all';

/** Settings every process of one deployment shares. */
export interface Deployment {
  databaseUrl: string;
  adminToken: string;
  /** Base64 of 32 bytes: the webhook signing key is sealed with it, so every process needs the same. */
  encryptionKey: string;
  env?: Record<string, string>;
}

export function newDeployment(databaseUrl: string, env: Record<string, string> = {}): Deployment {
  return { databaseUrl, adminToken: `kadm_${randomBytes(18).toString('hex')}`, encryptionKey: randomBytes(32).toString('base64'), env };
}

export interface KassaProcess {
  name: string;
  role: Role;
  merchantUrl: string;
  apiUrl: string;
  /** Admin API (role api/all) or the worker's status listener (role worker). */
  adminUrl: string;
  child: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code (or signal name) once the process is gone. */
  exited: Promise<number | string>;
  /** SIGTERM and wait (a clean shutdown). */
  stop(): Promise<void>;
  /** SIGKILL and wait (a crash). */
  kill(): Promise<void>;
}

export interface StartOptions {
  role: Role;
  name?: string;
  env?: Record<string, string>;
  /** Wait until /readyz answers 200 (default true). */
  waitReady?: boolean;
  readyTimeoutMs?: number;
  /** Echo the child's output to this process's stderr, prefixed by its name. */
  echo?: boolean;
  /** Extra node flags (e.g. --cpu-prof for profiling a benchmark run). */
  nodeArgs?: string[];
  /** The entry point, from the repository root (default src/main.ts; a benchmark harness runs its own). */
  entry?: string;
  /** A fixed admin port instead of a free one (tests of the start itself); a start that loses it is not retried. */
  adminPort?: number;
}

/**
 * The node flags `npm start` and `npm run worker` run the service with (package.json): a 32 MiB
 * young generation instead of 16 halves the scavenges a busy API process runs (every request's
 * objects die young); measured +8 % checkout creations per second against the floor.
 */
export const SERVICE_NODE_FLAGS = ['--max-semi-space-size=32'];

/** A start that lost a port to another process between freePort() and its bind. */
class PortTaken extends Error {}

/**
 * Starts a Kassa process on free ports. freePort() cannot reserve a port, so another process may
 * bind it first; Kassa then exits naming the port, and the start is retried on fresh ports.
 */
export async function startKassa(deployment: Deployment, options: StartOptions): Promise<KassaProcess> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startKassaOnce(deployment, options);
    } catch (err) {
      if (!(err instanceof PortTaken) || attempt >= 5 || options.adminPort !== undefined) throw err;
    }
  }
}

async function startKassaOnce(deployment: Deployment, options: StartOptions): Promise<KassaProcess> {
  const [merchantPort, apiPort, adminPort] = [await freePort(), await freePort(), options.adminPort ?? (await freePort())];
  const name = options.name ?? `${options.role}-${adminPort}`;
  const merchantUrl = `http://127.0.0.1:${merchantPort}`;
  const apiUrl = `http://127.0.0.1:${apiPort}`;
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    NODE_ENV: 'development',
    LOG_LEVEL: 'info',
    DATABASE_URL: deployment.databaseUrl,
    HOST: '127.0.0.1',
    ADMIN_HOST: '127.0.0.1',
    MERCHANT_PORT: String(merchantPort),
    API_PORT: String(apiPort),
    ADMIN_PORT: String(adminPort),
    PUBLIC_BASE_URL: merchantUrl,
    PUBLIC_API_URL: apiUrl,
    ADMIN_TOKEN: deployment.adminToken,
    ENCRYPTION_KEY: deployment.encryptionKey,
    DATA_DIR: path.join(os.tmpdir(), `kassa-${name}-${randomBytes(4).toString('hex')}`),
    KASSA_SEED_DEMO: 'false',
    // The load generators pay on the hosted pages from one address, faster than a buyer would.
    HOSTED_RATE_LIMIT_PER_MINUTE: '0',
    HOSTED_WRITE_RATE_LIMIT_PER_MINUTE: '0',
    ...deployment.env,
    ...options.env,
  };
  // Vitest's own variables would make the child believe it is a test worker.
  for (const key of Object.keys(env)) if (key.startsWith('VITEST')) delete env[key];
  const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, ...(options.nodeArgs ?? []), ...nodeEntryArgs(options.entry ?? 'src/main.ts'), '--role', options.role], {
    cwd: REPO_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const chunks: string[] = [];
  const collect = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    chunks.push(text);
    if (options.echo) process.stderr.write(text.replace(/^(?=.)/gm, `[${name}] `));
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  const until = async (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  const proc: KassaProcess = {
    name,
    role: options.role,
    merchantUrl,
    apiUrl,
    adminUrl,
    child,
    output: () => chunks.join(''),
    exited,
    stop: () => until('SIGTERM'),
    kill: () => until('SIGKILL'),
  };
  const logsInfo = ['trace', 'debug', 'info'].includes(env.LOG_LEVEL || 'info');
  if (options.waitReady !== false) {
    // A process that exits while starting fails the wait at once, not at its timeout.
    const exitedEarly = exited.then((code) => {
      const output = proc.output();
      if (/is already in use by another process/.test(output)) throw new PortTaken(`${name}: a port was taken before it could bind`);
      throw new Error(`${name} exited with ${code}: ${output.slice(-2000)}`);
    });
    try {
      await Promise.race([
        exitedEarly,
        waitFor(
          `${name} to be ready`,
          async () => {
            // The child's own line first (logged at info): until it says it listens, a 200 comes
            // from someone else. Quieter log levels leave the token check below (role api/all).
            if (logsInfo && !/Kassa is listening|Kassa worker started/.test(proc.output())) return false;
            const res = await fetch(`${adminUrl}/readyz`);
            await res.body?.cancel();
            if (!res.ok) return false;
            // Ours, not another test's server: free ports are picked before the child binds them,
            // and with the two CI runs side by side another server can take one in between and
            // answer (then stop: ECONNREFUSED on the next call, with this child silent). Another
            // Kassa refuses this deployment's token; a catch-all receiver accepts any token. Only
            // this child accepts its own token and refuses another.
            const token = env.ADMIN_TOKEN;
            if (options.role === 'worker' || !token) return true;
            return (await adminStatus(adminUrl, token)) === 200 && (await adminStatus(adminUrl, `${token}x`)) === 401;
          },
          options.readyTimeoutMs ?? 90_000,
          200,
        ),
      ]);
    } catch (err) {
      await proc.kill();
      // A start that never became ready says where it stopped: its own output's tail.
      if (err instanceof Error && !(err instanceof PortTaken) && !err.message.includes(' exited with ')) {
        err.message += `; ${name}'s output: ${proc.output().slice(-2000) || '(none)'}`;
      }
      throw err;
    }
    exitedEarly.catch(() => {}); // once ready, a later exit is the caller's business
  }
  return proc;
}

async function adminStatus(adminUrl: string, token: string): Promise<number> {
  const res = await fetch(`${adminUrl}/v1/orgs`, { headers: { Authorization: `Bearer ${token}` } });
  await res.body?.cancel();
  return res.status;
}

/** JSON over fetch with the status kept; never throws on an HTTP error status. */
export async function http(
  method: string,
  url: string,
  options: { headers?: Record<string, string>; body?: unknown; timeoutMs?: number } = {},
): Promise<{ status: number; headers: Headers; json: any; text: string; ms: number }> {
  const started = performance.now();
  const res = await fetch(url, {
    method,
    headers: { ...(options.body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...options.headers },
    body: options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body),
    signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
    redirect: 'manual',
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text, ms: performance.now() - started };
}

/** An organization (card checkout is enabled by default) and a merchant API key, made through the admin API. */
export async function provisionMerchant(adminUrl: string, adminToken: string, name = 'Scale-out merchant'): Promise<{ orgId: string; apiKey: string; apiKeyId: string }> {
  const auth = { Authorization: `Bearer ${adminToken}` };
  const org = await http('POST', `${adminUrl}/v1/orgs`, { headers: auth, body: { name } });
  if (org.status !== 201) throw new Error(`org create: ${org.status} ${org.text}`);
  const orgId = org.json.data.orgId as string;
  const key = await http('POST', `${adminUrl}/v1/orgs/${orgId}/api-keys`, { headers: auth, body: { name: 'cluster' } });
  if (key.status !== 201) throw new Error(`api key create: ${key.status} ${key.text}`);
  return { orgId, apiKey: key.json.data.key as string, apiKeyId: key.json.data.apiKeyId as string };
}

/**
 * A PostgreSQL server of its own (initdb in a temporary folder, a free port on loopback), so a
 * fault scenario can stop the server itself — `pg_ctl stop -m fast` (a clean shutdown: sessions
 * are terminated with 57P01) or `-m immediate` (a crash: no goodbye, crash recovery on the next
 * start) — without touching the server other tests use. Needs PostgreSQL's server binaries
 * (PG_BIN_DIR, else /usr/lib/postgresql/<version>/bin, else `pg_config --bindir`); as root, the
 * server runs as the `postgres` user (it refuses root).
 */
export interface PrivatePostgres {
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  port: number;
  stop(mode: 'fast' | 'immediate'): Promise<void>;
  /** Starts the server and resolves once it accepts connections (after any crash recovery). */
  start(): Promise<void>;
  destroy(): Promise<void>;
}

const run = promisify(execFile);

/** The folder of initdb and pg_ctl, or undefined when PostgreSQL's server binaries are not here. */
export async function postgresBinDir(): Promise<string | undefined> {
  const candidates: string[] = [];
  if (process.env.PG_BIN_DIR) candidates.push(process.env.PG_BIN_DIR);
  const versions = await readdir('/usr/lib/postgresql').catch(() => [] as string[]);
  candidates.push(...versions.sort((a, b) => Number(b) - Number(a)).map((v) => `/usr/lib/postgresql/${v}/bin`));
  const fromPgConfig = await run('pg_config', ['--bindir']).then((r) => r.stdout.trim(), () => undefined);
  if (fromPgConfig) candidates.push(fromPgConfig);
  return candidates.find((dir) => existsSync(path.join(dir, 'initdb')) && existsSync(path.join(dir, 'pg_ctl')));
}

/**
 * With `replicaOf`, the server is a streaming replica of that private server: `pg_basebackup -R`
 * (a copy of its data folder, with `primary_conninfo` and `standby.signal` written), then started
 * on a port of its own as a hot standby that replays the primary's WAL as it streams in.
 */
export async function startPrivatePostgres(options: { replicaOf?: PrivatePostgres } = {}): Promise<PrivatePostgres> {
  const binDir = await postgresBinDir();
  if (!binDir) throw new Error('PostgreSQL server binaries (initdb, pg_ctl) not found: set PG_BIN_DIR');
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'kassa-pg-'));
  const asRoot = process.getuid?.() === 0;
  const command = (tool: string, args: string[]): [string, string[]] =>
    asRoot ? ['runuser', ['-u', 'postgres', '--', path.join(binDir, tool), ...args]] : [path.join(binDir, tool), args];
  const pgCommand = (tool: string, args: string[]) => run(...command(tool, args));
  // pg_ctl detaches the server: whatever ends this process (a failed start, a test timeout, an
  // exception) must not leave it running or its folder behind. Synchronous, as exit handlers are.
  const removeSync = () => {
    const [file, args] = command('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']);
    spawnSync(file, args, { stdio: 'ignore' }); // "no server running" is fine
    rmSync(dataDir, { recursive: true, force: true });
  };
  process.once('exit', removeSync);
  const port = await freePort();
  const start = () =>
    pgCommand('pg_ctl', [
      '-D', dataDir, '-l', path.join(dataDir, 'server.log'), '-w', '-t', '60',
      '-o', `-p ${port} -c listen_addresses=127.0.0.1 -k ${dataDir} -c max_connections=60 -c shared_buffers=32MB`,
      'start',
    ]).then(() => undefined);
  const destroy = async () => {
    process.removeListener('exit', removeSync);
    removeSync();
  };
  try {
    if (asRoot) {
      const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
      const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
      await chown(dataDir, uid, gid);
    }
    if (options.replicaOf) {
      await pgCommand('pg_basebackup', ['-h', '127.0.0.1', '-p', String(options.replicaOf.port), '-U', 'postgres', '-D', dataDir, '-R', '-X', 'stream', '-c', 'fast', '--no-sync']);
    } else {
      await pgCommand('initdb', ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
    }
    await start();
  } catch (err) {
    await destroy();
    throw err;
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    stop: (mode) => pgCommand('pg_ctl', ['-D', dataDir, '-m', mode, '-w', '-t', '60', 'stop']).then(() => undefined),
    start,
    destroy,
  };
}

/**
 * A TCP proxy in front of PostgreSQL that the service connects through. `cut('refuse')` is
 * PostgreSQL stopping (open connections reset, new ones refused); `cut('blackhole')` is a network
 * partition (connections accepted or kept, but no byte goes through: bytes are held back, as TCP
 * would keep retransmitting them, and delivered when the partition heals). `restore()` ends either.
 */
export interface DatabaseProxy {
  url: string;
  port: number;
  cut(mode: 'refuse' | 'blackhole'): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startDatabaseProxy(targetUrl: string): Promise<DatabaseProxy> {
  const target = new URL(targetUrl);
  const targetHost = target.hostname;
  const targetPort = Number(target.port || 5432);
  const sockets = new Set<net.Socket>();
  /** Bytes held back during a partition, delivered in order when it heals. */
  const held: Array<{ to: net.Socket; chunk: Buffer }> = [];
  let mode: 'open' | 'refuse' | 'blackhole' = 'open';
  const port = await freePort();

  const onConnection = (client: net.Socket) => {
    if (mode === 'blackhole') {
      // Accept and say nothing: the client's connect timeout has to notice.
      sockets.add(client);
      client.on('error', () => {});
      client.on('close', () => sockets.delete(client));
      client.pause();
      return;
    }
    const upstream = net.connect(targetPort, targetHost);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', () => {
      sockets.delete(client);
      upstream.destroy();
    });
    upstream.on('close', () => {
      sockets.delete(upstream);
      client.destroy();
    });
    // Piped by hand so a blackhole can stop the flow in both directions without closing anything.
    client.on('data', (chunk: Buffer) => {
      if (mode === 'blackhole') held.push({ to: upstream, chunk });
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (mode === 'blackhole') held.push({ to: client, chunk });
      else client.write(chunk);
    });
  };

  let server = net.createServer(onConnection);
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
  await listen();

  const proxyUrl = new URL(targetUrl);
  proxyUrl.hostname = '127.0.0.1';
  proxyUrl.port = String(port);

  const closeServer = () => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));

  return {
    url: proxyUrl.toString(),
    port,
    async cut(how) {
      mode = how;
      if (how === 'refuse') {
        await Promise.all([closeServer(), Promise.resolve().then(() => sockets.forEach((s) => s.resetAndDestroy?.() ?? s.destroy()))]);
        sockets.clear();
      }
    },
    async restore() {
      const wasRefusing = mode === 'refuse';
      mode = 'open';
      if (wasRefusing) {
        server = net.createServer(onConnection);
        await listen();
      } else {
        // The partition heals: what was held back arrives; connections accepted during it were
        // never connected upstream, so they are dropped (their clients gave up on them already).
        for (const { to, chunk } of held.splice(0)) if (!to.destroyed) to.write(chunk);
        for (const socket of sockets) if (socket.isPaused()) socket.destroy();
      }
    },
    async close() {
      mode = 'refuse';
      sockets.forEach((s) => s.destroy());
      await closeServer();
    },
  };
}

export const ONE_TIME = { pricingData: { amount: 1500, currency: 'USD', productData: { name: 'Cluster test' } }, customerEmail: 'buyer@example.com' };
export const MONTHLY = {
  pricingData: { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', productData: { name: 'Cluster plan' } },
  customerEmail: 'subscriber@example.com',
};

/** POST /v1/checkout-sessions; throws unless 201. */
export async function createCheckout(merchantUrl: string, apiKey: string, body: unknown, idempotencyKey: string): Promise<{ id: string; url: string }> {
  const res = await http('POST', `${merchantUrl}/v1/checkout-sessions`, { headers: { 'X-API-Key': apiKey, 'Idempotency-Key': idempotencyKey }, body });
  if (res.status !== 201) throw new Error(`create checkout: ${res.status} ${res.text}`);
  return { id: res.json.data.id, url: res.json.data.url };
}

/** Submits the hosted page's card form the way a browser does; returns the HTTP status (303 on success). */
export async function payOnHostedPage(sessionUrl: string, cardNumber = '4242424242424242', viaOrigin?: string): Promise<number> {
  const url = new URL(`${sessionUrl}/pay`);
  const target = viaOrigin ? `${viaOrigin}${url.pathname}` : url.toString();
  const res = await fetch(target, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ email: 'buyer@example.com', cardNumber, expiry: '12/34', cvc: '123' }).toString(),
    redirect: 'manual',
  });
  await res.arrayBuffer();
  return res.status;
}

/** A one-time USDC crypto checkout of `units` millionths of a token; with the buyer's e-mail the exact amount is quoted at once. */
export const cryptoOneTime = (units: number) => ({
  provider: 'CRYPTO',
  pricingData: { amount: units, currency: 'USDC', productData: { name: 'Cluster crypto test' } },
  customerEmail: 'buyer@example.com',
});

/** The organization's receiving wallet on a chain, through the admin API (what `org set-wallet` does); throws unless 200. */
export async function setReceivingWallet(adminUrl: string, adminToken: string, orgId: string, chainId: number, address: string): Promise<void> {
  const res = await http('PUT', `${adminUrl}/v1/orgs/${orgId}/receiving-wallets/${chainId}`, { headers: { Authorization: `Bearer ${adminToken}` }, body: { address } });
  if (res.status !== 200) throw new Error(`set receiving wallet: ${res.status} ${res.text}`);
}

/** What PostgreSQL holds for one crypto session: exactly one of each (and a PAID order) once it is paid. */
export interface CryptoSessionTally {
  id: string;
  status: string;
  orders: number;
  orderStatus: string | null;
  pendingEvents: number;
  paidEvents: number;
  /** Deliveries (outbox rows) of its order.paid events. */
  paidDeliveries: number;
  /** crypto_transfers rows attached to the session, ignored ones included. */
  transfers: number;
}

export async function tallyCryptoSessions(client: pg.Client, sessionIds: string[]): Promise<CryptoSessionTally[]> {
  const result = await client.query(
    `SELECT s.id, s.status,
            (SELECT count(*) FROM orders o WHERE o.checkout_session_id = s.id) AS orders,
            (SELECT min(o.status) FROM orders o WHERE o.checkout_session_id = s.id) AS order_status,
            (SELECT count(*) FROM webhook_events e JOIN orders o ON o.checkout_session_id = s.id
               WHERE e.type = 'order.pending' AND e.payload->'order'->>'orderId' = o.id) AS pending_events,
            (SELECT count(*) FROM webhook_events e JOIN orders o ON o.checkout_session_id = s.id
               WHERE e.type = 'order.paid' AND e.payload->'order'->>'orderId' = o.id) AS paid_events,
            (SELECT count(*) FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id JOIN orders o ON o.checkout_session_id = s.id
               WHERE e.type = 'order.paid' AND e.payload->'order'->>'orderId' = o.id) AS paid_deliveries,
            (SELECT count(*) FROM crypto_transfers t WHERE t.checkout_session_id = s.id) AS transfers
       FROM checkout_sessions s WHERE s.id = ANY($1) ORDER BY s.id`,
    [sessionIds],
  );
  return result.rows.map((r) => ({
    id: r.id,
    status: r.status,
    orders: Number(r.orders),
    orderStatus: r.order_status,
    pendingEvents: Number(r.pending_events),
    paidEvents: Number(r.paid_events),
    paidDeliveries: Number(r.paid_deliveries),
    transfers: Number(r.transfers),
  }));
}
