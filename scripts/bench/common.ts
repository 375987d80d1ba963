/**
 * Shared pieces of the telemetry benchmarks: a throw-away PostgreSQL database, the telemetry API
 * as a child process (so the load generator does not share its event loop) with a provisioned
 * organization, project and key, synthetic batches, and result formatting.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SERVER_URL = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export function databaseUrl(name: string): string {
  const url = new URL(SERVER_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A new database named after `prefix` (a random suffix). */
export async function createDatabase(prefix: string): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  return createNamedDatabase(`${prefix}_${randomBytes(4).toString('hex')}`);
}

export async function databaseExists(name: string): Promise<boolean> {
  const admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
  try {
    return (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1;
  } finally {
    await admin.end();
  }
}

/** (Re)creates the database `name` (a kept bench data set that was missing or incomplete). */
export async function createNamedDatabase(name: string): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a database name: ${name}`);
  const admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  return {
    name,
    url: databaseUrl(name),
    drop: async () => {
      const c = new pg.Client({ connectionString: SERVER_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

export interface BenchProject {
  projectId: string;
  environment: string;
  key: string;
}

export interface Server {
  apiUrl: string;
  orgId: string;
  projects: BenchProject[];
  /** The server's processes (the primary and its API workers). */
  pids: number[];
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Starts scripts/bench/server.ts (platform API + provisioned key) and waits for its ready line. */
export async function startServer(databaseUrlValue: string, env: Record<string, string> = {}): Promise<Server> {
  const child = spawn(
    process.execPath,
    // A larger young generation: ingest allocates a lot of short-lived objects per batch.
    [...(process.env.BENCH_NODE_ARGS ?? '--max-semi-space-size=64').split(' ').filter(Boolean), '--import', 'tsx', 'scripts/bench/server.ts'], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrlValue,
      LOG_LEVEL: 'warn',
      TELEMETRY_RATE_LIMIT: '100000000',
      TELEMETRY_MONTHLY_TRACE_QUOTA: '1000000000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ready = await new Promise<{ port: number; orgId: string; projects: BenchProject[]; pids: number[] }>((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => reject(new Error('bench server did not start within 120 s')), 120_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      const nl = buffer.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(JSON.parse(buffer.slice(0, nl)));
      }
    });
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)));
  });
  return {
    apiUrl: `http://127.0.0.1:${ready.port}`,
    orgId: ready.orgId,
    projects: ready.projects,
    pids: ready.pids,
    child,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * (sorted.length - 1)))]!;
}

export function table(rows: Array<[string, string]>): string {
  const w = Math.max(...rows.map((r) => r[0].length));
  const v = Math.max(...rows.map((r) => r[1].length));
  const line = `+${'-'.repeat(w + 2)}+${'-'.repeat(v + 2)}+`;
  return [line, ...rows.map(([k, val]) => `| ${k.padEnd(w)} | ${val.padStart(v)} |`), line].join('\n');
}

/** Deterministic PRNG (mulberry32): the same data on every run. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function hex(rand: () => number, bytes: number): string {
  let out = '';
  for (let i = 0; i < bytes; i++) out += Math.floor(rand() * 256).toString(16).padStart(2, '0');
  return out;
}

export const MODELS = [
  ['gpt-4o', 'openai'],
  ['gpt-4o-mini', 'openai'],
  ['claude-sonnet-4-5', 'anthropic'],
  ['claude-haiku-4-5', 'anthropic'],
  ['gemini-2.5-flash', 'google'],
] as const;

/**
 * A realistic batch: traces of a chat handler with a retrieval span and one or two model calls
 * (GenAI attributes), starting between `fromMs` and `toMs`. Returns the JSON body and its span count.
 */
/**
 * The end user and session of a trace, from its root span id (no draw from `rand`, so the spans are
 * those of earlier releases): 2,000 users, a user's requests in the same half hour one session.
 */
