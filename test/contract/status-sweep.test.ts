/**
 * The error statuses every operation documents for the same cause, each triggered on every
 * operation that lists it (the domain tests cover the statuses with domain causes: 409s, business
 * 400s and 403s):
 * - 401 without credentials; 400 for an unknown query parameter; 404 for an unknown identifier
 *   (with the documented request example as body, so only the identifier is wrong);
 * - 413 for a body over the operation's limit; 415 for a non-JSON body;
 * - 403 for a merchant key without the operation's permission;
 * - 429 once a telemetry key's rate limit is spent;
 * - 500 when something unexpected fails inside (the apps on a database without tables), with
 *   nothing of the failure disclosed;
 * - 503 while the database is unreachable (the apps on a PostgreSQL address nobody listens on).
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminApp, createMerchantApp, createPlatformApp, type AppDeps } from '../../src/apps.js';
import { loadConfig } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { ManualClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices } from '../../src/services.js';
import type { Permission } from '../../src/orgs/permissions.js';
import { ALL_PERMISSIONS } from '../../src/orgs/permissions.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { contractOperations, expectErrorBody, listen, type AppName, type ContractOperation, type Listener, type RawRequest, type RawResponse } from '../fuzz/operations.js';
import { arbitraryFor, encodeURIComponentSafe, type Schema } from '../fuzz/schema-arbitrary.js';
import { agentHeaders, createAgent, createWallet, type TestAgent } from '../agent-wallet/helpers.js';
import { createProjectWithKey } from '../telemetry/helpers.js';
import { signUp } from '../accounts/helpers.js';

// Collected before the tests are declared: one test per operation and status.
const operations: ContractOperation[] = await contractOperations();
let ctx: TestContext;
let listeners: Record<AppName, Listener>;
let telemetryKey: string;
let agent: TestAgent;
/** A console session of an owner of org A (console document operations). */
let consoleSession: ConsoleCredentials;

beforeAll(async () => {
  ctx = await createTestContext();
  listeners = { merchant: await listen(ctx.apps.merchant), platform: await listen(ctx.apps.platform), admin: await listen(ctx.apps.admin) };
  telemetryKey = (await createProjectWithKey(ctx, ctx.orgA.orgId, 'Sweep')).key;
  agent = await createAgent(ctx, ctx.orgA, (await createWallet(ctx, ctx.orgA)).walletId);
  const owner = await signUp(ctx, ctx.orgA.orgId, 'owner');
  consoleSession = { cookie: owner.cookie, csrf: owner.csrf };
}, 120_000);

afterAll(async () => {
  for (const listener of Object.values(listeners ?? {})) await listener.close();
  await ctx?.close();
});

const documenting = (status: number) => operations.filter((op) => op.statuses.includes(status));
/**
 * Operations that reach no database, so a broken or unreachable one cannot fail them: the test
 * clock (advanceTestClock) moves the process's clock, and answers 404 on a deployment without one
 * (this sweep's manual clock). They document neither 500 nor 503.
 */
const DATABASE_FREE = new Set(['advanceTestClock']);
const reachingTheDatabase = operations.filter((op) => !DATABASE_FREE.has(op.operationId));

interface ConsoleCredentials {
  cookie: string;
  csrf: string;
}
/** A well-formed session nobody holds (for the apps over a broken database). */
const UNKNOWN_SESSION: ConsoleCredentials = { cookie: `__Host-kassa_session=kss_${'A'.repeat(43)}`, csrf: 'x' };

function credentialsFor(op: ContractOperation, c: { apiKey: string; telemetryKey: string; adminToken: string; agent?: TestAgent; clock: ManualClock; console?: ConsoleCredentials }): Record<string, string> {
  const schemes = op.security.flatMap((r) => Object.keys(r));
  if (schemes.includes('ApiKeyAuth')) return { 'X-API-Key': c.apiKey };
  if (schemes.includes('ConsoleSession')) {
    const session = c.console ?? UNKNOWN_SESSION;
    return { Cookie: session.cookie, 'X-CSRF-Token': session.csrf, Origin: 'http://merchant.test' };
  }
  if (schemes.includes('BearerAuth')) return { Authorization: `Bearer ${c.telemetryKey}` };
  if (schemes.includes('AdminBearer')) return { Authorization: `Bearer ${c.adminToken}` };
  if (schemes.includes('AgentSignature') && c.agent) return agentHeaders({ clock: c.clock } as TestContext, c.agent, op.method.toUpperCase(), op.path);
  return {};
}

