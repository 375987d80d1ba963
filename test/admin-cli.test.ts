/**
 * The admin CLI as users run it: a real subprocess against the admin app listening on an
 * ephemeral port. Asserts the output contract (one JSON document on stdout, JSON errors on stderr,
 * exit 1 for API errors, 2 for usage errors) and that its effects are real (keys authenticate,
 * revoked keys stop working).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN_FILE } from '../src/kernel/local-secrets.js';
import { createTestContext, type TestContext } from './harness/context.js';
import { CHILD_COMMAND_TIMEOUT_MS } from '../tools/node-entry.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

let ctx: TestContext;
let server: Server;
let adminUrl: string;

/**
 * Runs `scripts/admin.ts` with a clean admin environment plus `env`, through tsx as `npm run admin`
 * does (the other CLI tests run the suite's prebuilt module of the same entry: tools/node-entry.ts).
 */
function run(args: string[], env: Record<string, string> = {}): Promise<RunResult> {
  const base = { ...process.env };
  for (const name of ['ADMIN_URL', 'ADMIN_HOST', 'ADMIN_PORT', 'ADMIN_TOKEN', 'DATA_DIR']) delete base[name];
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'scripts/admin.ts', ...args],
      { cwd: repoRoot, env: { ...base, ...env }, timeout: CHILD_COMMAND_TIMEOUT_MS },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const runAsAdmin = (args: string[]) => run(args, { ADMIN_URL: adminUrl, ADMIN_TOKEN: ctx.adminToken });

/** Success: stdout is exactly one pretty-printed JSON document, stderr is empty. */
function jsonOut(result: RunResult): any {
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  const data = JSON.parse(result.stdout);
  expect(result.stdout).toBe(`${JSON.stringify(data, null, 2)}\n`);
  return data;
}

/** Failure: nothing on stdout, exactly one JSON error document on stderr. */
function jsonError(result: RunResult): { code: string; message: string; status: number | null } {
  expect(result.stdout).toBe('');
  const body = JSON.parse(result.stderr);
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'status']);
  expect(body.error.message.length).toBeGreaterThan(0);
  return body.error;
}

beforeAll(async () => {
  ctx = await createTestContext();
  server = await new Promise<Server>((resolve) => {
    const s = ctx.apps.admin.listen(0, '127.0.0.1', () => resolve(s));
  });
  adminUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await ctx?.close();
});

