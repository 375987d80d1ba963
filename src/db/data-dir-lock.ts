/**
 * One process per embedded database: a lock on DATA_DIR, taken before PGlite opens `pgdata/`
 * (PGlite itself does not refuse a second process, and two of them corrupt the folder).
 *
 * The lock is proper-lockfile's: an atomic `mkdir` of `<DATA_DIR>/kassa.lock` whose mtime the
 * holder refreshes every few seconds, so a lock left by a crashed (SIGKILLed) process goes stale
 * and the next start takes it over instead of being blocked forever. Beside it, `kassa.lock.json`
 * names the holder (PID, host, start time) for the refusal message, and lets a start on the same
 * host refuse at once when that process is alive instead of waiting for the lock to go stale.
 */
import { mkdir, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import lockfile from 'proper-lockfile';
import { StartupError } from '../kernel/startup-error.js';

export const LOCK_DIR_NAME = 'kassa.lock';
const HOLDER_FILE_NAME = 'kassa.lock.json';
/**
 * A lock not refreshed for this long belongs to a process that is gone. Long enough that a busy
 * event loop (PGlite runs statements synchronously) does not lose it, short enough for a restart.
 */
const STALE_MS = 15_000;
const RETRY_EVERY_MS = 500;

interface Holder {
  pid: number;
  host: string;
  startedAt: string;
}

export interface DataDirLock {
  release(): Promise<void>;
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, it belongs to another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function readHolder(file: string): Promise<Holder | undefined> {
  try {
    const holder = JSON.parse(await readFile(file, 'utf8')) as Partial<Holder>;
    return typeof holder.pid === 'number' && typeof holder.host === 'string' && typeof holder.startedAt === 'string' ? (holder as Holder) : undefined;
  } catch {
    return undefined;
  }
}

function inUse(dataDir: string, lockPath: string, holder: Holder | undefined): StartupError {
  const who = holder ? `PID ${holder.pid} on ${holder.host}, started ${holder.startedAt}` : `its lock ${lockPath} is held`;
  return new StartupError(
    `DATA_DIR ${dataDir} is in use by another Kassa process (${who}): the embedded database can be opened by one process at a time. ` +
      'Stop that process first, or set DATABASE_URL to run several processes against PostgreSQL.',
  );
}

/**
 * Takes the lock or throws a StartupError naming the holder. When the lock is held by a process
 * that cannot be seen alive here (crashed, or on another host sharing the folder), waits until the
 * lock is refreshed (held: refused) or goes stale (taken over). `onLost` runs if another process
 * takes the lock over later (this one stalled past the stale time): the caller must stop at once.
 */
export async function lockDataDir(dataDir: string, options: { now: Date; onLost: (err: Error) => void }): Promise<DataDirLock> {
  await mkdir(dataDir, { recursive: true });
  const dir = await realpath(dataDir);
  const lockPath = path.join(dir, LOCK_DIR_NAME);
  const holderPath = path.join(dir, HOLDER_FILE_NAME);
  const attempt = (retries: number) =>
    lockfile.lock(dir, {
      lockfilePath: lockPath,
      realpath: false,
      stale: STALE_MS,
      retries: { retries, factor: 1, minTimeout: RETRY_EVERY_MS, maxTimeout: RETRY_EVERY_MS },
      onCompromised: options.onLost,
    });
  const held = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ELOCKED';

  let unlock: () => Promise<void>;
  try {
    unlock = await attempt(0);
  } catch (err) {
    if (!held(err)) throw err;
    const holder = await readHolder(holderPath);
    if (holder && holder.host === os.hostname() && holder.pid !== process.pid && processExists(holder.pid)) throw inUse(dataDir, lockPath, holder);
    try {
      unlock = await attempt(Math.ceil(STALE_MS / RETRY_EVERY_MS) + 4);
    } catch (retryErr) {
      if (held(retryErr)) throw inUse(dataDir, lockPath, await readHolder(holderPath));
      throw retryErr;
    }
  }
  const holder: Holder = { pid: process.pid, host: os.hostname(), startedAt: options.now.toISOString() };
  await writeFile(holderPath, `${JSON.stringify(holder)}\n`);
  return {
    release: async () => {
      // The holder file first: once the lock is gone, the next holder writes its own.
      await rm(holderPath, { force: true });
      await unlock();
    },
  };
}
