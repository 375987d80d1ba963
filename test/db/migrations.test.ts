import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
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

describe('npm run migrate (scripts/migrate.ts)', () => {
  // The script runs on the embedded database here whatever the suite runs on: once is enough.
  it.skipIf(process.env.TEST_DATABASE_URL !== undefined)(skippedUnless('migrates an empty embedded database, then finds nothing left to do', 'embeddedOnly'), async () => {
    const { execFile } = await import('node:child_process');
    const { mkdtemp, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const path = await import('node:path');
    const dataDir = await mkdtemp(path.join(tmpdir(), 'kassa-migrate-'));
    const run = () =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = execFile(process.execPath, ['--import', 'tsx', 'scripts/migrate.ts'], { env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: '' } }, (_err, stdout, stderr) =>
          resolve({ code: child.exitCode, stdout, stderr }),
        );
      });
    try {
      const first = await run();
      expect(first.stderr).toBe('');
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(new RegExp(`^Applied ${(await migrationSource.getMigrations([])).length} migration\\(s\\) \\(embedded database in `));
      const second = await run();
      expect(second.code).toBe(0);
      expect(second.stdout).toMatch(/^Already at the latest migration/);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 180_000); // two cold starts of PGlite (WebAssembly) + every migration; about a minute on a loaded 2-core machine
});
