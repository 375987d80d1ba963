/**
 * The README's quick start, run as a newcomer runs it: every ```sh block under its heading is read
 * FROM README.md, so the text cannot drift from what is tested. The first block's `npm start` runs
 * as written (a fresh DATA_DIR on the embedded database; `npm install` is skipped, node_modules is
 * there); every other block goes, in order, to one long-lived bash — the reader's second terminal,
 * so `export`s and `&` jobs behave as they do for them. The `…` placeholders are filled with what
 * the earlier steps printed, the way a reader copies them; the default ports are mapped to free
 * ones. PGlite only: the quick start is about the embedded database (the demo organization is
 * only seeded there).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from './harness/skip-reasons.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const QUICK_START_HEADING = /^## Quick start\b.*$/m;

/** The ```sh blocks of the quick-start section, in order. */
function quickStartBlocks(readme: string): string[] {
  const start = readme.search(QUICK_START_HEADING);
  if (start < 0) throw new Error('README.md has no "## Quick start" section');
  const rest = readme.slice(start + 1);
  const end = rest.search(/^## /m);
  const section = end < 0 ? rest : rest.slice(0, end);
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** A process group we started (npm start, or the reader's shell with its `&` jobs). */
class Terminal {
  output = '';
  readonly exited: Promise<number | null>;
  constructor(readonly child: ChildProcess) {
    child.stdout!.on('data', (chunk) => (this.output += chunk));
    child.stderr!.on('data', (chunk) => (this.output += chunk));
    this.exited = new Promise((resolve) => child.once('exit', resolve));
  }

  /** Waits until the output (from `from` on) matches; bounded, with the output in the failure. */
  async waitFor(pattern: RegExp, from = 0, ms = 90_000): Promise<RegExpMatchArray> {
    const deadline = Date.now() + ms;
    for (;;) {
      const match = this.output.slice(from).match(pattern);
      if (match) return match;
      if (this.child.exitCode !== null) throw new Error(`exited (${this.child.exitCode}) before ${pattern}:\n${this.output.slice(-4000)}`);
      if (Date.now() > deadline) throw new Error(`no ${pattern} in time:\n${this.output.slice(-4000)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    try {
      process.kill(-this.child.pid!, 'SIGTERM'); // the group: npm's node child, the shell's & jobs
    } catch {
      return; // already gone
    }
    await this.exited;
  }
}

const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const blocks = quickStartBlocks(readme);

let dataDir: string;
let ports: { merchant: number; api: number; admin: number; receiver: number; endpoint: number };
let server: Terminal | undefined;
let shell: Terminal | undefined;
let env: NodeJS.ProcessEnv;

/** The last value printed so far for each placeholder, as a reader would copy it. */
function fillPlaceholders(block: string, printed: string): string {
  const last = (pattern: RegExp, what: string): string => {
    const all = [...printed.matchAll(pattern)];
    if (all.length === 0) throw new Error(`the quick start uses ${what} before any step printed it:\n${printed.slice(-3000)}`);
    return all[all.length - 1]![1]!;
  };
  // Comments (`# → …`) show what a step prints, placeholders included: they are not sent.
  const code = block
    .split('\n')
    .map((line) => line.replace(/(^|\s)#\s.*$/, ''))
    .join('\n');
  const filled = code
    .replaceAll('localhost:3000', `localhost:${ports.merchant}`)
    .replaceAll('localhost:3001', `localhost:${ports.api}`)
    .replaceAll('localhost:4000', `localhost:${ports.receiver}`)
    // Registering a public endpoint: the reader's own host; here a loopback https URL, which the
    // server accepts only because the test starts it with WEBHOOK_ALLOW_LOOPBACK=true.
    .replaceAll('https://<your-public-host>/', `https://localhost:${ports.endpoint}/`)
    .replace(/ak_…/g, () => last(/\b(ak_[\w-]{20,})/g, 'the API key'))
    .replace(/ORG_…/g, () => last(/\b(ORG_[A-Za-z0-9]{10,})/g, 'the orgId'))
    .replace(/http:\/\/localhost:\d+\/checkout\/…/g, () => last(/"url":"(http:\/\/localhost:\d+\/checkout\/[\w-]+)"/g, 'the checkout URL'))
    .replace(/CS_…/g, () => last(/"id":"(CS_\w+)"/g, 'the session id'))
    .replace(/ORD_…/g, () => last(/verified order\.paid (ORD_\w+)/g, 'the order id'))
    .replace(/PRJ_…/g, () => last(/"projectId": "(PRJ_\w+)"/g, 'the project id'))
    .replace(/tk_…/g, () => last(/"key": "(tk_[\w-]+)"/g, 'the telemetry key'));
  expect(filled, 'a placeholder the test does not know').not.toContain('…');
  return filled;
}

let step = 0;
/** Sends one block to the reader's shell and returns what it printed, up to its exit status. */
async function run(block: string): Promise<string> {
  const from = shell!.output.length;
  const marker = `@@quick-start step ${++step} exit`;
  shell!.child.stdin!.write(`${fillPlaceholders(block, server!.output + shell!.output)}\necho "${marker} $?@@"\n`);
  const [, status] = (await shell!.waitFor(new RegExp(`${marker} (\\d+)@@`), from)) as [string, string];
  const printed = shell!.output.slice(from, shell!.output.indexOf(marker, from));
  expect(status, printed).toBe('0');
  return printed;
}

/** Kassa runs here on the embedded database whatever TEST_DATABASE_URL says (as a new user's first start), so the PostgreSQL run would repeat it unchanged. */
const embeddedOnly = process.env.TEST_DATABASE_URL !== undefined;

beforeAll(async () => {
  if (embeddedOnly) return;
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'kassa-readme-'));
  ports = { merchant: await freePort(), api: await freePort(), admin: await freePort(), receiver: await freePort(), endpoint: await freePort() };
  env = { ...process.env };
  delete env.DATABASE_URL; // the embedded database, as on a fresh machine
  Object.assign(env, {
    // Only what differs from the reader's machine: free ports instead of 3000-3002 and 4000, a
    // fresh data folder. NODE_ENV=test makes the server validate its answers against the contract.
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    MERCHANT_PORT: String(ports.merchant),
    API_PORT: String(ports.api),
    ADMIN_PORT: String(ports.admin),
    PORT: String(ports.receiver), // scripts/examples/webhook-receiver.ts
    KASSA_API_URL: `http://localhost:${ports.api}`,
    WEBHOOK_ALLOW_LOOPBACK: 'true',
  });
}, 30_000);

afterAll(async () => {
  if (embeddedOnly) return;
  await shell?.stop();
  await server?.stop();
  // The server's last writes may still land while the folder goes (ENOTEMPTY): rm retries them.
  if (dataDir) await rm(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
}, 60_000);

describe.skipIf(embeddedOnly)(skippedUnless('README quick start', 'embeddedOnly'), () => {
  it('has the blocks this test knows, starting with install + start', () => {
    expect(blocks).toHaveLength(11);
    expect(blocks[0]!.trim()).toBe('npm install && npm start');
    expect(readme).not.toMatch(/\]\(\.\.\//); // no link out of the repository
  });

  it('runs every command as written: npm start → verified order.paid webhook → order read back → telemetry read back', async () => {
    // 1. npm start (node_modules is installed; npm install would change the shared tree).
    server = new Terminal(spawn('bash', ['-c', blocks[0]!.trim().replace(/^npm install && /, '')], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] }));
    await server.waitFor(/\bak_[\w-]{20,}/, 0, 120_000);

    shell = new Terminal(spawn('bash', ['--noprofile', '--norc'], { cwd: ROOT, env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] }));

    // 2. receiver and webhook listen in the background; wait until both are ready.
    const beforeListen = shell.output.length;
    await run(blocks[1]!);
    await shell.waitFor(/webhook receiver listening/, beforeListen);
    await shell.waitFor(/listening for events|forwarding to/i, beforeListen);

    // 3. create the session: Idempotency-Key required, successUrl shown.
    const created = await run(blocks[2]!);
    expect(created).toMatch(/"success":true/);
    expect(created).toMatch(/"status":"CREATED"/);

    // 4. pay with curl against the page's form: redirected to successUrl; the receiver verifies.
    const beforePay = shell.output.length;
    const paid = await run(blocks[3]!);
    expect(paid).toContain('303 https://example.com/thanks');
    await shell.waitFor(/verified order\.paid ORD_\w+ PAID/, beforePay);
    await shell.waitFor(/order\.paid.*\b204\b/, beforePay); // webhook listen: the receiver answered 204
    expect(shell.output).not.toMatch(/rejected EVT_/);

    // 5. read the session and the order.
    const read = await run(blocks[4]!);
    expect(read).toMatch(/"status":"COMPLETE"/);
    expect(read).toMatch(/"orderStatus":"PAID"/);
    expect(read).toMatch(/"amountCents":1500/);

    // The replay of the Idempotency-Key after payment: 409 CONFLICT, as the README says.
    const replay = await run(blocks[5]!);
    expect(replay).toMatch(/"success":false/);
    expect(replay).toMatch(/"code":"CONFLICT"/);

    // 6. the buyer's way back: a single-use portal link for Ada, whose page offers to continue to her account.
    const portal = await run(blocks[6]!);
    const link = /"url":"(http:\/\/localhost:\d+\/portal\/enter\/[0-9A-Za-z]{32})"/.exec(portal)?.[1];
    expect(link, portal).toBeDefined();
    const continuePage = await fetch(link!);
    expect(continuePage.status).toBe(200);
    expect(await continuePage.text()).toContain('Continue to your account');

    // 7. registering an endpoint (the placeholder host replaced).
    const registered = await run(blocks[7]!);
    expect(registered).toMatch(/"success":true/);

    // 8. telemetry: project, key, ingest, read back.
    expect(await run(blocks[8]!)).toMatch(/"projectId": "PRJ_\w+"/);
    expect(await run(blocks[9]!)).toMatch(/"key": "tk_[\w-]+"/);
    const telemetry = await run(blocks[10]!);
    expect(telemetry).toContain('"traces_received":1');
    expect(telemetry).toMatch(/"data":\[\{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"/);
    expect(telemetry).toMatch(/"spans":\[\{"span_id":"00f067aa0ba902b7"/);
    expect(telemetry).toMatch(/"metric":"llm\.tokens\.total".*"value":1500/);
  }, 240_000);
});
