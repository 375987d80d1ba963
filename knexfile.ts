/**
 * knex configuration for tooling (`npx knex --knexfile knexfile.ts migrate:status`, editors).
 * The service itself opens the database through src/db/knex.ts with the same rules:
 * DATABASE_URL → PostgreSQL; unset → embedded PGlite in DATA_DIR (default ./data).
 */
import type { Knex } from 'knex';
import ClientPgLite from 'knex-pglite';
import path from 'node:path';
import { migrationSource } from './src/db/migrations/index.js';

const config: Knex.Config = process.env.DATABASE_URL
  ? { client: 'pg', connection: process.env.DATABASE_URL, migrations: { migrationSource } }
  : {
      client: ClientPgLite as unknown as Knex.Config['client'],
      dialect: 'postgres',
      connection: { filename: path.resolve(process.env.DATA_DIR || './data', 'pgdata') },
      migrations: { migrationSource },
    } as Knex.Config;

export default config;
