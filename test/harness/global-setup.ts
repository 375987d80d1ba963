/**
 * Migrates a database once per run; every test file then starts from a copy of it:
 * - embedded (default): a PGlite data-dir dump that each file loads (~0.7 s instead of a 4 s boot + migrate);
 * - TEST_DATABASE_URL set: a migrated template database each file clones with CREATE DATABASE … TEMPLATE.
 * It also compiles the entry points tests start as child processes (test/harness/prebuilt-entries.ts).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { buildConsole } from '../../src/console/build.js';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { PREBUILT_ENTRIES_ENV } from '../../tools/node-entry.js';
import { startPgBouncer } from '../../tools/pgbouncer.js';
import { databaseUrlFor } from './postgres.js';
import { buildPrebuiltEntries } from './prebuilt-entries.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgliteSnapshot: string;
    postgresTemplate: string;
    /** KASSA_TEST_PGBOUNCER=true: TEST_DATABASE_URL's server through PgBouncer in transaction mode ('' otherwise). */
    postgresPooler: string;
  }
}

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Prebuilt entry points for this run; the workers inherit the variable that names the folder. */
async function prebuildEntries(): Promise<() => Promise<void>> {
  const parent = path.join(REPO_ROOT, 'node_modules', '.cache', 'kassa-prebuilt-entries');
  await mkdir(parent, { recursive: true });
  const dir = await mkdtemp(path.join(parent, 'run-'));
  await buildPrebuiltEntries(REPO_ROOT, dir);
  process.env[PREBUILT_ENTRIES_ENV] = dir;
  return async () => {
    delete process.env[PREBUILT_ENTRIES_ENV];
    await rm(dir, { recursive: true, force: true });
  };
}

interface Prepared {
  pgliteSnapshot: string;
  postgresTemplate: string;
  postgresPooler: string;
  teardown(): Promise<void>;
}

async function prepare(): Promise<Prepared> {
  // The browser console's bundles too (web/dist/), which the console's browser tests load.
  const [removePrebuilt] = await Promise.all([prebuildEntries(), buildConsole()]);
  const serverUrl = process.env.TEST_DATABASE_URL;
  if (serverUrl) {
    const template = `kassa_tpl_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${template}`);
    const database = await openDatabase({ databaseUrl: databaseUrlFor(serverUrl, template) });
    await migrateLatest(database.db);
    await database.close();
    // Each file's own pool then goes through PgBouncer; the template, CREATE DATABASE and
    // migrations stay on the server itself, as DATABASE_DIRECT_URL does in production.
    const pooler = process.env.KASSA_TEST_PGBOUNCER === 'true' ? await startPgBouncer(serverUrl) : undefined;
    return {
      pgliteSnapshot: '',
      postgresTemplate: template,
      postgresPooler: pooler?.urlFor(serverUrl) ?? '',
      teardown: async () => {
        await pooler?.stop();
        // Test files drop their own databases; the template goes last.
        await admin.query(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
        await admin.end();
        await removePrebuilt();
      },
    };
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kassa-test-'));
  const instance = new PGlite();
  const database = await openDatabase({ pglite: instance });
  await migrateLatest(database.db);
  const dump = await instance.dumpDataDir('none');
  const file = path.join(dir, 'migrated.tar');
  await writeFile(file, Buffer.from(await dump.arrayBuffer()));
  await database.close();
  return {
    pgliteSnapshot: file,
    postgresTemplate: '',
    postgresPooler: '',
    teardown: async () => {
      await rm(dir, { recursive: true, force: true });
      await removePrebuilt();
    },
  };
}

/** Each project of vitest.config.ts runs this in the one main process: prepare once, clean up after the last. */
const shared = globalThis as { kassaTestSetup?: { projects: number; prepared: Promise<Prepared> } };

export default async function setup(project: TestProject) {
  shared.kassaTestSetup ??= { projects: 0, prepared: prepare() };
  const state = shared.kassaTestSetup;
  state.projects++;
  const prepared = await state.prepared;
  project.provide('pgliteSnapshot', prepared.pgliteSnapshot);
  project.provide('postgresTemplate', prepared.postgresTemplate);
  project.provide('postgresPooler', prepared.postgresPooler);
  return async () => {
    if (--state.projects > 0) return;
    shared.kassaTestSetup = undefined;
    await prepared.teardown();
  };
}
