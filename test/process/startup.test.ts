/**
 * Start-up fails loudly instead of half-starting (`src/main.ts` as real child processes, as
 * `npm start` runs it): a port already in use, a second process on one embedded DATA_DIR, and an
 * encryption key other than the one that sealed the database each stop the start with a message
 * that names the port, the folder or the key's source, and a non-zero exit; nothing is printed
 * as if Kassa were up (no "Kassa is listening", no demo key).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
import { LOCK_DIR_NAME } from '../../src/db/data-dir-lock.js';
import { migratedDataDir } from '../harness/migrated-data-dir.js';
import { REPO_ROOT, createDatabase, freePort, newDeployment, startKassa, waitFor, type KassaProcess, type StartOptions, type ThrowAwayDatabase } from '../../tools/cluster.js';

const serverUrl = process.env.TEST_DATABASE_URL;
const CHECK_MIGRATION = '0070_encryption_key_check';

/** How a start ended: the exit code, or 'listening' once the process said it is up. */
async function outcome(proc: KassaProcess): Promise<number | string> {
  return waitFor(
    `${proc.name} to exit or report that it listens`,
    async () => {
      if (proc.child.exitCode !== null || proc.child.signalCode !== null) return await proc.exited;
      if (/Kassa is listening|Kassa worker started/.test(proc.output())) return 'listening';
      return undefined;
    },
    120_000,
    100,
  );
}

/**
 * Resolves once `proc` answers /readyz and said it listens. Both: the ports are chosen free, not
 * held, so another test's server can take the admin port and answer /readyz while `proc` is still
 * starting (a SIGTERM then lands mid-start), and the line alone comes before the greeting.
 */
async function ready(proc: KassaProcess): Promise<void> {
  await waitFor(`${proc.name} to be ready`, async () => {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) throw new Error(`${proc.name} exited with ${await proc.exited}: ${proc.output().slice(-2000)}`);
    if (!/Kassa is listening|Kassa worker started/.test(proc.output())) return false;
    const res = await fetch(`${proc.adminUrl}/readyz`);
    await res.body?.cancel();
    return res.ok;
  }, 120_000, 200);
}

async function occupy(port: number): Promise<net.Server> {
  const server = net.createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
  return server;
}

const closeServer = (server: net.Server) => new Promise((resolve) => server.close(resolve));
const newKey = () => randomBytes(32).toString('base64');

function runMigrateScript(dataDir: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ['--import', 'tsx', 'scripts/migrate.ts'], { cwd: REPO_ROOT, env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: '' } }, (_err, stdout, stderr) =>
      resolve({ code: child.exitCode, output: `${stdout}${stderr}` }),
    );
  });
}

/** Makes the database look like one from before the key check existed (its migration not yet applied). */
async function forgetKeyCheck(run: (sql: string) => Promise<unknown>): Promise<void> {
  await run('DROP TABLE encryption_key_check');
  await run(`DELETE FROM knex_migrations WHERE name = '${CHECK_MIGRATION}'`);
}

