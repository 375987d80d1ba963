import { readFileSync } from 'node:fs';
import { configDefaults, defineConfig } from 'vitest/config';

/** Test files that touch no database (test/database-free.json, proven by npm run lint:deps). */
const databaseFree: Record<string, { reason: string }> = JSON.parse(readFileSync(new URL('./test/database-free.json', import.meta.url), 'utf8')).files;
// The PostgreSQL run repeats what depends on the database; the PGlite run runs everything.
const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...(onPostgres ? Object.keys(databaseFree) : [])],
    globalSetup: ['test/harness/global-setup.ts'],
    // The default output, then one line per reason why tests did not run here.
    reporters: ['default', './test/harness/skip-summary-reporter.ts'],
    environment: 'node',
    pool: 'forks',
    // Two cores here; each file boots its own database.
    maxWorkers: 2,
    // Generous on purpose: a 2-core machine under load must not fail a correct test. Speed is
    // measured by the `npm run bench:*` scripts, never by timed tests.
    testTimeout: 120_000,
    hookTimeout: 180_000,
    env: { NODE_ENV: 'test' },
  },
});