describe('admin CLI', () => {
  let orgId: string;
  let apiKeyId: string;
  let key: string;

  it('org create prints the new organization as one JSON document', async () => {
    const org = jsonOut(await runAsAdmin(['org', 'create', '--name', 'CLI Coffee']));
    expect(org).toMatchObject({ name: 'CLI Coffee', frozen: false, cardVerified: true, cardAccountEnabled: true });
    expect(org.orgId).toMatch(/^ORG_[0-9A-Za-z]{24}$/);
    orgId = org.orgId;
    expect((await ctx.services.orgs.getOrganization(orgId)).name).toBe('CLI Coffee');
  });

  it('org update sets flags from true|false values', async () => {
    const org = jsonOut(await runAsAdmin(['org', 'update', '--org', orgId, '--frozen', 'true', '--card-verified', 'false']));
    expect(org).toMatchObject({ orgId, frozen: true, cardVerified: false, cardAccountEnabled: true });
    const stored = await ctx.services.orgs.getOrganization(orgId);
    expect(stored.frozen).toBe(true);
    expect(stored.cardVerified).toBe(false);
  });

  it('apikey create prints a key that authenticates the merchant API', async () => {
    const created = jsonOut(
      await runAsAdmin(['apikey', 'create', '--org', orgId, '--name', 'cli', '--permissions', 'orders:read, checkout:write']),
    );
    expect(created.key).toMatch(/^ak_[A-Za-z0-9_-]{43}$/);
    expect(created).toMatchObject({ orgId, name: 'cli', revoked: false, permissions: ['orders:read', 'checkout:write'] });
    apiKeyId = created.apiKeyId;
    key = created.key;
    const me = await ctx.merchant.get('/v1/me').set('X-API-Key', key);
    expect(me.status).toBe(200);
    expect(me.body.data).toMatchObject({ orgId, apiKeyId });
    expect([...me.body.data.permissions].sort()).toEqual(['checkout:write', 'orders:read']);
  });

  it('apikey revoke makes the key answer 401', async () => {
    const revoked = jsonOut(await runAsAdmin(['apikey', 'revoke', '--id', apiKeyId]));
    expect(revoked).toMatchObject({ apiKeyId, revoked: true });
    expect(revoked.revokedAt).toEqual(expect.any(String));
    expect(revoked).not.toHaveProperty('key');
    const me = await ctx.merchant.get('/v1/me').set('X-API-Key', key);
    expect(me.status).toBe(401);
    expect(me.body.error.code).toBe('UNAUTHORIZED');
  });

  it('apikey list shows the revoked key, never its secret', async () => {
    const keys = jsonOut(await runAsAdmin(['apikey', 'list', '--org', orgId]));
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ apiKeyId, orgId, revoked: true });
    expect(keys[0]).not.toHaveProperty('key');
    expect(key.startsWith(keys[0].prefix)).toBe(true);
  });

  it('--table prints a human table instead of JSON', async () => {
    const result = await runAsAdmin(['org', 'list', '--table']);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    expect(() => JSON.parse(result.stdout)).toThrow();
    const lines = result.stdout.split('\n');
    expect(lines.some((l) => /│ orgId\s+│ name\s+│ displayName\s+│ frozen/.test(l))).toBe(true);
    expect(lines.some((l) => l.includes(orgId) && l.includes('CLI Coffee'))).toBe(true);
    expect(lines.some((l) => l.includes(ctx.orgA.orgId))).toBe(true);
    expect(result.stdout).toMatch(/total: 3 +page: 1 +size: 20 +pages: 1/);
  });

  it('org create and update set the display name buyers see; --no-display-name shows the name again', async () => {
    const created = jsonOut(await runAsAdmin(['org', 'create', '--name', 'Legal Name GmbH', '--display-name', 'Corner Café']));
    expect(created).toMatchObject({ name: 'Legal Name GmbH', displayName: 'Corner Café' });
    const renamed = jsonOut(await runAsAdmin(['org', 'update', '--org', created.orgId, '--display-name', 'Corner Café & Bakery']));
    expect(renamed.displayName).toBe('Corner Café & Bakery');
    const reset = jsonOut(await runAsAdmin(['org', 'update', '--org', created.orgId, '--no-display-name']));
    expect(reset.displayName).toBe('Legal Name GmbH');
    expect((await ctx.services.orgs.getOrganization(created.orgId)).displayName).toBeNull();
  });

  it('a boolean flag outside true|false is a usage error (exit 2) and sends nothing', async () => {
    const result = await runAsAdmin(['org', 'update', '--org', orgId, '--frozen', 'maybe']);
    expect(result.code).toBe(2);
    const error = jsonError(result);
    expect(error).toMatchObject({ code: 'USAGE_ERROR', status: null });
    expect(error.message).toContain('--frozen');
    expect((await ctx.services.orgs.getOrganization(orgId)).frozen).toBe(true);
  });

  it('org update without any change is a usage error naming the flags', async () => {
    const result = await runAsAdmin(['org', 'update', '--org', orgId]);
    expect(result.code).toBe(2);
    expect(jsonError(result)).toMatchObject({ code: 'USAGE_ERROR', message: expect.stringContaining('--card-account-enabled') });
  });

  it('an unknown organization is the API error NOT_FOUND (exit 1)', async () => {
    const result = await runAsAdmin(['org', 'get', '--org', 'ORG_000000000000000000000000']);
    expect(result.code).toBe(1);
    expect(jsonError(result)).toMatchObject({ code: 'NOT_FOUND', status: 404 });
  });

  it('a wrong token is UNAUTHORIZED (exit 1)', async () => {
    const result = await run(['org', 'get', '--org', ctx.orgA.orgId], { ADMIN_URL: adminUrl, ADMIN_TOKEN: 'kadm_wrong_token_0123456789abcdef' });
    expect(result.code).toBe(1);
    expect(jsonError(result)).toMatchObject({ code: 'UNAUTHORIZED', status: 401 });
  });

  it('without ADMIN_URL/ADMIN_TOKEN it uses ADMIN_HOST/ADMIN_PORT and <DATA_DIR>/admin-token', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'kassa-cli-'));
    try {
      await writeFile(path.join(dataDir, ADMIN_TOKEN_FILE), `${ctx.adminToken}\n`, { mode: 0o600 });
      const result = await run(['org', 'get', '--org', ctx.orgA.orgId], {
        ADMIN_HOST: '0.0.0.0', // the server's bind-all address; the CLI connects over loopback
        ADMIN_PORT: String((server.address() as AddressInfo).port),
        DATA_DIR: dataDir,
      });
      expect(jsonOut(result)).toMatchObject({ orgId: ctx.orgA.orgId, name: 'Org A' });
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('a server that is not running is a clear JSON error (exit 1)', async () => {
    // A port that was free a moment ago: bind, read, close.
    const probe = await new Promise<Server>((resolve) => {
      const s = ctx.apps.admin.listen(0, '127.0.0.1', () => resolve(s));
    });
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const result = await run(['org', 'list'], { ADMIN_URL: `http://127.0.0.1:${port}`, ADMIN_TOKEN: ctx.adminToken });
    expect(result.code).toBe(1);
    const error = jsonError(result);
    expect(error).toMatchObject({ code: 'SERVER_UNREACHABLE', status: null });
    expect(error.message).toContain('npm start');
  });
});
