import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
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
