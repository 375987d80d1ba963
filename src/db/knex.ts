/**
 * The database handle: PostgreSQL when DATABASE_URL is set, otherwise embedded PGlite (real
 * Postgres compiled to WASM) in a data folder — or in memory, for tests.
 */
import { mkdir } from 'node:fs/promises';
import knexPkg, { type Knex } from 'knex';
import pg from 'pg';
import ClientPgLite from 'knex-pglite';
import { PGlite } from '@electric-sql/pglite';
import { migrationSource } from './migrations/index.js';

export type Db = Knex;

// int8 (COUNT(*), bigint money columns) as a JS number on pg, as PGlite already does; every
// bigint we store stays below 2^53 (amounts are validated against Number.MAX_SAFE_INTEGER).
pg.types.setTypeParser(20, (value: string) => Number(value));

export interface DatabaseOptions {
  databaseUrl?: string;
  /** Folder for the embedded database; undefined → in memory. */
  dataDir?: string;
  /** A ready PGlite instance (tests load one from a migrated snapshot). */
  pglite?: PGlite;
  poolMax?: number;
}

export interface Database {
  db: Db;
  kind: 'postgres' | 'pglite';
  close(): Promise<void>;
}

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  if (options.databaseUrl) {
    const db = knexPkg.knex({
      client: 'pg',
      connection: { connectionString: options.databaseUrl, connectionTimeoutMillis: 3000, statement_timeout: 15000 } as Knex.PgConnectionConfig,
      pool: { min: 0, max: options.poolMax ?? 10 },
      acquireConnectionTimeout: 5000,
    });
    return { db, kind: 'postgres', close: () => db.destroy() };
  }
  if (options.dataDir) await mkdir(options.dataDir, { recursive: true });
  const instance = options.pglite ?? new PGlite(options.dataDir);
  await instance.waitReady;
  const db = knexPkg.knex({
    client: ClientPgLite as unknown as typeof knexPkg.Client,
    dialect: 'postgres',
    connection: () => ({ pglite: instance }) as never,
  });
  return {
    db,
    kind: 'pglite',
    close: async () => {
      await db.destroy();
      if (!instance.closed) await instance.close();
    },
  };
}

export async function migrateLatest(db: Db): Promise<void> {
  await db.migrate.latest({ migrationSource });
}

export async function migrateDown(db: Db): Promise<void> {
  await db.migrate.rollback({ migrationSource }, true);
}
