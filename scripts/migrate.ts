/**
 * `npm run migrate`: brings the database up to the latest migration and exits, for a release that
 * migrates before it rolls out new processes (every process also migrates at start, under the
 * same advisory lock, so running this first is optional). Reads DATABASE_DIRECT_URL (the server
 * itself, when DATABASE_URL goes through a pooler), else DATABASE_URL, or DATA_DIR for the
 * embedded database, as the service does.
 */
import path from 'node:path';
import { loadConfig } from '../src/config.js';
import { migrateLatest, openDatabase } from '../src/db/knex.js';
import { lockDataDir } from '../src/db/data-dir-lock.js';
import { systemClock } from '../src/kernel/clock.js';

async function main(): Promise<void> {
  const config = loadConfig(process.env, []);
  // The embedded database admits one process: refused while Kassa runs on the same DATA_DIR.
  const lock = config.databaseUrl ? undefined : await lockDataDir(config.dataDir, { now: systemClock.now(), onLost: (err) => {
    process.stderr.write(`migrate stopped: it lost its lock on DATA_DIR ${config.dataDir} (${err.message})\n`);
    process.exit(1);
  } });
  try {
    const database = await openDatabase(
      config.databaseUrl ? { databaseUrl: config.databaseDirectUrl ?? config.databaseUrl, poolMax: 2 } : { dataDir: path.join(config.dataDir, 'pgdata') },
    );
    try {
      const applied = await migrateLatest(database.db);
      process.stdout.write(`${applied === 0 ? 'Already at the latest migration' : `Applied ${applied} migration(s)`} (${database.kind === 'postgres' ? 'PostgreSQL' : `embedded database in ${config.dataDir}`})\n`);
    } finally {
      await database.close();
    }
  } finally {
    await lock?.release();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`migrate failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
