/**
 * The lists of test files the PostgreSQL run leaves out (vitest.config.ts) stay honest: every entry
 * names a test file that exists, with a reason; a page list holds browser tests only; and no file
 * left out has a part that runs only on PostgreSQL (it would then never run at all).
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

type RunOnceList = Record<string, { reason: string }>;
const read = (name: string): RunOnceList => JSON.parse(readFileSync(`test/${name}`, 'utf8')).files;
const lists = { 'database-free.json': read('database-free.json'), 'pages-once.json': read('pages-once.json'), 'engine-once.json': read('engine-once.json') };
/** How a file says a part of it runs only when TEST_DATABASE_URL is set. */
const POSTGRES_ONLY = /skipIf\(\s*!\s*(onPostgres|serverUrl|url|process\.env\.TEST_DATABASE_URL)|runIf\(\s*(onPostgres|serverUrl|process\.env\.TEST_DATABASE_URL)|'postgresOnly'/;

describe('the files the PostgreSQL run leaves out', () => {
  it.each(Object.entries(lists))('%s names existing test files, each with a reason', (_name, files) => {
    for (const [file, { reason }] of Object.entries(files)) {
      expect(existsSync(file), file).toBe(true);
      expect(file).toMatch(/^test\/.+\.test\.ts$/);
      expect(reason.trim().length, file).toBeGreaterThan(10);
    }
  });

  it('lists each file once', () => {
    const all = Object.values(lists).flatMap((files) => Object.keys(files));
    expect(all.filter((file, i) => all.indexOf(file) !== i)).toEqual([]);
  });

  it('leaves out browser tests of pages only through pages-once.json', () => {
    for (const file of Object.keys(lists['pages-once.json'])) expect(file).toMatch(/\.browser\.test\.ts$/);
  });

  it('leaves out no file that has a PostgreSQL-only part', () => {
    const withPostgresOnlyParts = [...Object.keys(lists['pages-once.json']), ...Object.keys(lists['engine-once.json'])].filter((file) => POSTGRES_ONLY.test(readFileSync(file, 'utf8')));
    expect(withPostgresOnlyParts).toEqual([]);
  });

  it('finds a PostgreSQL-only part where there is one', () => {
    expect(POSTGRES_ONLY.test(readFileSync('test/process/startup-guidance.test.ts', 'utf8'))).toBe(true);
    expect(POSTGRES_ONLY.test(readFileSync('test/subscriptions/renewal-concurrency.test.ts', 'utf8'))).toBe(true);
  });
});
