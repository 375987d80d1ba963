/**
 * Kassa behind PgBouncer in transaction mode (Debian's package, 1.18: no prepared statements in
 * transaction mode). Why migrations need DATABASE_DIRECT_URL (a session advisory lock taken through
 * the pooler belongs to a server connection other clients share), and two Kassa processes started
 * at once on an empty database behind the pooler: migrations through the direct URL, then
 * idempotent creation, a payment and the order lists through PgBouncer. The part of the suite
 * .ci/run runs through PgBouncer (KASSA_TEST_PGBOUNCER=true) covers job leases, SET LOCAL and
 * transaction-level advisory locks.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCheckout, createDatabase, DEFAULT_SERVER_URL, http, newDeployment, ONE_TIME, payOnHostedPage, provisionMerchant, startKassa, type KassaProcess, type ThrowAwayDatabase } from '../../tools/cluster.js';
import { pgBouncerInstalled, startPgBouncer, type PgBouncer } from '../../tools/pgbouncer.js';

const serverUrl = process.env.TEST_DATABASE_URL;
const runs = !!serverUrl && pgBouncerInstalled();
const why = serverUrl ? 'needs PgBouncer at /usr/sbin/pgbouncer (apt-get install pgbouncer; .ci/run installs it)' : 'PostgreSQL only: set TEST_DATABASE_URL=postgres://… to run';

async function query(url: string, sql: string, values: unknown[] = []): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query(sql, values);
  } finally {
    await client.end();
  }
}

describe.skipIf(!runs)(`Kassa behind PgBouncer in transaction mode (${runs ? 'PgBouncer found' : why})`, () => {
  let bouncer: PgBouncer;
  let database: ThrowAwayDatabase;
  const processes: KassaProcess[] = [];

  beforeAll(async () => {
    bouncer = await startPgBouncer(serverUrl ?? DEFAULT_SERVER_URL, { poolSize: 1 });
    database = await createDatabase(serverUrl ?? DEFAULT_SERVER_URL, 'kassa_pgbouncer');
  }, 30_000);

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await database?.drop();
    await bouncer?.stop();
  });

  it('a session advisory lock taken through the pooler stops nobody: another client on the same server connection gets it too (why migrations use DATABASE_DIRECT_URL)', async () => {
    const a = new pg.Client({ connectionString: bouncer.urlFor(database.url) });
    const b = new pg.Client({ connectionString: bouncer.urlFor(database.url) });
    await Promise.all([a.connect(), b.connect()]);
    try {
      expect((await a.query('SELECT pg_try_advisory_lock(4242) AS locked')).rows[0].locked).toBe(true);
      // One server connection in the pool: b's statement runs in a's session, which holds the lock.
      expect((await b.query('SELECT pg_try_advisory_lock(4242) AS locked')).rows[0].locked).toBe(true);
      // On the server itself the lock excludes, as migrations expect.
      expect((await query(database.url, 'SELECT pg_try_advisory_lock(4242) AS locked')).rows[0].locked).toBe(false);
    } finally {
      await a.query('SELECT pg_advisory_unlock_all()');
      await Promise.all([a.end(), b.end()]);
    }
  });

  it('two processes start at once on an empty database behind PgBouncer (migrations through DATABASE_DIRECT_URL), then create idempotently, take a payment and list orders through it', async () => {
    const deployment = newDeployment(bouncer.urlFor(database.url), {
      DATABASE_DIRECT_URL: database.url,
      DATABASE_PREPARED_STATEMENTS: 'false',
      SANDBOX_SETTLE_DELAY_MS: '0',
    });
    processes.push(...(await Promise.all([startKassa(deployment, { role: 'all', name: 'pooled-1' }), startKassa(deployment, { role: 'all', name: 'pooled-2' })])));
    const [one, two] = processes as [KassaProcess, KassaProcess];
    const merchant = await provisionMerchant(one.adminUrl, deployment.adminToken, 'Pooled merchant');

    // Twelve retries of one creation, spread over both processes: one session.
    const key = randomUUID();
    const sessions = await Promise.all(Array.from({ length: 12 }, (_, i) => createCheckout((i % 2 ? one : two).merchantUrl, merchant.apiKey, ONE_TIME, key)));
    expect(new Set(sessions.map((s) => s.id)).size).toBe(1);

    expect(await payOnHostedPage(sessions[0]!.url)).toBe(303);
    const orders = await http('GET', `${two.merchantUrl}/v1/orders`, { headers: { 'X-API-Key': merchant.apiKey } });
    expect(orders.status).toBe(200);
    expect(orders.text).toMatch(/"status":"PAID"/);

    // Migrated once, through the direct URL; the processes' statements went through the pooler.
    const migrations = await query(database.url, 'SELECT count(*)::int AS n, count(DISTINCT name)::int AS names FROM knex_migrations');
    expect(migrations.rows[0].n).toBe(migrations.rows[0].names);
    for (const p of processes) expect(p.output()).not.toMatch(/prepared statement|unsupported startup parameter|"level":50/);
  }, 180_000);
});
