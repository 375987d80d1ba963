/**
 * The database handle: PostgreSQL when DATABASE_URL is set, otherwise embedded PGlite (real
 * Postgres compiled to WASM) in a data folder — or in memory, for tests.
 */
import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import knexPkg, { type Knex } from 'knex';
import pg from 'pg';
import ClientPgLite from 'knex-pglite';
import { PGlite } from '@electric-sql/pglite';
import type { Logger } from '../kernel/logger.js';
import { migrationSource } from './migrations/index.js';
import { ReadRouter } from './replicas.js';

export type Db = Knex;

// int8 (COUNT(*), bigint money columns) as a JS number on pg, as PGlite already does; every
// bigint we store stays below 2^53 (amounts are validated against Number.MAX_SAFE_INTEGER).
pg.types.setTypeParser(20, (value: string) => Number(value));

const parsePostgresDate = pg.types.getTypeParser(1184) as (value: string) => Date | number | null;
/** What PostgreSQL prints for a timestamptz of years 1000-9999 AD whose offset is whole minutes. */
const PLAIN_TIMESTAMPTZ = /^[1-9]\d{3}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?[+-]\d\d(?::\d\d)?$/;

/** The digit at `i`, and the two-digit number at `i`: module-level, not closures made per call (see below). */
const digitAt = (value: string, i: number): number => value.charCodeAt(i) - 48;
const twoDigitsAt = (value: string, i: number): number => digitAt(value, i) * 10 + digitAt(value, i + 1);

/**
 * timestamptz as pg's own parser (postgres-date) reads it, from the digits when the text is the
 * plain form (every read parses a few, a page of orders dozens); anything else (BC, infinity,
 * years below 1000, offsets with seconds) goes to postgres-date. No closures inside: under tsx
 * (keepNames) each one made per call costs a defineProperty (docs/benchmarks.md).
 */
export function parseTimestamptz(value: string): Date | number | null {
  if (!PLAIN_TIMESTAMPTZ.test(value)) return parsePostgresDate(value);
  // Milliseconds are the first three fraction digits: Date keeps no more, postgres-date neither.
  let ms = 0;
  let i = 19;
  if (value[i] === '.') {
    for (let scale = 100; ++i < value.length && value[i] !== '+' && value[i] !== '-'; scale /= 10) if (scale >= 1) ms += digitAt(value, i) * scale;
  }
  const offsetMinutes = (value[i] === '-' ? -1 : 1) * (twoDigitsAt(value, i + 1) * 60 + (value.length > i + 3 ? twoDigitsAt(value, i + 4) : 0));
  const year = digitAt(value, 0) * 1000 + digitAt(value, 1) * 100 + twoDigitsAt(value, 2);
  const utc = Date.UTC(year, twoDigitsAt(value, 5) - 1, twoDigitsAt(value, 8), twoDigitsAt(value, 11), twoDigitsAt(value, 14), twoDigitsAt(value, 17), ms);
  return new Date(utc - offsetMinutes * 60_000);
}
pg.types.setTypeParser(1184, parseTimestamptz);

export const CONNECT_TIMEOUT_MS = 3000;
export const ACQUIRE_TIMEOUT_MS = 5000;
export const STATEMENT_TIMEOUT_MS = 15_000;
export const QUERY_TIMEOUT_MS = 20_000;

/**
 * Query options (`.options(PREPARED)` on a knex query) marking a statement the request paths run
 * on every call. On PostgreSQL it then runs as a named statement, prepared once per pooled
 * connection: the server skips parsing and planning it on every execution (what it saves:
 * docs/benchmarks.md). Mark only fixed texts with an explicit column list: a prepared `SELECT *`
 * fails ("cached plan must not change result type") once a migration adds a column under a
 * running process. PGlite ignores the mark.
 */
export const PREPARED = Object.freeze({ prepared: true });

const require = createRequire(import.meta.url);
const KnexPgClient = require('knex/lib/dialects/postgres/index.js') as typeof knexPkg.Client;

/** Names of prepared statement texts, fixed per text; only marked (constant) texts get here. */
const statementNames = new Map<string, string>();
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `kassa_${createHash('sha256').update(text).digest('base64url').slice(0, 22)}`;
    statementNames.set(text, name);
  }
  return name;
}

interface QueryObject {
  sql: string;
  options?: Record<string, unknown>;
}

/** knex's pg client, turning PREPARED-marked statements into named ones when enabled. */
class PgClient extends KnexPgClient {
  declare config: Knex.Config & { preparedStatements?: boolean };

  _query(connection: unknown, obj: QueryObject): Promise<unknown> {
    if (obj.options?.prepared) {
      const { prepared: _, ...options } = obj.options;
      obj.options = this.config.preparedStatements === false ? options : { ...options, name: statementName(obj.sql) };
    }
    return (KnexPgClient.prototype as unknown as { _query(c: unknown, o: QueryObject): Promise<unknown> })._query.call(this, connection, obj);
  }
}

