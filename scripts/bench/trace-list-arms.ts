/**
 * The explorer's unbounded trace lists on weekly partitions against the same traces in one plain
 * table, arms alternating (issue 40 item 6, round 22): two kept databases of
 * `scripts/bench/trace-partitions.ts` — one as seeded (`--seed-only --keep`: weekly partitions),
 * one a copy turned back into a plain table as its `--plain` does (migration 0390's `down`, a
 * stored `partition_start` copy of `start_time`, the id table rebuilt). Each arm is the
 * repository's own call; per query and arm: shared buffers of every statement the call sends
 * (EXPLAIN (ANALYZE, BUFFERS), summed), statements, rows, PostgreSQL CPU per call (from /proc,
 * the arm's one pooled backend) and the bench process's CPU per call, over `--rounds` calls in
 * each of `--blocks` blocks, the arms alternating block by block; floors (SELECT 1) per arm.
 *
 * `--before FILE`: also the arms of another version of the repository (a copy of
 * src/telemetry/traces.repository.ts at an earlier commit, placed beside it), on both databases.
 *
 * Usage: tsx scripts/bench/trace-list-arms.ts --partitioned NAME --plain NAME [--rounds 200] [--blocks 4] [--before src/telemetry/x.ts]
 */
import { loadavg } from 'node:os';
import type { Knex } from 'knex';
import pg from 'pg';
import { openDatabase } from '../../src/db/knex.js';
import { KnexTraceRepository, type StoredTrace, type TraceSearch } from '../../src/telemetry/traces.repository.js';
import { databaseUrl } from './common.js';
import { postgresCpuSeconds } from './postgres-cpu.js';

const argValue = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const PARTITIONED = argValue('partitioned')!;
const PLAIN = argValue('plain')!;
const ROUNDS = Number(argValue('rounds') ?? 200);
const BLOCKS = Number(argValue('blocks') ?? 4);
const load = () => loadavg().map((x) => x.toFixed(2)).join(' / ');

interface Repo {
  searchTraces(search: TraceSearch): Promise<StoredTrace[]>;
}
interface Arm {
  name: string;
  database: string;
  db: Knex;
  meter: pg.Client;
  repo: Repo;
  close(): Promise<void>;
}
type RepoClass = new (db: never, clock?: { now(): Date }) => Repo;

const open = async (name: string, database: string, clock: boolean, now: Date, Repository: RepoClass = KnexTraceRepository as never): Promise<Arm> => {
  const handle = await openDatabase({ databaseUrl: databaseUrl(database), poolMax: 1 });
  const meter = new pg.Client({ connectionString: databaseUrl(database) });
  await meter.connect();
  return { name, database, db: handle.db, meter, repo: new Repository(handle.db as never, clock ? { now: () => now } : undefined), close: () => handle.close() };
};

// The seed's "now": its newest trace starts a minute before it (as trace-partitions.ts --reuse).
const probe = new pg.Client({ connectionString: databaseUrl(PARTITIONED) });
await probe.connect();
const newest = Number((await probe.query<{ ms: string }>(`SELECT (extract(epoch FROM max(partition_start)) * 1000)::bigint AS ms FROM telemetry_traces WHERE project_id = 'proj_small'`)).rows[0]!.ms);
const NOW = new Date(newest + 60_000);
const session = (await probe.query<{ session_id: string }>(`SELECT session_id FROM telemetry_traces WHERE project_id = 'proj_large' AND session_id IS NOT NULL ORDER BY start_time DESC LIMIT 1 OFFSET 1000`)).rows[0]!.session_id;
const oldSession = (await probe.query<{ session_id: string }>(`SELECT session_id FROM telemetry_traces WHERE project_id = 'proj_large' AND session_id IS NOT NULL ORDER BY start_time DESC LIMIT 1 OFFSET 40000`)).rows[0]!.session_id;
await probe.end();

const searches: Record<string, Omit<TraceSearch, 'projectId'>> = {
  'list, first page (newest)': { limit: 51, sort: '-start_time' },
  'list, by duration': { limit: 51, sort: '-duration_ms' },
  'filter user': { limit: 51, sort: '-start_time', userId: 'user-7' },
  'filter session (this week)': { limit: 51, sort: '-start_time', sessionId: session },
  'filter session (2 weeks back)': { limit: 51, sort: '-start_time', sessionId: oldSession },
};

