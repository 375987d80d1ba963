/**
 * Starting points for Kassa run as a child process (src/main.ts) by tests whose subject is not
 * the first start: a child on a fresh DATA_DIR or an empty PostgreSQL database migrates from
 * scratch (~18 s of CPU on the embedded database, much more under CI's load). These hand it the
 * run's migrated database instead, made once by test/harness/global-setup.ts; the child then finds
 * every migration applied and starts as it does on an existing installation. Tests of the first
 * start itself (readme-quick-start, startup's readiness, startup-guidance's first start, the
 * migrations) keep an empty one.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { inject } from 'vitest';
import { createDatabase, type ThrowAwayDatabase } from '../../tools/cluster.js';
const run = promisify(execFile);

/**
 * A new temporary DATA_DIR whose pgdata/ holds the run's migrated database; left empty on the
 * PostgreSQL run, which has no snapshot. The global setup's snapshot is PGlite's dump of its data
 * directory, a tar of pgdata/'s files: unpacked as they are, they are the folder PGlite itself
 * writes from it (`new PGlite(dir, { loadDataDir })`), in ~0.1 s instead of ~3 s of WebAssembly
 * (~11 s under CI's load).
 */
export async function migratedDataDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  const snapshot = inject('pgliteSnapshot');
  if (!snapshot) return dir;
  const pgdata = path.join(dir, 'pgdata');
  await mkdir(pgdata);
  // The members are named from the root (/global, /pg_wal, ...); tar takes them under -C.
  await run('tar', ['-xf', snapshot, '-C', pgdata]);
  return dir;
}

/**
 * A throw-away database on `serverUrl`, a copy of the run's migrated template (an empty one when
 * the run has none), dropped by `drop()`.
 */
export async function migratedDatabase(serverUrl: string, prefix: string): Promise<ThrowAwayDatabase> {
  const template = inject('postgresTemplate');
  return createDatabase(serverUrl, prefix, template ? { template } : {});
}
