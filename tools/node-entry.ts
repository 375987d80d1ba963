/**
 * The node arguments that run one of Kassa's TypeScript entry points (src/main.ts,
 * scripts/admin.ts) in a child process, from the repository root.
 *
 * Normally through tsx, as `npm start` and `npm run admin` run them. The test suite's global setup
 * compiles these entry points once per run (test/harness/prebuilt-entries.ts) and names the folder
 * in KASSA_PREBUILT_ENTRIES; a child then loads that one module instead of resolving and
 * transpiling every source file through tsx's loader again: the same source, started for less.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';

export const PREBUILT_ENTRIES_ENV = 'KASSA_PREBUILT_ENTRIES';

/** `src/main.ts` → `src__main.mjs`: the prebuilt module's file name in the folder. */
export function prebuiltFileName(entry: string): string {
  return `${entry.replace(/\.ts$/, '').replaceAll('/', '__')}.mjs`;
}

export function nodeEntryArgs(entry: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const dir = env[PREBUILT_ENTRIES_ENV];
  if (dir) {
    const file = path.join(dir, prebuiltFileName(entry));
    if (existsSync(file)) return [file];
  }
  return ['--import', 'tsx', entry];
}

/**
 * How long a test lets one short-lived child command (the admin CLI, an example script) run before
 * killing it: long enough for a loaded 2-core machine to start Node and load the entry point
 * (20–30 s was not, in CI runs under load), short enough that a hung command still fails its test.
 */
export const CHILD_COMMAND_TIMEOUT_MS = 120_000;
