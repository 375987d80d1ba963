import { readFileSync } from 'node:fs';
import { configDefaults, defineConfig } from 'vitest/config';
import LongestFirstSequencer from './test/harness/sequencer.js';

/** Test files that touch no database (test/database-free.json, proven by npm run lint:deps). */
const databaseFree: Record<string, { reason: string }> = JSON.parse(readFileSync(new URL('./test/database-free.json', import.meta.url), 'utf8')).files;
// The PostgreSQL run repeats what depends on the database; the PGlite run runs everything.
const onPostgres = Boolean(process.env.TEST_DATABASE_URL);
/**
 * Files that need a worker process of their own (test/own-process.json): Hardhat keeps one runtime
 * per process (a global context, its chain, a config read once), and these start a local chain.
 */
/** Browser tests of pages run once, on PGlite (test/pages-once.json says why). */
const pagesOnce = Object.keys(JSON.parse(readFileSync(new URL('./test/pages-once.json', import.meta.url), 'utf8')).files);
/** Files whose subject sits above the database run once, on PGlite (test/engine-once.json says why). */
const engineOnce = Object.keys(JSON.parse(readFileSync(new URL('./test/engine-once.json', import.meta.url), 'utf8')).files);
const ownProcess = Object.keys(JSON.parse(readFileSync(new URL('./test/own-process.json', import.meta.url), 'utf8')).files);

/** Test files run at once in this run: KASSA_TEST_WORKERS (a whole number ≥ 1), 2 by default. */
function testWorkers(): number {
  const raw = process.env.KASSA_TEST_WORKERS;
  if (raw === undefined || raw === '') return 2;
  if (!/^[1-9][0-9]?$/.test(raw)) throw new Error(`KASSA_TEST_WORKERS must be a whole number from 1 to 99, not ${JSON.stringify(raw)}`);
  return Number(raw);
}

export default defineConfig({
  test: {
    // The default output, then one line per reason why tests did not run here.
    reporters: ['default', './test/harness/skip-summary-reporter.ts'],
    environment: 'node',
    pool: 'forks',
    // Two cores here; each file boots its own database. KASSA_TEST_WORKERS raises it where files
    // mostly wait (browsers, child processes): .ci/run's PGlite run.
    maxWorkers: testWorkers(),
    // Generous on purpose: a 2-core machine under load must not fail a correct test. Speed is
    // measured by the `npm run bench:*` scripts, never by timed tests.
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // expect.poll's own default (1 s) failed correct browser tests when a loaded machine took longer
    // to render a page after a click; the condition is still polled every 50 ms.
    expect: { poll: { timeout: 20_000 } },
    env: { NODE_ENV: 'test' },
    sequence: { sequencer: LongestFirstSequencer },
    projects: [
      // One worker process runs file after file: src/ and its dependencies are imported once per
      // worker instead of once per file. Each file still gets its own database and apps.
      { extends: true, test: { name: 'shared', isolate: false, globalSetup: ['test/harness/global-setup.ts'], include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...ownProcess, ...(onPostgres ? [...Object.keys(databaseFree), ...pagesOnce, ...engineOnce] : [])] } },
      { extends: true, test: { name: 'own-process', isolate: true, globalSetup: ['test/harness/global-setup.ts'], include: ownProcess } },
    ],
  },
});