/** PostgreSQL over the network (pg) rather than embedded PGlite; also true for a transaction's handle. */
export function isPostgres(db: Db): boolean {
  return db.client instanceof PgClient;
}

/** A pg Client (which also takes a config object) or PGlite (text and values only). */
interface PooledConnection {
  query(text: string | { name: string; text: string; values: unknown[] }, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/**
 * Runs one fixed statement with numbered parameters ($1, $2, …) on a pooled connection directly,
 * for the statements every request runs: knex would build, rewrite and wrap it on each call.
 * Named (prepared) on PostgreSQL as PREPARED statements are, so the same rule holds: a fixed text
 * with its columns listed. On a transaction's handle it runs on the transaction's connection
 * (knex hands that one out and keeps it).
 */
export async function runStatement<R>(db: Db, text: string, values: unknown[]): Promise<R[]> {
  // knex keeps handing out a finished transaction's connection, which is back in the pool by then
  // (perhaps inside another transaction): refuse, as knex's own queries on it do.
  if ((db as Knex.Transaction).isCompleted?.()) throw new Error('Transaction query already complete');
  const client = db.client as { acquireConnection(): Promise<PooledConnection>; releaseConnection(c: PooledConnection): Promise<unknown> };
  const connection = await client.acquireConnection();
  try {
    const named = isPostgres(db) && (db.client as PgClient).config.preparedStatements !== false;
    return (await (named ? connection.query({ name: statementName(text), text, values }) : connection.query(text, values))).rows as R[];
  } finally {
    await client.releaseConnection(connection);
  }
}

/**
 * Every pooled PostgreSQL connection runs with JIT compilation off (PostgreSQL's default is on,
 * above a plan cost of 100,000). The statements here are request-path reads whose targets are
 * tens of milliseconds; a plan costly enough on paper to compile spends longer compiling than
 * running (the metrics reads: figures in docs/benchmarks.md). JIT changes no
 * plan, only whether the chosen one is compiled. A session setting (not SET LOCAL in a
 * transaction per read) costs one round trip per new connection instead of three per read.
 */
function jitOff(connection: { query(text: string, callback: (err: Error | null) => void): unknown }, done: (err: Error | null, connection: unknown) => void): void {
  connection.query('SET jit = off', (err) => done(err, connection));
}

export interface DatabaseOptions {
  databaseUrl?: string;
  /** Run PREPARED-marked statements as named statements (default true; PostgreSQL only). */
  preparedStatements?: boolean;
  /** Folder for the embedded database; undefined → in memory. */
  dataDir?: string;
  /** A ready PGlite instance (tests load one from a migrated snapshot). */
  pglite?: PGlite;
  poolMax?: number;
  /** Streaming replicas for lag-tolerant reads (src/db/replicas.ts); PostgreSQL only. */
  replicaUrls?: string[];
  replicaMaxLagMs?: number;
  replicaCheckIntervalMs?: number;
  /**
   * Where knex's own warnings go (a refused connection, a deprecation). Without one knex writes
   * them to the console, past the log level and the secret scrubbing of the application's logger.
   */
  logger?: Logger;
}

/** knex's `log` option on top of the application's logger. */
function knexLog(logger: Logger): Knex.Config['log'] {
  const child = logger.child({ component: 'knex' });
  return {
    warn: (message: string) => child.warn(message),
    error: (message: string) => child.error(message),
    deprecate: (method: string, alternative: string) => child.warn(`${method} is deprecated, use ${alternative}`),
    debug: (message: string) => child.debug(message),
  };
}

export interface Database {
  db: Db;
  kind: 'postgres' | 'pglite';
  /** Lag-tolerant reads and the writes that pin a caller to the primary (no replicas: always the primary). */
  reads: ReadRouter;
  /** The primary pool's connections now (the embedded database has none). */
  pool(): PoolStats | undefined;
  close(): Promise<void>;
}

export interface PoolStats {
  used: number;
  idle: number;
  /** Queries waiting for a connection (creations included): above zero for long, the pool is saturated. */
  pending: number;
  max: number;
}

function poolStats(db: Db): PoolStats | undefined {
  const pool = (db.client as { pool?: { numUsed(): number; numFree(): number; numPendingAcquires(): number; numPendingCreates(): number; max: number } }).pool;
  if (!pool) return undefined;
  return { used: pool.numUsed(), idle: pool.numFree(), pending: pool.numPendingAcquires(), max: pool.max };
}

/** A replica's name in logs and metrics: its host, port and database, never its credentials. */
export function replicaName(url: string): string {
  const parsed = new URL(url);
  return `${parsed.hostname}:${parsed.port || 5432}${parsed.pathname}`;
}

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  if (options.databaseUrl) {
    const db = knexPkg.knex(pgConfig(options.databaseUrl, options));
    const replicas = (options.replicaUrls ?? []).map((url) => ({ name: replicaName(url), db: knexPkg.knex(pgConfig(url, options)) }));
    const reads = new ReadRouter(db, replicas, {
      maxLagMs: options.replicaMaxLagMs ?? 2000,
      checkIntervalMs: options.replicaCheckIntervalMs ?? 500,
      onError: options.logger && ((replica, err) => options.logger!.warn({ replica, err: (err as Error).message }, 'read replica unavailable: its reads go to the primary')),
    });
    reads.start();
    return {
      db,
      kind: 'postgres',
      reads,
      pool: () => poolStats(db),
      close: async () => {
        await reads.stop();
        await Promise.all([db, ...replicas.map((r) => r.db)].map(async (handle) => {
          await drainPool(handle, 5000);
          await handle.destroy();
        }));
      },
    };
  }
  if (options.dataDir) await mkdir(options.dataDir, { recursive: true });
  const instance = options.pglite ?? new PGlite(options.dataDir);
  await instance.waitReady;
  const db = knexPkg.knex({
    client: ClientPgLite as unknown as typeof knexPkg.Client,
    dialect: 'postgres',
    connection: () => ({ pglite: instance }) as never,
    ...(options.logger ? { log: knexLog(options.logger) } : {}),
  });
  return {
    db,
    kind: 'pglite',
    reads: new ReadRouter(db, [], { maxLagMs: 1, checkIntervalMs: 1 }),
    pool: () => undefined,
    close: async () => {
      await db.destroy();
      if (!instance.closed) await instance.close();
    },
  };
}

function pgConfig(databaseUrl: string, options: DatabaseOptions): Knex.Config & { preparedStatements: boolean } {
  return {
    client: PgClient,
    preparedStatements: options.preparedStatements ?? true,
    // Bounded waits (docs/operations.md, faults): a connection attempt gives up after 3 s,
    // waiting for a free pooled connection after 5 s, a statement after 15 s on the server and
    // after 20 s on the client (a network partition, where the server cannot answer at all).
    // All of them surface as 503 SERVICE_UNAVAILABLE (src/http/errors.ts).
    connection: {
      connectionString: databaseUrl,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      statement_timeout: STATEMENT_TIMEOUT_MS,
      query_timeout: QUERY_TIMEOUT_MS,
      keepAlive: true,
    } as Knex.PgConnectionConfig,
    pool: { min: 0, max: options.poolMax ?? 10, afterCreate: jitOff },
    acquireConnectionTimeout: ACQUIRE_TIMEOUT_MS,
    ...(options.logger ? { log: knexLog(options.logger) } : {}),
  };
}

/**
 * Waits (bounded) until no query holds or awaits a pooled connection: at shutdown the listeners
 * are closed first, but handlers of requests whose clients already hung up may still be running,
 * and destroying the pool under them turns their last statements into errors.
 */
async function drainPool(db: Db, timeoutMs: number): Promise<void> {
  const pool = (db.client as { pool?: { numUsed(): number; numPendingAcquires(): number; numPendingCreates(): number } }).pool;
  if (!pool) return;
  const deadline = Date.now() + timeoutMs;
  while (pool.numUsed() + pool.numPendingAcquires() + pool.numPendingCreates() > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Key of the advisory lock that serializes the migrations of processes starting together. */
const MIGRATION_LOCK_KEY = 0x4b617373; // "Kass"

/** Applies the pending migrations; returns how many this call applied. */
export async function migrateLatest(db: Db): Promise<number> {
  const applied = ([, names]: [number, string[]]) => names.length;
  if (!isPostgres(db)) return applied(await db.migrate.latest({ migrationSource }));
  // Several processes (API and workers) may start at once on a fresh database; knex's own lock
  // row fails the losers instead of making them wait, and the first `CREATE TABLE knex_migrations`
  // races. An advisory lock queues them: the first migrates, the others find nothing left to do.
  // A session lock, taken by polling on a connection outside any transaction: an open transaction
  // (or a statement blocked on the lock) holds a snapshot, and CREATE INDEX CONCURRENTLY (0120)
  // waits for every older snapshot to end, which would be the lock holder's own migration.
  const client = db.client as { acquireConnection(): Promise<PooledConnection>; releaseConnection(c: PooledConnection): Promise<unknown> };
  const connection = await client.acquireConnection();
  try {
    for (;;) {
      const { rows } = await connection.query('SELECT pg_try_advisory_lock($1) AS locked', [MIGRATION_LOCK_KEY]);
      if ((rows[0] as { locked: boolean }).locked) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    try {
      return applied(await db.migrate.latest({ migrationSource }));
    } finally {
      await connection.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await client.releaseConnection(connection);
  }
}

export async function migrateDown(db: Db): Promise<void> {
  await db.migrate.rollback({ migrationSource }, true);
}
