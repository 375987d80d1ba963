/**
 * `npx tsx scripts/bench/kept-zone-writes.ts` (issue 40, item 1): what the local days kept for other
 * zones (migrations 0440, 0460) cost on the write path. One organization with a year of orders
 * folded into its rollups and 3 kept zones built; then batches of queued changes, each written the
 * way the API writes (one order per statement) and saved, are folded by the commerce-rollups
 * job's statement with the 3 zones ready and with none ('pending': the statement folds only ready
 * zones), alternating, each in a transaction rolled back (same rows every time):
 * - an order's INSERT: its statements and EXPLAIN (ANALYZE, BUFFERS) buffers (the commerce
 *   triggers read no kept zone: expected equal);
 * - a fold of the batch: rows upserted (the statement's own count), buffers, and the statement's
 *   time (median of the rounds; load average printed).
 * Batches: `recent` (orders of the last 3 hours, as live traffic) and `spread` (orders anywhere in
 * the last year, as refunds or imports of old orders). `--orders N` history (default 100,000),
 * `--batch N` (default 2,000: the job's chunk), `--rounds N` (default 15).
 */
import os from 'node:os';
import type { Knex } from 'knex';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { APPLY, KnexCommerceRollupRepository } from '../../src/commerce-metrics/rollups.repository.js';
import { createDatabase, DEFAULT_SERVER_URL } from '../../tools/cluster.js';
import { argv, median, report } from './summary.js';

const option = (name: string, fallback: number) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
};
const HISTORY = option('orders', 100_000);
const BATCH = option('batch', 2_000);
const ROUNDS = option('rounds', 15);
const ZONES = ['Asia/Kathmandu', 'America/St_Johns', 'Pacific/Chatham'];
const ORG = 'ORG_keptzonewrites0000000000';
const DAY = 86_400_000;

type Plan = { Plan: { 'Shared Hit Blocks': number; 'Shared Read Blocks': number; 'Shared Dirtied Blocks': number; 'Shared Written Blocks': number }; 'Execution Time': number };
const buffers = (plan: Plan) => plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks'];