const BEFORE = argValue('before');
const Before = BEFORE ? ((await import(new URL(`../../${BEFORE.replace(/\.ts$/, '.js')}`, import.meta.url).href)) as { KnexTraceRepository: RepoClass }).KnexTraceRepository : undefined;
const arms = [
  ...(Before ? [await open('plain table, before', PLAIN, false, NOW, Before)] : []),
  await open('plain table, this version (no clock)', PLAIN, false, NOW),
  ...(Before ? [await open('partitions, before (clock)', PARTITIONED, true, NOW, Before)] : []),
  await open('partitions, this version (clock)', PARTITIONED, true, NOW),
];

async function captured(db: Knex, fn: () => Promise<unknown>) {
  const queries: Array<{ sql: string; bindings: unknown[] }> = [];
  const listener = (q: { sql: string; bindings?: unknown[] }) => queries.push({ sql: q.sql.replace(/\$\d+/g, '?'), bindings: q.bindings ?? [] });
  db.on('query', listener);
  try {
    await fn();
  } finally {
    db.off('query', listener);
  }
  return queries;
}

interface Figures {
  buffers: number;
  statements: number;
  rows: number;
  pg: number[];
  node: number[];
  ids: string;
}
const figures = new Map<string, Figures>();
const floors = new Map<string, { pg: number[]; node: number[] }>();
console.log(`now ${NOW.toISOString()}, session ${session} / ${oldSession}; load average before: ${load()}`);

for (const arm of arms) {
  for (const [name, s] of Object.entries(searches)) {
    const fn = () => arm.repo.searchTraces({ projectId: 'proj_large', ...s });
    for (let i = 0; i < 3; i++) await fn();
    const statements = await captured(arm.db, fn);
    let buffers = 0;
    for (const q of statements) {
      const { rows } = await arm.db.raw(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${q.sql}`, q.bindings as never);
      const plan = (rows[0]['QUERY PLAN'] as Array<{ Plan: { 'Shared Hit Blocks': number; 'Shared Read Blocks': number } }>)[0]!.Plan;
      buffers += plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
    }
    const result = await fn();
    figures.set(`${arm.name}|${name}`, { buffers, statements: statements.length, rows: result.length, pg: [], node: [], ids: result.map((t) => t.traceId).join(',') });
  }
}
for (const name of Object.keys(searches)) {
  const ids = new Set(arms.map((a) => figures.get(`${a.name}|${name}`)!.ids));
  if (ids.size !== 1) throw new Error(`arms differ on ${name}`);
}

for (let block = 0; block < BLOCKS; block++) {
  for (const arm of block % 2 === 0 ? arms : [...arms].reverse()) {
    const cpu = async () => (await postgresCpuSeconds(arm.meter, arm.database)) ?? NaN;
    const floor = floors.get(arm.name) ?? { pg: [], node: [] };
    floors.set(arm.name, floor);
    let c0 = await cpu();
    let n0 = process.cpuUsage();
    for (let i = 0; i < ROUNDS; i++) await arm.db.raw('SELECT 1');
    let n1 = process.cpuUsage(n0);
    floor.pg.push((((await cpu()) - c0) / ROUNDS) * 1000);
    floor.node.push((n1.user + n1.system) / 1000 / ROUNDS);
    for (const [name, s] of Object.entries(searches)) {
      const f = figures.get(`${arm.name}|${name}`)!;
      c0 = await cpu();
      n0 = process.cpuUsage();
      for (let i = 0; i < ROUNDS; i++) await arm.repo.searchTraces({ projectId: 'proj_large', ...s });
      n1 = process.cpuUsage(n0);
      f.pg.push((((await cpu()) - c0) / ROUNDS) * 1000);
      f.node.push((n1.user + n1.system) / 1000 / ROUNDS);
    }
  }
  console.log(`block ${block + 1} of ${BLOCKS} done; load average ${load()}`);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (xs: number[]) => `${median(xs).toFixed(3)} (${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)})`;
console.log(`\n${BLOCKS} blocks of ${ROUNDS} calls per arm and query, arms alternating; median of the blocks (range); load average after: ${load()}`);
for (const arm of arms) console.log(`floor SELECT 1, ${arm.name}: PostgreSQL ${fmt(floors.get(arm.name)!.pg)} ms, Node ${fmt(floors.get(arm.name)!.node)} ms`);
console.log(`| query | arm | buffers | statements | rows | PG CPU ms/call | Node CPU ms/call |`);
console.log(`|---|---|---|---|---|---|---|`);
for (const name of Object.keys(searches)) {
  for (const arm of arms) {
    const f = figures.get(`${arm.name}|${name}`)!;
    console.log(`| ${name} | ${arm.name} | ${f.buffers} | ${f.statements} | ${f.rows} | ${fmt(f.pg)} | ${fmt(f.node)} |`);
  }
}
for (const arm of arms) {
  await arm.meter.end();
  await arm.close();
}
