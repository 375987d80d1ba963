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
  const snapshot = await readFile(inject('pgliteSnapshot'));
  const instance = new PGlite({ loadDataDir: new Blob([snapshot]) });
  const database = await openDatabase({ pglite: instance });
  return { database, kind: 'pglite', drop: () => database.close() };
}
