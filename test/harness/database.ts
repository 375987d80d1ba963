import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { inject } from 'vitest';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { databaseUrlFor } from './postgres.js';

export interface TestDatabase {
  database: Database;
  kind: 'pglite' | 'postgres';
  /** Connection string of this file's own database (PostgreSQL runs only). */
  url?: string;
  drop(): Promise<void>;
}

/** A fresh, migrated database for one test file. Never shared, never left behind. */
export async function freshDatabase(options: { poolMax?: number } = {}): Promise<TestDatabase> {
  const serverUrl = process.env.TEST_DATABASE_URL;
  const template = inject('postgresTemplate');
  if (serverUrl && template) {
    const name = `kassa_t_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    // CREATE DATABASE … TEMPLATE needs the template to have no other sessions; retry briefly when two files race.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
        break;
      } catch (err) {
        if (attempt >= 20 || (err as { code?: string }).code !== '55006') throw err;
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
      }
    }
    const url = databaseUrlFor(serverUrl, name);
    // Through PgBouncer in transaction mode (KASSA_TEST_PGBOUNCER): PgBouncer 1.18 keeps no prepared statements.
    const pooler = inject('postgresPooler');
    const database = pooler
      ? await openDatabase({ databaseUrl: databaseUrlFor(pooler, name), poolMax: options.poolMax, preparedStatements: false })
      : await openDatabase({ databaseUrl: url, poolMax: options.poolMax });
    return {
      database,
      kind: 'postgres',
      url,
      drop: async () => {
        await database.close();
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await admin.end();
      },
    };
  }
  const instance = new PGlite({ loadDataDir: await snapshotBlob(inject('pgliteSnapshot')) });
  const database = await openDatabase({ pglite: instance });
  return { database, kind: 'pglite', drop: () => database.close() };
}

/**
 * The migrated snapshot as PGlite takes it (a Blob it reads with `arrayBuffer()`), read once per
 * worker process. Node 20's own Blob hands its bytes back through a stream, chunk by chunk, which
 * cost more CPU than the rest of the database's start; this one hands back the bytes read.
 */
class SnapshotBlob extends Blob {
  constructor(private readonly snapshot: ArrayBuffer) {
    super([]);
  }
  override arrayBuffer(): Promise<ArrayBuffer> {
    return Promise.resolve(this.snapshot);
  }
}

const snapshots = new Map<string, Promise<ArrayBuffer>>();

async function snapshotBlob(file: string): Promise<Blob> {
  let bytes = snapshots.get(file);
  if (!bytes) {
    bytes = readFile(file).then((buffer) => buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + buffer.byteLength) as ArrayBuffer);
    snapshots.set(file, bytes);
  }
  return new SnapshotBlob(await bytes);
}
