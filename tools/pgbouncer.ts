/**
 * PgBouncer in transaction mode in front of a PostgreSQL server, for the tests that run Kassa
 * behind a pooler (test/db/pgbouncer.test.ts, and the part of the suite .ci/run runs through it
 * with KASSA_TEST_PGBOUNCER=true). Debian's package (`apt-get install pgbouncer`); as root it runs
 * as the `postgres` user (PgBouncer refuses root). Every database name on the server is reachable
 * through it (`* =`), with the user and no password (the server's trust authentication).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, waitFor } from './cluster.js';
import pg from 'pg';

const run = promisify(execFile);

export const PGBOUNCER_BIN = process.env.PGBOUNCER_BIN ?? '/usr/sbin/pgbouncer';

export const pgBouncerInstalled = (): boolean => existsSync(PGBOUNCER_BIN);

export interface PgBouncer {
  /** The server URL with PgBouncer's host and port instead (same user and database). */
  urlFor(serverUrl: string): string;
  port: number;
  output(): string;
  stop(): Promise<void>;
}

export async function startPgBouncer(serverUrl: string, options: { poolSize?: number } = {}): Promise<PgBouncer> {
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kassa-pgbouncer-'));
  const port = await freePort();
  const ini = [
    '[databases]',
    `* = host=${server.hostname} port=${server.port || 5432}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${path.join(dir, 'userlist.txt')}`,
    'pool_mode = transaction',
    `default_pool_size = ${options.poolSize ?? 4}`,
    'max_client_conn = 1000',
    // Kassa sends statement_timeout at connect (node-postgres); in transaction mode it cannot
    // follow the client, so it is set on the role instead (docs/operations.md).
    'ignore_startup_parameters = statement_timeout,extra_float_digits,options',
    'server_idle_timeout = 10',
    'log_connections = 0',
    'log_disconnections = 0',
  ].join('\n');
  await writeFile(path.join(dir, 'pgbouncer.ini'), `${ini}\n`);
  await writeFile(path.join(dir, 'userlist.txt'), `"${user}" ""\n`);
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
    const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    for (const file of ['', 'pgbouncer.ini', 'userlist.txt']) await chown(path.join(dir, file), uid, gid);
  }
  const [file, args] = asRoot ? ['runuser', ['-u', 'postgres', '--', PGBOUNCER_BIN, path.join(dir, 'pgbouncer.ini')]] : [PGBOUNCER_BIN, [path.join(dir, 'pgbouncer.ini')]];
  const child: ChildProcess = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const chunks: string[] = [];
  child.stdout!.on('data', (c: Buffer) => chunks.push(c.toString()));
  child.stderr!.on('data', (c: Buffer) => chunks.push(c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.once('exit', kill);
  const urlFor = (target: string) => {
    const url = new URL(target);
    url.hostname = '127.0.0.1';
    url.port = String(port);
    return url.toString();
  };
  try {
    await waitFor('PgBouncer to accept connections', async () => {
      if (child.exitCode !== null) throw new Error(`pgbouncer exited: ${chunks.join('')}`);
      const client = new pg.Client({ connectionString: urlFor(serverUrl) });
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      return true;
    }, 15_000, 100);
  } catch (err) {
    kill();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    urlFor,
    port,
    output: () => chunks.join(''),
    stop: async () => {
      process.removeListener('exit', kill);
      kill();
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}
