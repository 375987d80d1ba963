/**
 * One line per reason at the end of a run: how many tests did not run here, and what makes them
 * run ("17 tests skipped (PostgreSQL only: set TEST_DATABASE_URL=… to run)"). The default
 * reporter counts skipped tests without saying why. On PostgreSQL it also names the test files
 * left out as database-free (test/database-free.json) and why each touches no database.
 */
import { readFileSync } from 'node:fs';
import type { Reporter, TestModule, Vitest } from 'vitest/node';
import { SKIP_REASONS } from './skip-reasons.js';

export default class SkipSummaryReporter implements Reporter {
  private vitest: Vitest | undefined;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    // With -t, every test outside the pattern counts as skipped: no reason to report then.
    if (this.vitest?.config.testNamePattern) return;
    const counts = new Map<string, number>();
    for (const module of testModules) {
      for (const test of module.children.allTests('skipped')) {
        const reason = Object.values(SKIP_REASONS).find((text) => test.fullName.includes(`(${text})`));
        if (reason) counts.set(reason, (counts.get(reason) ?? 0) + 1);
      }
    }
    for (const [reason, count] of counts) process.stdout.write(`   ${count} test${count === 1 ? '' : 's'} skipped (${reason})\n`);
    if (process.env.TEST_DATABASE_URL) {
      const files: Record<string, { reason: string }> = JSON.parse(readFileSync(new URL('../database-free.json', import.meta.url), 'utf8')).files;
      process.stdout.write(`   ${Object.keys(files).length} test files not run on PostgreSQL: they touch no database (test/database-free.json, proven by npm run lint:deps); the PGlite run runs them\n`);
      for (const [file, { reason }] of Object.entries(files)) process.stdout.write(`     ${file}: ${reason}\n`);
      const pages: Record<string, { reason: string }> = JSON.parse(readFileSync(new URL('../pages-once.json', import.meta.url), 'utf8')).files;
      process.stdout.write(`   ${Object.keys(pages).length} browser test files of pages not run on PostgreSQL (test/pages-once.json): the operations behind them are tested on both databases; the PGlite run runs them\n`);
      for (const [file, { reason }] of Object.entries(pages)) process.stdout.write(`     ${file}: ${reason}\n`);
      const once: Record<string, { reason: string }> = JSON.parse(readFileSync(new URL('../engine-once.json', import.meta.url), 'utf8')).files;
      process.stdout.write(`   ${Object.keys(once).length} test files whose subject sits above the database not run on PostgreSQL (test/engine-once.json); the PGlite run runs them\n`);
      for (const [file, { reason }] of Object.entries(once)) process.stdout.write(`     ${file}: ${reason}\n`);
    }
  }
}