const sessionOf = (root: string, start: number) => {
  const user = parseInt(root.slice(0, 6), 16) % 2000;
  return { 'user.id': `user_${user}`, 'session.id': `sess_${user}_${Math.floor(start / 1_800_000)}` };
};

export function makeBatch(rand: () => number, spansTarget: number, fromMs: number, toMs: number): { body: string; spans: number; traces: BenchTrace[] } {
  const traces = [];
  let spans = 0;
  while (spans < spansTarget) {
    const start = fromMs + Math.floor(rand() * (toMs - fromMs));
    const root = hex(rand, 8);
    const calls = 1 + Math.floor(rand() * 2);
    const list: unknown[] = [];
    let t = start + 5;
    const retrieval = 20 + Math.floor(rand() * 200);
    list.push({ span_id: hex(rand, 8), parent_span_id: root, name: 'retrieval.search', start_time: new Date(t).toISOString(), end_time: new Date(t + retrieval).toISOString(), attributes: { 'retrieval.top_k': 5, 'db.system': 'pgvector' } });
    t += retrieval;
    for (let c = 0; c < calls; c++) {
      const [model, vendor] = MODELS[Math.floor(rand() * MODELS.length)]!;
      const latency = Math.floor(Math.exp(5 + rand() * 4));
      list.push({
        span_id: hex(rand, 8),
        parent_span_id: root,
        name: `chat ${model}`,
        kind: 'CLIENT',
        start_time: new Date(t).toISOString(),
        end_time: new Date(t + latency).toISOString(),
        attributes: {
          'gen_ai.provider.name': vendor,
          'gen_ai.request.model': model,
          'gen_ai.usage.input_tokens': Math.floor(rand() * 3000),
          'gen_ai.usage.output_tokens': Math.floor(rand() * 600),
          'gen_ai.request.temperature': 0.2,
        },
        status: { code: rand() < 0.03 ? 'ERROR' : 'OK' },
      });
      t += latency;
    }
    list.unshift({ span_id: root, parent_span_id: null, name: 'chat.handle_message', kind: 'SERVER', start_time: new Date(start).toISOString(), end_time: new Date(t + 3).toISOString(), attributes: { 'service.name': 'support-bot', 'user.tier': rand() < 0.2 ? 'pro' : 'free', ...sessionOf(root, start) }, status: { code: 'OK' } });
    traces.push({ trace_id: hex(rand, 16), spans: list });
    spans += list.length;
  }
  return { body: JSON.stringify({ traces }), spans, traces: traces as BenchTrace[] };
}

/** A native ingest trace as makeBatch builds it. */
export interface BenchTrace {
  trace_id: string;
  spans: Array<{
    span_id: string;
    parent_span_id: string | null;
    name: string;
    kind?: string;
    start_time: string;
    end_time: string;
    attributes: Record<string, string | number | boolean>;
    status?: { code: string };
  }>;
}

const TICKS_PER_SECOND = 100;

/** CPU seconds (user + system) a process has used, from /proc (Linux); 0 when unreadable. */
export function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/**
 * CPU used by the server process and by the PostgreSQL backends serving this database. The
 * benchmark box is shared, so besides wall-clock throughput we report CPU cost per span, which
 * does not depend on what else is running.
 */
export async function cpuMeter(serverPids: number[], databaseName: string): Promise<() => Promise<{ server: number; postgres: number }>> {
  const client = new pg.Client({ connectionString: SERVER_URL });
  await client.connect();
  const backends = async () =>
    (await client.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [databaseName])).rows.map((r) => r.pid);
  const start = new Map<number, number>();
  for (const pid of await backends()) start.set(pid, processCpuSeconds(pid));
  const serverCpu = () => serverPids.reduce((sum, pid) => sum + processCpuSeconds(pid), 0);
  const server0 = serverCpu();
  return async () => {
    let postgres = 0;
    for (const pid of await backends()) postgres += processCpuSeconds(pid) - (start.get(pid) ?? 0);
    await client.end();
    return { server: serverCpu() - server0, postgres };
  };
}