// The embedded database is used by the child processes whatever the suite runs on: once is enough.
describe.skipIf(serverUrl !== undefined)(skippedUnless('start-up on the embedded database', 'embeddedOnly'), () => {
  const deployment = newDeployment('');
  let dataDir: string;
  const running: KassaProcess[] = [];
  const start = async (env: Record<string, string> = {}, options: Partial<StartOptions> = {}) => {
    const proc = await startKassa(deployment, { role: 'all', waitReady: false, ...options, env: { DATABASE_URL: '', ENCRYPTION_KEY: '', DATA_DIR: dataDir, ...env } });
    running.push(proc);
    return proc;
  };

  beforeAll(async () => {
    // The run's migrated database: these cases are about ports, the lock and the key, not the
    // first start (the readiness case and the stop during the start take fresh folders of their own).
    dataDir = await migratedDataDir('kassa-startup-');
  });
  afterAll(async () => {
    await Promise.all(running.map((proc) => proc.kill()));
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it.each(['MERCHANT_PORT', 'API_PORT', 'ADMIN_PORT'])('%s already in use: exits 1 naming the port, prints no demo key', async (variable) => {
    const port = await freePort();
    const taken = await occupy(port);
    try {
      const proc = await start({ [variable]: String(port), KASSA_SEED_DEMO: 'true' });
      expect(await outcome(proc), proc.output()).toBe(1);
      expect(proc.output()).toContain(`${variable} ${port} on 127.0.0.1 is already in use`);
      expect(proc.output()).not.toContain('Kassa is listening');
      expect(proc.output()).not.toContain('API key:');
      expect(proc.output()).not.toMatch(/\n\s+at /); // a message, not a stack trace
    } finally {
      await closeServer(taken);
    }
  });

  it('/readyz answers 200 only once the start is complete: every listener up, "Kassa is listening" logged, the demo organization created (issue 27, item 11)', async () => {
    const fresh = await mkdtemp(path.join(os.tmpdir(), 'kassa-ready-'));
    try {
      // Polled as a load balancer would, on the first listener to open, from the moment of spawn.
      const startAndPoll = async () => {
        const proc = await start({ DATA_DIR: fresh, KASSA_SEED_DEMO: 'true' });
        const seen = await waitFor(
          'the merchant listener to answer /readyz 200',
          async () => {
            if (proc.child.exitCode !== null) throw new Error(`exited ${proc.child.exitCode}: ${proc.output().slice(-2000)}`);
            const status = await fetch(`${proc.merchantUrl}/readyz`).then((res) => res.status, () => 0);
            if (status === 200) return { output: proc.output(), admin: await fetch(`${proc.adminUrl}/readyz`).then((res) => res.status, () => 0) };
            // Before it is ready: no answer yet, or 503 with the envelope.
            if (status !== 0) expect(status).toBe(503);
            return undefined;
          },
          200_000,
          10,
        );
        return { proc, seen };
      };
      let { proc, seen } = await startAndPoll();
      // The ports are free when chosen, not held: a process of the other CI run, started meanwhile,
      // can take the merchant port first and answer 200 (seen in CI: 200 after 1.7 s, the admin port
      // not open). Then this child exits naming the port in use: start again on other ports.
      for (let attempt = 1; seen.admin !== 200 && attempt < 3 && (await outcome(proc)) === 1 && /is already in use by another process/.test(proc.output()); attempt++) {
        ({ proc, seen } = await startAndPoll());
      }
      expect(seen.admin).toBe(200);
      // The child wrote these before it turned ready; give the pipe a moment to deliver them.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(seen.output + proc.output()).toContain('Kassa is listening');
      expect(proc.output()).toContain('Kassa demo organization created');
      const orgId = /orgId:\s+(ORG_\w+)/.exec(proc.output())?.[1];
      expect(orgId).toBeDefined();
      await proc.stop();
    } finally {
      await rm(fresh, { recursive: true, force: true });
    }
  }, 240_000);

  it('a second process on the same DATA_DIR is refused, npm run migrate too; a SIGKILLed holder does not block the next start', async () => {
    const first = await start();
    await ready(first);

    const second = await start();
    expect(await outcome(second), second.output()).toBe(1);
    expect(second.output()).toContain(`DATA_DIR ${dataDir} is in use by another Kassa process (PID ${first.child.pid}`);
    expect(second.output()).not.toContain('Kassa is listening');

    const migrate = await runMigrateScript(dataDir);
    expect(migrate.code, migrate.output).toBe(1);
    expect(migrate.output).toContain(`DATA_DIR ${dataDir} is in use by another Kassa process (PID ${first.child.pid}`);

    // The first process still serves after the refusals.
    expect((await fetch(`${first.adminUrl}/readyz`)).status).toBe(200);

    // A crash leaves the lock behind; the next start takes it over once it is stale.
    await first.kill();
    const third = await start();
    await ready(third);
    await third.stop();
    expect(await third.exited).toBe(0);
  }, 240_000);

  it('SIGTERM during the start (a fresh DATA_DIR, PGlite being made): the step under way ends, the start stops, closes the database and the DATA_DIR lock, exits 0', async () => {
    const fresh = await mkdtemp(path.join(os.tmpdir(), 'kassa-stop-starting-'));
    try {
      const proc = await start({ DATA_DIR: fresh });
      // The lock is the first thing the start takes; the database is made and migrated after it.
      await waitFor('the start to take the DATA_DIR lock', async () => existsSync(path.join(fresh, LOCK_DIR_NAME)) || proc.child.exitCode !== null, 120_000, 20);
      proc.child.kill('SIGTERM');
      // Before: Node's default for SIGTERM, the process killed by the signal mid-start.
      expect(await proc.exited, proc.output()).toBe(0);
      expect(proc.output()).toContain('Kassa stopped during its start (SIGTERM)');
      expect(proc.output()).not.toContain('Kassa is listening');
      expect(existsSync(path.join(fresh, LOCK_DIR_NAME)), 'the DATA_DIR lock is released').toBe(false);
      // PGlite was closed, not cut off: its folder opens.
      const db = new PGlite(path.join(fresh, 'pgdata'));
      expect((await db.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
      await db.close();
    } finally {
      await rm(fresh, { recursive: true, force: true });
    }
  }, 240_000);

  it('refuses an encryption key other than the one that sealed the database, naming its source and printing neither key', async () => {
    const keyFile = path.join(dataDir, 'encryption-key');
    const sealingKey = (await readFile(keyFile, 'utf8')).trim();

    const wrongEnv = newKey();
    const viaEnv = await start({ ENCRYPTION_KEY: wrongEnv });
    expect(await outcome(viaEnv), viaEnv.output()).toBe(1);
    expect(viaEnv.output()).toContain('ENCRYPTION_KEY does not match the key that sealed this database');
    expect(viaEnv.output()).not.toContain('Kassa is listening');
    for (const secret of [wrongEnv, sealingKey]) expect(viaEnv.output()).not.toContain(secret);

    const wrongFile = newKey();
    await writeFile(keyFile, `${wrongFile}\n`);
    try {
      const viaFile = await start();
      expect(await outcome(viaFile), viaFile.output()).toBe(1);
      expect(viaFile.output()).toContain(`The key in ${keyFile} (ENCRYPTION_KEY is not set) does not match the key that sealed this database`);
      for (const secret of [wrongFile, sealingKey]) expect(viaFile.output()).not.toContain(secret);
    } finally {
      await writeFile(keyFile, `${sealingKey}\n`);
    }

    // The same key given as ENCRYPTION_KEY instead of the file opens the database.
    const sameKey = await start({ ENCRYPTION_KEY: sealingKey });
    await ready(sameKey);
    await sameKey.stop();
  });

  it('a database from before the key check: a key that cannot open its sealed keys is refused, the right one records the check', async () => {
    const sealingKey = (await readFile(path.join(dataDir, 'encryption-key'), 'utf8')).trim();
    const embedded = new PGlite(path.join(dataDir, 'pgdata'));
    await forgetKeyCheck((sql) => embedded.exec(sql));
    await embedded.close();

    const wrong = await start({ ENCRYPTION_KEY: newKey() });
    expect(await outcome(wrong), wrong.output()).toBe(1);
    expect(wrong.output()).toContain('ENCRYPTION_KEY does not match the key that sealed this database');

    const right = await start({ ENCRYPTION_KEY: sealingKey });
    await ready(right);
    await right.stop();
    const after = new PGlite(path.join(dataDir, 'pgdata'));
    expect((await after.query('SELECT count(*)::int AS n FROM encryption_key_check')).rows).toEqual([{ n: 1 }]);
    await after.close();

    // And from then on the check value alone refuses a wrong key.
    const wrongAgain = await start({ ENCRYPTION_KEY: newKey() });
    expect(await outcome(wrongAgain), wrongAgain.output()).toBe(1);
    expect(wrongAgain.output()).toContain('ENCRYPTION_KEY does not match the key that sealed this database');
  });
});

describe.skipIf(!serverUrl)(skippedUnless('start-up on PostgreSQL', 'postgresOnly'), () => {
  let db: ThrowAwayDatabase;
  let direct: pg.Client;
  const running: KassaProcess[] = [];
  const sharedDataDir = path.join(os.tmpdir(), `kassa-startup-pg-${randomBytes(4).toString('hex')}`);
  const sealingKey = newKey();
  const deployment = () => ({ ...newDeployment(db.url), encryptionKey: sealingKey });
  const start = async (role: 'api' | 'worker', env: Record<string, string> = {}) => {
    const proc = await startKassa(deployment(), { role, waitReady: false, env: { DATA_DIR: sharedDataDir, ...env } });
    running.push(proc);
    return proc;
  };

  beforeAll(async () => {
    db = await createDatabase(serverUrl!, 'kassa_startup');
    direct = new pg.Client({ connectionString: db.url });
    await direct.connect();
  });
  afterAll(async () => {
    await Promise.all(running.map((proc) => proc.kill()));
    await direct?.end();
    await db?.drop();
    await rm(sharedDataDir, { recursive: true, force: true });
  });

  it('two processes starting together on an empty database with different keys: one runs, the other is refused', async () => {
    const otherKey = newKey();
    const [api, worker] = await Promise.all([start('api'), start('worker', { ENCRYPTION_KEY: otherKey })]);
    const results = await Promise.all([outcome(api), outcome(worker)]);
    expect(results.filter((r) => r === 'listening'), `${api.output()}\n${worker.output()}`).toHaveLength(1);
    expect(results.filter((r) => r === 1)).toHaveLength(1);
    const refused = results[0] === 1 ? api : worker;
    expect(refused.output()).toContain('ENCRYPTION_KEY does not match the key that sealed this database');
    for (const secret of [sealingKey, otherKey]) expect(refused.output()).not.toContain(secret);
    await Promise.all([api.stop(), worker.stop()]);
  });

  it('refuses a key that does not match, for either role; DATA_DIR is not locked with DATABASE_URL', async () => {
    // Settle who sealed the database in case the previous test's race went to the other key.
    await forgetKeyCheck((sql) => direct.query(sql));
    await direct.query('DELETE FROM webhook_signing_keys');
    const first = await start('api');
    await ready(first);
    // A second process on the same DATA_DIR: fine with PostgreSQL (DATA_DIR holds no database).
    const second = await start('worker');
    await ready(second);

    for (const role of ['api', 'worker'] as const) {
      const wrong = await start(role, { ENCRYPTION_KEY: newKey() });
      expect(await outcome(wrong), wrong.output()).toBe(1);
      expect(wrong.output()).toContain('ENCRYPTION_KEY does not match the key that sealed this database');
    }
    await Promise.all([first.stop(), second.stop()]);
  });

  it('a database from before the key check: a key that cannot open its sealed keys is refused, the right one records the check', async () => {
    await forgetKeyCheck((sql) => direct.query(sql));
    const wrong = await start('worker', { ENCRYPTION_KEY: newKey() });
    expect(await outcome(wrong), wrong.output()).toBe(1);
    expect(wrong.output()).toContain('ENCRYPTION_KEY does not match the key that sealed this database');

    const right = await start('worker');
    await ready(right);
    expect((await direct.query('SELECT count(*)::int AS n FROM encryption_key_check')).rows).toEqual([{ n: 1 }]);
    await right.stop();
  });

  it('the worker status listener: ADMIN_PORT already in use exits 1 naming the port', async () => {
    const port = await freePort();
    const taken = await occupy(port);
    try {
      const worker = await start('worker', { ADMIN_PORT: String(port) });
      expect(await outcome(worker), worker.output()).toBe(1);
      expect(worker.output()).toContain(`ADMIN_PORT ${port} on 127.0.0.1 is already in use`);
      expect(worker.output()).not.toContain('Kassa worker started');
    } finally {
      await closeServer(taken);
    }
  });
});