/** A value of `schema` that names nothing that exists (a well-formed unknown identifier). */
function unknownValue(schema: Schema): string {
  if (schema.type === 'integer') return String(Math.min(schema.maximum ?? 999_999, 999_999));
  const candidate = 'ZZZ_000000000000000000000000';
  const fits = (v: string) => (!schema.pattern || new RegExp(schema.pattern, 'u').test(v)) && v.length >= (schema.minLength ?? 0) && v.length <= (schema.maxLength ?? Infinity);
  if (fits(candidate)) return candidate;
  return String(fc.sample(arbitraryFor(schema), { seed: 7, numRuns: 1 })[0]);
}

function documentedExample(media: Record<string, unknown> | undefined): unknown {
  if (!media) return undefined;
  if (media.example !== undefined) return media.example;
  const first = Object.values((media.examples as Record<string, { value: unknown }> | undefined) ?? {})[0];
  return first?.value;
}

/**
 * The operation's request with its documented example body, required query values and headers,
 * and unknown identifiers in the path: valid in every respect but the identifiers.
 */
function skeleton(op: ContractOperation, headers: Record<string, string>, extraQuery = ''): RawRequest {
  let path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) =>
    encodeURIComponentSafe(unknownValue(op.parameters.find((p) => p.in === 'path' && p.name === name)!.schema)),
  );
  const query: string[] = [];
  const all: Record<string, string> = { ...headers, Accept: 'application/json' };
  for (const p of op.parameters) {
    const example = (p as { example?: unknown }).example ?? p.schema.examples?.[0] ?? p.schema.default;
    if (p.in === 'query' && p.required) query.push(`${p.name}=${encodeURIComponentSafe(String(example ?? unknownValue(p.schema)))}`);
    if (p.in === 'query' && p.name === 'id' && !p.required) query.push(`id=${unknownValue(p.schema)}`);
    // getMetrics' optional project filter: an unknown project is its 404.
    if (p.in === 'query' && p.name === 'project_id' && !p.required) query.push(`project_id=${unknownValue(p.schema)}`);
    if (p.in === 'header' && p.required) all[p.name] = String(example ?? `sweep-${randomBytes(6).toString('hex')}`);
  }
  if (extraQuery) query.push(extraQuery);
  if (query.length > 0) path += `?${query.join('&')}`;
  const operation = op.operation as { requestBody?: { content?: Record<string, Record<string, unknown>> } };
  const example = documentedExample(operation.requestBody?.content?.['application/json']);
  if (op.body && example === undefined) throw new Error(`${op.operationId}: no request example to send`);
  return {
    method: op.method.toUpperCase(),
    path,
    headers: op.body ? { ...all, 'Content-Type': 'application/json' } : all,
    body: op.body ? JSON.stringify(example) : undefined,
  };
}

function expectStatus(op: ContractOperation, response: RawResponse, status: number): void {
  const shown = `${op.operationId} → ${response.status} ${response.text.slice(0, 400)}`;
  expect(response.status, shown).toBe(status);
  expect(op.statuses, `${op.operationId} answers ${status}: its document must list it`).toContain(status);
  expectErrorBody(op.flavor, response, shown);
}

const ids = (ops: ContractOperation[]) => ops.map((op) => [op.operationId, op] as const);

