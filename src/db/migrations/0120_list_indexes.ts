/**
 * Indexes that let every list's first page, its capped count and the entitlement check read a
 * bounded slice of an organization, however large it grows (issue 32): one per filter, each
 * `(org_id, filter…, created_at, id)` so that `ORDER BY created_at DESC, id DESC LIMIT n` is an
 * index scan that stops after n rows, and the count up to its bound an index-only scan.
 *
 * On PostgreSQL each index is built with CREATE INDEX CONCURRENTLY (outside a transaction, hence
 * `config`): writes to orders go on while it builds (measured on a 1M-order database: see
 * docs/benchmarks.md, "growth"). A build that was interrupted leaves an INVALID index behind; it is
 * dropped and built again, so the migration can simply be run again. The indexes they supersede (a
 * prefix of a new one) are dropped the same way, after the new ones exist. PGlite (one process, no
 * concurrent writers) builds them plainly.
 */
import type { Knex } from 'knex';

/** A PostgreSQL server (not embedded PGlite, whose knex client carries its `pglite` instance). */
const isPostgres = (db: Knex): boolean => !('pglite' in (db.client as object));

export const config = { transaction: false };

/** Flat rows of one-time access (src/subscriptions/entitlement.repository.ts): the grant predicate. */
export const ACCESS_GRANTING = "status = 'PAID' AND amount_refunded_cents = 0 AND subscription_id IS NULL AND product_id IS NOT NULL";

const INDEXES: Array<[name: string, definition: string]> = [
  ['orders_org_created_id', 'orders (org_id, created_at, id)'],
  ['orders_org_status_created_id', 'orders (org_id, status, created_at, id)'],
  ['orders_org_product_created_id', 'orders (org_id, product_id, created_at, id)'],
  ['orders_org_provider_created_id', 'orders (org_id, provider, created_at, id)'],
  ['orders_org_customer_created_id', 'orders (org_id, customer_id, created_at, id)'],
  ['orders_org_subscription_created_id', 'orders (org_id, subscription_id, created_at, id)'],
  ['orders_org_wallet_created_id', 'orders (org_id, lower(from_address), created_at, id) WHERE from_address IS NOT NULL'],
  // The entitlement check: one entry per product a buyer (or wallet) was granted, newest order first.
  ['orders_access_by_customer', `orders (org_id, customer_id, product_id, created_at DESC, id DESC) WHERE ${ACCESS_GRANTING}`],
  ['orders_access_by_wallet', `orders (org_id, lower(from_address), product_id, created_at DESC, id DESC) WHERE ${ACCESS_GRANTING} AND from_address IS NOT NULL`],
  ['customers_org_created_id', 'customers (org_id, created_at, id)'],
  ['subscriptions_org_created_id', 'subscriptions (org_id, created_at, id)'],
  ['subscriptions_org_status_created_id', 'subscriptions (org_id, status, created_at, id)'],
  ['subscriptions_org_customer_created_id', 'subscriptions (org_id, customer_id, created_at, id)'],
];

/** Created by 0004/0005 (knex's names); each is a prefix of one above. */
const SUPERSEDED: Array<[name: string, definition: string]> = [
  ['orders_org_id_created_at_index', 'orders (org_id, created_at)'],
  ['orders_org_id_customer_id_index', 'orders (org_id, customer_id)'],
  ['orders_org_id_subscription_id_index', 'orders (org_id, subscription_id)'],
  ['subscriptions_org_id_created_at_index', 'subscriptions (org_id, created_at)'],
  ['subscriptions_org_id_customer_id_index', 'subscriptions (org_id, customer_id)'],
];

async function invalid(db: Knex, name: string): Promise<boolean> {
  const { rows } = await db.raw('SELECT NOT i.indisvalid AS invalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = ? AND pg_table_is_visible(c.oid)', [name]);
  return rows.length > 0 && rows[0].invalid === true;
}

interface Connection {
  query(q: string | { text: string; query_timeout?: number }): Promise<{ rows: unknown[] }>;
}

/**
 * Runs the builds on one connection without the pool's statement and client timeouts (15 and
 * 20 s: a build over millions of orders takes longer, and CONCURRENTLY waits for the transactions
 * already running), restoring them after.
 */
async function untimed(db: Knex, run: (sql: (text: string) => Promise<unknown>) => Promise<void>): Promise<void> {
  if (!isPostgres(db)) return run((text) => db.raw(text));
  const client = db.client as { acquireConnection(): Promise<Connection>; releaseConnection(c: Connection): Promise<unknown> };
  const connection = await client.acquireConnection();
  try {
    const { rows } = await connection.query('SHOW statement_timeout');
    await connection.query('SET statement_timeout = 0');
    try {
      await run((text) => connection.query({ text, query_timeout: 24 * 3600 * 1000 }));
    } finally {
      await connection.query(`SET statement_timeout = '${(rows[0] as { statement_timeout: string }).statement_timeout}'`);
    }
  } finally {
    await client.releaseConnection(connection);
  }
}

export async function create(db: Knex, indexes: Array<[string, string]>): Promise<void> {
  const pg = isPostgres(db);
  for (const [name, definition] of indexes) {
    if (pg && (await invalid(db, name))) await untimed(db, (sql) => sql(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`).then(() => undefined));
    await untimed(db, (sql) => sql(`CREATE INDEX ${pg ? 'CONCURRENTLY ' : ''}IF NOT EXISTS ${name} ON ${definition}`).then(() => undefined));
  }
}

export async function drop(db: Knex, indexes: Array<[string, string]>): Promise<void> {
  const pg = isPostgres(db);
  for (const [name] of indexes) await untimed(db, (sql) => sql(`DROP INDEX ${pg ? 'CONCURRENTLY ' : ''}IF EXISTS ${name}`).then(() => undefined));
}

export async function up(db: Knex): Promise<void> {
  await create(db, INDEXES);
  await drop(db, SUPERSEDED);
}

export async function down(db: Knex): Promise<void> {
  await create(db, SUPERSEDED);
  await drop(db, INDEXES);
}
