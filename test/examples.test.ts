/**
 * The runnable examples of scripts/examples/ against a real server: `src/main.ts` started as a
 * separate process (what `npm start` runs) with its defaults except a temporary DATA_DIR and free
 * ports, set up through the admin API the way an operator would (token from the data folder),
 * then each example run as its own process.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from './harness/skip-reasons.js';
import { migratedDataDir } from './harness/migrated-data-dir.js';
import { ADMIN_TOKEN_FILE } from '../src/kernel/local-secrets.js';
import { nodeEntryArgs } from '../tools/node-entry.js';

const ROOT = path.resolve(import.meta.dirname, '..');
let adminToken: string;

let dataDir: string;
let server: ChildProcess | undefined;
let serverOutput = '';
let ports: { merchant: number; api: number; admin: number };

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

async function waitReady(url: string, deadline: number): Promise<void> {
  for (;;) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} not ready in time:\n${serverOutput.slice(-3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const admin = async (method: string, route: string, body?: unknown) => {
  const res = await fetch(`http://127.0.0.1:${ports.admin}${route}`, {
    method,
    headers: { Authorization: `Bearer ${adminToken}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = (await res.json()) as { data: Record<string, string> };
  expect(res.status, JSON.stringify(json)).toBeLessThan(300);
  return json.data;
};

function runExample(file: string, env: Record<string, string>): Promise<{ code: number | null; lines: Array<Record<string, unknown>>; output: string }> {
  return run(spawn(process.execPath, ['--import', 'tsx', path.join('scripts/examples', file)], { cwd: ROOT, env: { ...process.env, NODE_ENV: 'development', ...env }, stdio: ['ignore', 'pipe', 'pipe'] }));
}

/** A documented shell line, run with bash from the repository root as a reader pastes it. */
function runShellLine(line: string): Promise<{ code: number | null; lines: Array<Record<string, unknown>>; output: string }> {
  return run(spawn('bash', ['-c', line], { cwd: ROOT, env: { ...process.env, NODE_ENV: 'development' }, stdio: ['ignore', 'pipe', 'pipe'] }));
}

function run(child: ChildProcess): Promise<{ code: number | null; lines: Array<Record<string, unknown>>; output: string }> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk) => (stdout += chunk));
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 130_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const lines = stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      resolve({ code, lines, output: `${stdout}\n${stderr}` });
    });
  });
}

/** Kassa runs here on the embedded database whatever TEST_DATABASE_URL says (as a new user's first start), so the PostgreSQL run would repeat it unchanged. */
const embeddedOnly = process.env.TEST_DATABASE_URL !== undefined;