describe('statuses every operation documents', () => {
  // Operations open to anyone that answer 401 for wrong credentials in their body (console sign-in, invites) are tested where those are.
  const needingCredentials = (op: ContractOperation) => op.security.length > 0 && op.security.every((r) => Object.keys(r).length > 0);
  it.each(ids(documenting(401).filter(needingCredentials)))('401 %s without credentials', async (_id, op) => {
    const response = await listeners[op.app].send(skeleton(op, {}));
    expectStatus(op, response, 401);
    const code = op.flavor === 'telemetry' ? 'unauthorized' : 'UNAUTHORIZED';
    expect((response.json as { error: { code: string } }).error.code).toBe(code);
  });

  it.each(ids(documenting(400)))('400 %s with an unknown query parameter', async (_id, op) => {
    ctx.clock.advance(1_000);
    const headers = credentialsFor(op, { apiKey: ctx.orgA.apiKey, telemetryKey, adminToken: ctx.adminToken, agent, clock: ctx.clock, console: consoleSession });
    const response = await listeners[op.app].send(skeleton(op, headers, 'zz_unknown=1'));
    expectStatus(op, response, 400);
    expect(response.text).toContain('zz_unknown');
  });

  it.each(ids(documenting(404)))('404 %s for an unknown identifier', async (_id, op) => {
    const headers = credentialsFor(op, { apiKey: ctx.orgA.apiKey, telemetryKey, adminToken: ctx.adminToken, agent, clock: ctx.clock, console: consoleSession });
    const response = await listeners[op.app].send(skeleton(op, headers));
    expectStatus(op, response, 404);
  });

  it.each(ids(documenting(413)))('413 %s with a body over its limit', async (_id, op) => {
    ctx.clock.advance(1_000);
    const headers = credentialsFor(op, { apiKey: ctx.orgA.apiKey, telemetryKey, adminToken: ctx.adminToken, agent, clock: ctx.clock, console: consoleSession });
    const request = skeleton(op, headers);
    const limit = op.operationId === 'ingest' || op.operationId === 'ingestOtlpTraces' ? 5 * 1024 * 1024 : op.operationId === 'ingestUsageEvents' ? 1024 * 1024 : 64 * 1024;
    request.body = JSON.stringify({ padding: 'A'.repeat(limit + 1) });
    const response = await listeners[op.app].send(request);
    expectStatus(op, response, 413);
  });

  // The envelope APIs answer 415; the telemetry API reports it as `400 invalid_request` (its own codes).
  it.each(ids(operations.filter((op) => op.body)))('415 %s with a non-JSON body (400 invalid_request on telemetry)', async (_id, op) => {
    ctx.clock.advance(1_000);
    const headers = credentialsFor(op, { apiKey: ctx.orgA.apiKey, telemetryKey, adminToken: ctx.adminToken, agent, clock: ctx.clock, console: consoleSession });
    const request = skeleton(op, headers);
    request.headers = { ...request.headers, 'Content-Type': 'text/plain' };
    request.body = 'name=not json';
    const response = await listeners[op.app].send(request);
    if (op.flavor === 'telemetry') {
      expectStatus(op, response, 400);
      expect((response.json as { error: { code: string } }).error.code).toBe('invalid_request');
    } else {
      expectStatus(op, response, 415);
      expect((response.json as { error: { code: string } }).error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    }
  });

  // The console document's permissions are a member's role's (test/accounts/console.test.ts, roles × operations).
  const permissionOps = () => documenting(403).filter((op) => op.document === 'merchant' && typeof op.operation['x-permission'] === 'string');
  it('403 for every merchant operation called with a key that lacks its permission', async () => {
    const keys = new Map<Permission, string>();
    for (const missing of ALL_PERMISSIONS) {
      const key = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: `without ${missing}`, permissions: ALL_PERMISSIONS.filter((p) => p !== missing) });
      keys.set(missing, key.key);
    }
    const ops = permissionOps();
    expect(ops.length).toBeGreaterThan(15);
    for (const op of ops) {
      const response = await listeners.merchant.send(skeleton(op, { 'X-API-Key': keys.get(op.operation['x-permission'] as Permission)! }));
      expectStatus(op, response, 403);
      expect((response.json as { error: { message: string } }).error.message).toContain(String(op.operation['x-permission']));
    }
  });
});

describe('429 once a key has spent its rate limit', () => {
  let limited: TestContext;
  let platform: Listener;
  let merchant: Listener;
  beforeAll(async () => {
    limited = await createTestContext({ env: { TELEMETRY_RATE_LIMIT: '1', MERCHANT_RATE_LIMIT_PER_MINUTE: '1' } });
    platform = await listen(limited.apps.platform);
    merchant = await listen(limited.apps.merchant);
  }, 120_000);
  afterAll(async () => {
    await platform?.close();
    await merchant?.close();
    await limited?.close();
  });

  it('every merchant operation answers 429 RATE_LIMITED with Retry-After', async () => {
    // Sign-in throttling (the console document's 429) has its own test (test/accounts/console.test.ts).
    const ops = documenting(429).filter((op) => op.document === 'merchant');
    expect(ops.length).toBeGreaterThan(20);
    const first = await merchant.send({ method: 'GET', path: '/v1/me', headers: { 'X-API-Key': limited.orgA.apiKey } });
    expect(first.status).toBe(200);
    for (const op of ops) {
      const response = await merchant.send(skeleton(op, { 'X-API-Key': limited.orgA.apiKey }));
      expectStatus(op, response, 429);
      expect((response.json as { error: { code: string } }).error.code).toBe('RATE_LIMITED');
      expect(Number(response.headers['retry-after'])).toBeGreaterThan(0);
    }
    // Another organization's key has its own budget.
    expect((await merchant.send({ method: 'GET', path: '/v1/me', headers: { 'X-API-Key': limited.orgB.apiKey } })).status).toBe(200);
  });

  it('every telemetry operation answers 429 rate_limited with Retry-After', async () => {
    const key = (await createProjectWithKey(limited, limited.orgA.orgId, 'Limited')).key;
    const ops = documenting(429).filter((op) => op.document === 'telemetry');
    expect(ops.length).toBe(15);
    const first = await platform.send({ method: 'GET', path: '/v1/projects', headers: { Authorization: `Bearer ${key}` } });
    expect(first.status).toBe(200);
    for (const op of ops) {
      const response = await platform.send(skeleton(op, { Authorization: `Bearer ${key}` }));
      expectStatus(op, response, 429);
      expect((response.json as { error: { code: string } }).error.code).toBe('rate_limited');
      expect(Number(response.headers['retry-after'])).toBeGreaterThan(0);
    }
  });
});

