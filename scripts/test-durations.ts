/**
 * Writes test/durations.json (the order test/harness/sequencer.ts runs the files in) from a run
 * of the whole suite: `npm run test:durations` runs it on the embedded database with vitest's JSON
 * reporter and keeps each file's duration in seconds. Relative durations are what count, so a run
 * on a loaded machine serves as well as a quiet one.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const given = process.argv[2];
const dir = given ? undefined : mkdtempSync(path.join(os.tmpdir(), 'kassa-durations-'));
const reportFile = given ?? path.join(dir!, 'report.json');
if (!given) {
  const env = { ...process.env };
  delete env.TEST_DATABASE_URL;
  try {
    execFileSync(process.execPath, [path.join(root, 'node_modules/vitest/vitest.mjs'), 'run', '--reporter=json', `--outputFile=${reportFile}`], { cwd: root, env, stdio: 'inherit' });
  } catch {
    // A failing test still leaves every file's duration in the report.
  }
}
const report = JSON.parse(readFileSync(reportFile, 'utf8')) as { testResults: Array<{ name: string; startTime: number; endTime: number }> };
const seconds: Record<string, number> = {};
for (const file of report.testResults.sort((a, b) => b.endTime - b.startTime - (a.endTime - a.startTime))) {
  seconds[path.relative(root, file.name)] = Math.round((file.endTime - file.startTime) / 100) / 10;
}
const description = 'Seconds each test file took in a run of the whole suite on the embedded database; test/harness/sequencer.ts starts the longest first. Refresh: npm run test:durations.';
writeFileSync(path.join(root, 'test/durations.json'), `${JSON.stringify({ description, seconds }, null, 2)}\n`);
if (dir) rmSync(dir, { recursive: true, force: true });
console.log(`test/durations.json: ${Object.keys(seconds).length} files`);
