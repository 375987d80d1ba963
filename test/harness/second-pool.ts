/**
 * Kassa's services over a second connection pool of the test's PostgreSQL database, with the
 * test's clock and config: what another Kassa process would run, for race tests (two pools, two
 * sets of services, one database). Call it inside a `describe` that runs only on PostgreSQL: it
 * opens the pool before the describe's tests and closes it after them.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices } from '../../src/services.js';
import type { TestContext } from './context.js';

export interface SecondPool {
  readonly database: Database;
  readonly services: ReturnType<typeof createServices>;
}

export function onSecondPool(ctx: () => TestContext): SecondPool {
  let database: Database | undefined;
  let services: ReturnType<typeof createServices> | undefined;
  beforeAll(async () => {
    const c = ctx();
    database = await openDatabase({ databaseUrl: c.testDb.url! });
    services = createServices({ db: database.db, clock: c.clock, secretBox: new SecretBox(randomBytes(32)), config: c.config });
  });
  afterAll(async () => {
    await database?.close();
  });
  return {
    get database() {
      return database!;
    },
    get services() {
      return services!;
    },
  };
}
