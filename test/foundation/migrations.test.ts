import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateDown, migrateLatest } from '../../src/db/knex.js';
import { migrationSource } from '../../src/db/migrations/index.js';
import { freshDatabase, type TestDatabase } from '../harness/database.js';

let testDb: TestDatabase;
beforeAll(async () => {
  testDb = await freshDatabase();
});
afterAll(async () => {
  await testDb?.drop();
});

const tables = async () =>
  (
    await testDb.database.db('information_schema.tables')
      .where({ table_schema: 'public' })
      .whereNotIn('table_name', ['knex_migrations', 'knex_migrations_lock'])
      .select('table_name')
  ).map((r: { table_name: string }) => r.table_name).sort();

describe('migrations', () => {
  it('run down to an empty schema and up again to the same schema', async () => {
    const before = await tables();
    expect(before).toContain('organizations');
    await migrateDown(testDb.database.db);
    expect(await tables()).toEqual([]);
    await migrateLatest(testDb.database.db);
    expect(await tables()).toEqual(before);
  });

  it('are all applied, in order', async () => {
    const names = await migrationSource.getMigrations([]);
    const applied = (await testDb.database.db('knex_migrations').orderBy('id').select('name')).map((r: { name: string }) => r.name);
    expect(applied).toEqual(names);
    expect([...names].sort()).toEqual(names);
  });
});
