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

/**
 * The weekly partitions the migrations make are named after weeks around the wall clock's now
 * (src/db/partitions.ts): a database migrated before a Monday 00:00 UTC and again after it has the
 * same partitions one week on. Compared by table and count, not by week.
 */
const weeksAsCounts = (names: string[]) => {
  const counts = new Map<string, number>();
  for (const name of names) {
    const key = name.replace(/_p\d{8}$/, '_p<week>');
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
};

describe('migrations', () => {
  it('run down to an empty schema and up again to the same schema', async () => {
    const before = await tables();
    expect(before).toContain('organizations');
    await migrateDown(testDb.database.db);
    expect(await tables()).toEqual([]);
    await migrateLatest(testDb.database.db);
    expect(weeksAsCounts(await tables())).toEqual(weeksAsCounts(before));
  });

  it('compares weekly partitions by count, so a run across a Monday 00:00 UTC is the same schema', () => {
    // The CI run of 2026-12-06/07 migrated the template on a Sunday and this test's database again
    // on the Monday: p20261130…p20261214 became p20261207…p20261221, and the comparison failed.
    const sunday = ['orders', 'telemetry_traces', 'telemetry_traces_default', 'telemetry_traces_p20261130', 'telemetry_traces_p20261207', 'telemetry_traces_p20261214'];
    const monday = ['orders', 'telemetry_traces', 'telemetry_traces_default', 'telemetry_traces_p20261207', 'telemetry_traces_p20261214', 'telemetry_traces_p20261221'];
    expect(weeksAsCounts(monday)).toEqual(weeksAsCounts(sunday));
    expect(weeksAsCounts(monday.slice(0, -1))).not.toEqual(weeksAsCounts(sunday));
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