/** The three apps over a database that is broken in a given way, with the real services. */
async function appsOver(database: Database): Promise<{ listeners: Record<AppName, Listener>; close(): Promise<void> }> {
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', PUBLIC_BASE_URL: 'http://merchant.test', PUBLIC_API_URL: 'http://api.test' }, []);
  const clock = new ManualClock('2026-11-22T09:00:00.000Z');
  const logger = createLogger({ level: 'silent' });
  const services = createServices({ db: database.db, clock, secretBox: new SecretBox(randomBytes(32)), config, logger });
  const deps: AppDeps = { config, database, clock, logger, services, adminToken: `kadm_test_${randomBytes(16).toString('hex')}` };
  const apps = { merchant: await createMerchantApp(deps), platform: await createPlatformApp(deps), admin: await createAdminApp(deps) };
  const out = { merchant: await listen(apps.merchant), platform: await listen(apps.platform), admin: await listen(apps.admin) };
  return {
    listeners: out,
    close: async () => {
      for (const listener of Object.values(out)) await listener.close();
      await database.close();
    },
    ...{ deps },
  } as never;
}

describe('500 when something unexpected fails inside an operation', () => {
  let broken: { listeners: Record<AppName, Listener>; close(): Promise<void>; deps: AppDeps };
  beforeAll(async () => {
    // A database without the schema: every query fails with an error no code path expects.
    broken = (await appsOver(await openDatabase({ pglite: new PGlite() }))) as never;
  }, 120_000);
  afterAll(async () => broken?.close());

  it.each(ids(reachingTheDatabase))('500 %s, with nothing of the failure disclosed', async (_id, op) => {
    const clock = broken.deps.clock as ManualClock;
    clock.advance(1_000);
    const headers = credentialsFor(op, {
      apiKey: `ak_${'A'.repeat(43)}`,
      telemetryKey: `tk_${'A'.repeat(43)}`,
      adminToken: broken.deps.adminToken,
      agent,
      clock,
    });
    const response = await broken.listeners[op.app].send(skeleton(op, headers));
    expectStatus(op, response, 500);
    const code = op.flavor === 'telemetry' ? 'internal_error' : 'INTERNAL_ERROR';
    expect((response.json as { error: { code: string; message: string } }).error).toMatchObject({ code, message: 'Internal server error' });
  });
});

describe('503 while the database is unreachable', () => {
  let down: { listeners: Record<AppName, Listener>; close(): Promise<void>; deps: AppDeps };
  // knex's warnings about each refused connection, kept for the last test instead of printed.
  const knexLines: string[] = [];
  beforeAll(async () => {
    // Nothing listens on port 1: every connection attempt is refused at once.
    const logger = createLogger({ level: 'warn', destination: { write: (line: string) => void knexLines.push(line) } });
    down = (await appsOver(await openDatabase({ databaseUrl: 'postgres://kassa@127.0.0.1:1/kassa', logger }))) as never;
  }, 120_000);
  afterAll(async () => down?.close());

  it.each(ids(reachingTheDatabase))('503 %s', async (_id, op) => {
    const clock = down.deps.clock as ManualClock;
    clock.advance(1_000);
    const headers = credentialsFor(op, {
      apiKey: `ak_${'A'.repeat(43)}`,
      telemetryKey: `tk_${'A'.repeat(43)}`,
      adminToken: down.deps.adminToken,
      agent,
      clock,
    });
    const response = await down.listeners[op.app].send(skeleton(op, headers));
    expectStatus(op, response, 503);
    const code = op.flavor === 'telemetry' ? 'service_unavailable' : 'SERVICE_UNAVAILABLE';
    expect((response.json as { error: { code: string } }).error.code).toBe(code);
    // Clients (OTLP exporters among them) are told when to retry.
    expect(response.headers['retry-after']).toBe('5');
  });

  it("knex's connection warnings went to the application's logger (as warn lines), not to the console", () => {
    const lines = knexLines.map((line) => JSON.parse(line) as { level: number; component?: string; msg: string });
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.every((line) => line.level === 40 && line.component === 'knex')).toBe(true);
    expect(lines[0]!.msg).toMatch(/^Acquire connection error: Error: connect ECONNREFUSED 127\.0\.0\.1:1/);
  });
});