beforeAll(async () => {
  if (embeddedOnly) return;
  // The run's migrated database: the examples are the subject here, not the first start.
  dataDir = await migratedDataDir('kassa-examples-');
  ports = { merchant: await freePort(), api: await freePort(), admin: await freePort() };
  server = spawn(process.execPath, nodeEntryArgs('src/main.ts'), {
    cwd: ROOT,
    env: {
      ...process.env,
      // test: responses are validated against the documents, so drift fails the examples too.
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      MERCHANT_PORT: String(ports.merchant),
      API_PORT: String(ports.api),
      ADMIN_PORT: String(ports.admin),
      PUBLIC_BASE_URL: `http://127.0.0.1:${ports.merchant}`,
      PUBLIC_API_URL: `http://127.0.0.1:${ports.api}`,
      // usage-billing.ts moves the clock to a period's end (admin API advanceTestClock); it runs last.
      TEST_CLOCK: 'true',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  server.stdout!.on('data', (chunk) => (serverOutput += chunk));
  server.stderr!.on('data', (chunk) => (serverOutput += chunk));
  const deadline = Date.now() + 120_000;
  for (const port of Object.values(ports)) await waitReady(`http://127.0.0.1:${port}/readyz`, deadline);
  adminToken = (await readFile(path.join(dataDir, ADMIN_TOKEN_FILE), 'utf8')).trim();
}, 150_000);

afterAll(async () => {
  if (embeddedOnly) return;
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server!.once('exit', resolve));
    server.kill('SIGTERM');
    await exited;
  }
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}, 30_000);

describe.skipIf(embeddedOnly)(skippedUnless('scripts/examples', 'embeddedOnly'), () => {
  it('merchant-integration.ts against default settings: idempotent session, sandbox payment, order.paid through the local loop, verified, order read back', async () => {
    const org = await admin('POST', '/v1/orgs', { name: 'Example shop' });
    const key = await admin('POST', `/v1/orgs/${org.orgId}/api-keys`, { name: 'example backend' });
    const run = await runExample('merchant-integration.ts', {
      KASSA_BASE_URL: `http://127.0.0.1:${ports.merchant}`,
      KASSA_API_URL: `http://127.0.0.1:${ports.api}`,
      KASSA_API_KEY: key.key!,
      // Where the admin CLI behind the local loop finds the server and its token, as on a developer's machine.
      ADMIN_PORT: String(ports.admin),
      DATA_DIR: dataDir,
    });
    expect(run.code, run.output).toBe(0);
    const steps = Object.fromEntries(run.lines.map((line) => [line.step, line]));
    expect(steps['checkout session created']).toMatchObject({ amount: 1500, currency: 'USD', retrySameSession: true });
    expect(steps['webhook verified']).toMatchObject({ type: 'order.paid' });
    expect(steps['order read through the API']).toMatchObject({ status: 'PAID', amountCents: 1500, currency: 'USD' });
    expect(steps.done).toBeDefined();
    expect(run.lines.some((line) => line.step === 'webhook rejected')).toBe(false);
  }, 120_000);

  it('agent.ts, run by docs/agent-wallet.md\'s command line: loads the Agent Wallet Key, reads its identity and gets an EIP-712 signature', async () => {
    const org = await admin('POST', '/v1/orgs', { name: 'Example agents' });
    const wallet = await admin('POST', `/v1/orgs/${org.orgId}/wallets`, { name: 'Shopping wallet' });
    const agent = await admin('POST', `/v1/orgs/${org.orgId}/agents`, { name: 'Shopping agent', walletId: wallet.walletId });
    // docs/agent-wallet.md's command line itself, with the reader's URL and key filled in.
    const documented = (await readFile(path.join(ROOT, 'docs/agent-wallet.md'), 'utf8')).split('\n').find((l) => l.includes('npx tsx scripts/examples/agent.ts'))!;
    expect(documented).toContain("KASSA_AGENT_WALLET_KEY='…'");
    const run = await runShellLine(documented.replace('http://localhost:3001', `http://127.0.0.1:${ports.api}`).replace("'…'", `'${agent.agentWalletKey!}'`));
    expect(run.code, run.output).toBe(0);
    const steps = Object.fromEntries(run.lines.map((line) => [line.step, line]));
    expect(steps.identity).toMatchObject({ agentId: agent.agentId, walletId: wallet.walletId, walletAddress: wallet.walletAddress });
    expect(steps.signed).toMatchObject({ walletAddress: wallet.walletAddress });
    expect(steps.signed!.signature).toMatch(/^0x[0-9a-f]{130}$/);
  }, 120_000);

  // Last: it moves the server's test clock a month ahead.
  it('usage-billing.ts: OpenLLMetry spans of a local model server become a meter; at the period end the renewal order carries the fee and a USAGE line for the tokens the model server returned, announced by order.paid', async () => {
    const org = await admin('POST', '/v1/orgs', { name: 'Example usage billing' });
    const key = await admin('POST', `/v1/orgs/${org.orgId}/api-keys`, { name: 'example backend' });
    const run = await runExample('usage-billing.ts', {
      KASSA_BASE_URL: `http://127.0.0.1:${ports.merchant}`,
      KASSA_API_URL: `http://127.0.0.1:${ports.api}`,
      KASSA_API_KEY: key.key!,
      ADMIN_URL: `http://127.0.0.1:${ports.admin}`,
      ADMIN_TOKEN: adminToken,
      DATA_DIR: dataDir,
    });
    expect(run.code, `${run.output}\nserver:\n${serverOutput.slice(-4000)}`).toBe(0);
    const steps = Object.fromEntries(run.lines.map((line) => [line.step, line])) as Record<string, Record<string, unknown>>;
    const usage = steps['usage measured']!;
    expect(usage.meterQuantity).toBe(usage.tokensReturnedByModelServer);
    expect(usage.meterQuantity as number).toBeGreaterThan(10_000);
    const renewal = steps['renewal order paid']!;
    expect(renewal).toMatchObject({ status: 'PAID', tokens: usage.meterQuantity, checks: { quantityIsTheTokensReturned: true, billableAfterIncluded: true, amountAtTheDocumentedRounding: true, totalIsFeePlusUsage: true } });
    // An independent recomputation: 0.04 USD per 1,000 tokens beyond 10,000, rounded half up to the cent.
    const billable = (usage.meterQuantity as number) - 10_000;
    expect(renewal.amountCents).toBe(500 + Math.round((billable * 0.04) / 10));
    expect(renewal.lines).toEqual([
      expect.objectContaining({ kind: 'PRICE', quantity: '1', amountCents: 500 }),
      expect.objectContaining({ kind: 'USAGE', quantity: String(usage.meterQuantity), amountCents: Math.round((billable * 0.04) / 10) }),
    ]);
    expect(steps.done).toBeDefined();
  }, 150_000);
});