async function main() {
  const target = await createDatabase(process.env.BENCH_POSTGRES_URL ?? DEFAULT_SERVER_URL, 'kassa_bench_keptzones');
  const database = await openDatabase({ databaseUrl: target.url });
  const db = database.db;
  try {
    await migrateLatest(db);
    const now = Date.now();
    await db.raw("INSERT INTO organizations (id, name, created_at, updated_at, time_zone) VALUES (?, 'Kept zone writes', now(), now(), 'Asia/Kolkata')", [ORG]);
    await db.raw("INSERT INTO customers (id, org_id, email, created_at) VALUES ('CUS_keptzonewrites', ?, 'buyer@example.com', now())", [ORG]);
    const order = (id: string, at: Date, amount: number, currency: string) => ({
      id, org_id: ORG, status: 'PAID', provider: 'STRIPE', amount_cents: amount, amount_refunded_cents: 0, currency,
      customer_id: 'CUS_keptzonewrites', customer_email: 'buyer@example.com', created_at: at, updated_at: at,
    });
    report(`history: ${HISTORY} orders over a year …`);
    // In chunks, without the pool's statement timeout (a loaded machine).
    for (let from = 0; from < HISTORY; from += 20_000) {
      await db.transaction(async (trx) => {
        await trx.raw('SET LOCAL statement_timeout = 0');
        await trx.raw(
          `INSERT INTO orders (id, org_id, status, provider, amount_cents, amount_refunded_cents, currency, customer_id, customer_email, created_at, updated_at)
           SELECT 'ORD_h' || g, ?, 'PAID', 'STRIPE', 100 + g % 9000, 0, (array['USD', 'EUR', 'GBP'])[1 + g % 3], 'CUS_keptzonewrites', 'buyer@example.com', t, t
             FROM (SELECT g, to_timestamp(?::bigint / 1000.0) - random() * interval '365 days' AS t FROM generate_series(?::int, ?::int) g) x`,
          [ORG, now, from + 1, Math.min(HISTORY, from + 20_000)],
        );
      });
    }
    const rollups = new KnexCommerceRollupRepository(db);
    await rollups.drain(20_000);
    for (const zone of ZONES) await db('commerce_rollup_kept_zone').insert({ org_id: ORG, time_zone: zone, state: 'pending', last_asked_on: new Date(now).toISOString().slice(0, 10) });
    const built = Date.now();
    await rollups.drain(20_000);
    report(`3 kept zones built in ${Date.now() - built} ms; zone days: ${(await db('commerce_rollup_zone_day').count({ n: '*' }))[0]!.n}`);
    await db.raw('VACUUM ANALYZE');

    const setZones = (trx: Knex.Transaction, kept: boolean) => trx('commerce_rollup_kept_zone').where({ org_id: ORG }).update({ state: kept ? 'ready' : 'pending' });
    /** Runs `work` in a transaction and rolls it back: the same rows every time. */
    const rolledBack = async <T,>(work: (trx: Knex.Transaction) => Promise<T>): Promise<T> => {
      const trx = await db.transaction();
      try {
        return await work(trx);
      } finally {
        await trx.rollback();
      }
    };
    // An order write, as the API makes it: one INSERT (the statement triggers queue its change).
    const insertOrder = (kept: boolean) =>
      rolledBack(async (trx) => {
        await setZones(trx, kept);
        const sql = trx('orders').insert(order('ORD_probe', new Date(now - 60_000), 1234, 'USD')).toSQL().toNative();
        const { rows } = await trx.raw(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql.sql.replace(/\$\d+/g, '?')}`, sql.bindings as Knex.RawBinding[]);
        const plan = (rows as Array<{ 'QUERY PLAN': Plan[] }>)[0]!['QUERY PLAN'][0]!;
        const queued = Number((await trx('commerce_metric_changes').count({ n: '*' }))[0]!.n);
        return { statements: 1, buffers: buffers(plan), dirtied: plan.Plan['Shared Dirtied Blocks'], queuedChanges: queued };
      });

    for (const [label, spanMs] of [['recent', 3 * 3600_000], ['spread', 365 * DAY]] as const) {
      // The batch: BATCH orders, one statement each, queued and saved (not folded).
      await db.raw('DROP TABLE IF EXISTS bench_batch');
      for (let i = 0; i < BATCH; i++) {
        await db('orders').insert(order(`ORD_${label}${i}`, new Date(now - Math.floor(Math.random() * spanMs)), 100 + i, ['USD', 'EUR', 'GBP'][i % 3]!));
      }
      await db.raw('CREATE TABLE bench_batch AS SELECT * FROM commerce_metric_changes');
      await db.raw('DELETE FROM commerce_metric_changes');
      const changes = Number((await db('bench_batch').count({ n: '*' }))[0]!.n);
      const columns = (await db.raw("SELECT string_agg(column_name, ', ') AS c FROM information_schema.columns WHERE table_name = 'bench_batch' AND column_name <> 'id'")).rows[0].c as string;
      const figures: Record<string, { written: number[]; buffers: number[]; dirtied: number[]; ms: number[] }> = {};
      for (let round = 0; round < ROUNDS; round++) {
        for (const kept of round % 2 ? [true, false] : [false, true]) {
          const key = kept ? '3 kept zones' : '0 kept zones';
          const f = (figures[key] ??= { written: [], buffers: [], dirtied: [], ms: [] });
          // The fold itself (its count of rows written), then its plan's buffers, each rolled back.
          for (const explain of [false, true]) {
            await rolledBack(async (trx) => {
              await setZones(trx, kept);
              await trx.raw(`INSERT INTO commerce_metric_changes (${columns}) SELECT ${columns} FROM bench_batch`);
              if (explain) {
                const { rows } = await trx.raw(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${APPLY}`, [BATCH]);
                const plan = (rows as Array<{ 'QUERY PLAN': Plan[] }>)[0]!['QUERY PLAN'][0]!;
                f.buffers.push(buffers(plan));
                f.dirtied.push(plan.Plan['Shared Dirtied Blocks']);
                f.ms.push(plan['Execution Time']);
              } else {
                const { rows } = await trx.raw(APPLY, [BATCH]);
                f.written.push(Number((rows as Array<{ written: string }>)[0]!.written));
              }
            });
          }
        }
      }
      const load = os.loadavg().map((x) => x.toFixed(2)).join(' / ');
      report(`\nbatch "${label}": ${BATCH} orders, ${changes} queued changes; ${ROUNDS} rounds, load ${load}`);
      for (const [key, f] of Object.entries(figures)) {
        report(`  ${key}: rows written ${median(f.written)}, buffers ${median(f.buffers)} (dirtied ${median(f.dirtied)}), fold ${median(f.ms).toFixed(1)} ms (min ${Math.min(...f.ms).toFixed(1)})`);
      }
      await db.raw('DROP TABLE bench_batch');
    }
    const inserts: Record<string, Array<{ statements: number; buffers: number; dirtied: number; queuedChanges: number }>> = { '0': [], '3': [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const kept of round % 2 ? [true, false] : [false, true]) inserts[kept ? '3' : '0']!.push(await insertOrder(kept));
    }
    for (const [n, list] of Object.entries(inserts)) {
      report(`order INSERT, ${n} kept zones (median of ${list.length}): statements ${median(list.map((r) => r.statements))}, queued changes ${median(list.map((r) => r.queuedChanges))}, buffers ${median(list.map((r) => r.buffers))} (dirtied ${median(list.map((r) => r.dirtied))})`);
    }
  } finally {
    await database.close();
    await target.drop();
  }
}

void main();
