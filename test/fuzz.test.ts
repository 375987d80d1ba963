/**
 * Spec-driven fuzzing of every operation of the merchant, platform and admin listeners:
 * requests generated from each operation's parameter and body schemas (fast-check), and the same
 * requests with deliberate violations (wrong types, unknown fields at every depth, oversized and
 * hostile strings, huge numbers, nulls, malformed JSON, bad query values, hostile path segments).
 * Whatever is sent, the answer is never a 5xx, always one of the operation's documented statuses
 * (or the router's 404 for a path that no longer matches), and every error is the API's error body.
 * Response validation is on, so a 2xx that drifts from the document would surface as a 500.
 *
 * KASSA_FUZZ_RUNS (default 15) sets the runs per operation and mode; KASSA_FUZZ_SEED replays a run.
 */
import { signUp } from './accounts/helpers.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './harness/context.js';
import {
  applyBodyViolation,
  arbitraryFor,
  bodyViolation,
  encodeURIComponentSafe,
  pathViolation,
  queryViolation,
  setKnownValues,
  type BodyViolation,
  type QueryViolation,
} from './fuzz/schema-arbitrary.js';
import { contractOperations, expectErrorBody, listen, type AppName, type ContractOperation, type Listener, type RawRequest } from './fuzz/operations.js';
import { createAgent, createWallet, agentHeaders } from './agent-wallet/helpers.js';
import { createProjectWithKey } from './telemetry/helpers.js';
import { createLink, createPrice, createProduct } from './catalog/fixtures.js';

const RUNS = Number(process.env.KASSA_FUZZ_RUNS ?? 15);
/** Console operations that would sign the fuzzer's own session out (or replace it). */
const SESSION_ENDING = new Set(['signOut', 'signOutEverywhere', 'switchOrganization']);
const SEED = process.env.KASSA_FUZZ_SEED ? Number(process.env.KASSA_FUZZ_SEED) : undefined;

let ctx: TestContext;
let operations: ContractOperation[];
const listeners = {} as Record<AppName, Listener>;
let credentials: (op: ContractOperation) => Record<string, string>;
/** Real identifiers, so generated requests also reach existing resources (not only 404s). */
let knownIds: { public: string[]; admin: string[] };
const tally = new Map<string, Map<number, number>>();

beforeAll(async () => {
  ctx = await createTestContext({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true' } });
  operations = await contractOperations();
  for (const name of ['merchant', 'platform', 'admin'] as const) listeners[name] = await listen(ctx.apps[name]);

  // Public APIs act as org A; the admin API is fuzzed on org B's resources, so that a generated
  // "revoke this key" or "freeze this org" cannot lock the public APIs out mid-run.
  const telemetry = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Fuzz project');
  const wallet = await createWallet(ctx, ctx.orgA);
  const agent = await createAgent(ctx, ctx.orgA, wallet.walletId);
  const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Fuzz product' });
  const price = await createPrice(ctx, product.productId ?? product.id, { amount: 1500, currency: 'USD' });
  const session = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'fuzz-1').send({ pricingId: price.pricingId ?? price.id });
  const productB = await createProduct(ctx, ctx.orgB.orgId, { name: 'Admin fuzz product' });
  const priceB = await createPrice(ctx, productB.productId ?? productB.id, { amount: 900, currency: 'EUR' });
  const linkB = await createLink(ctx, priceB.pricingId ?? priceB.id);
  const walletB = await createWallet(ctx, ctx.orgB);
  const agentB = await createAgent(ctx, ctx.orgB, walletB.walletId);
  const telemetryB = await createProjectWithKey(ctx, ctx.orgB.orgId, 'Admin fuzz project');
  knownIds = {
    public: [product.productId ?? product.id, price.pricingId ?? price.id, session.body.data?.id, telemetry.projectId, ctx.orgA.orgId].filter(Boolean),
    admin: [
      ctx.orgB.orgId, ctx.orgB.apiKeyId, productB.productId ?? productB.id, priceB.pricingId ?? priceB.id, linkB.paymentLinkId ?? linkB.id,
      walletB.walletId, agentB.agentId, telemetryB.projectId, telemetryB.keyId,
    ].filter(Boolean),
  };

  setKnownValues([...knownIds.public, ...knownIds.admin]);
  const consoleOwner = await signUp(ctx, ctx.orgA.orgId, 'owner');

  credentials = (op): Record<string, string> => {
    const schemes = op.security.flatMap((requirement) => Object.keys(requirement));
    if (schemes.includes('ApiKeyAuth')) return { 'X-API-Key': ctx.orgA.apiKey };
    if (schemes.includes('ConsoleSession')) {
      // Operations that end or replace the session are fuzzed signed out (401): the run keeps its session.
      if (SESSION_ENDING.has(op.operationId)) return {};
      return { Cookie: consoleOwner.cookie, 'X-CSRF-Token': consoleOwner.csrf, Origin: 'http://merchant.test' };
    }
    if (schemes.includes('BearerAuth')) return { Authorization: `Bearer ${telemetry.key}` };
    if (schemes.includes('AdminBearer')) return { Authorization: `Bearer ${ctx.adminToken}` };
    if (schemes.includes('AgentSignature')) return agentHeaders(ctx, agent, op.method.toUpperCase(), op.path);
    return {};
  };
}, 120_000);

afterAll(async () => {
  for (const listener of Object.values(listeners)) await listener?.close();
  await ctx?.close();
  if (tally.size > 0) {
    // One line per operation: how the generated requests were answered.
    const lines = [...tally].map(([id, counts]) => `${id.padEnd(44)} ${[...counts].sort(([a], [b]) => a - b).map(([s, n]) => `${s}×${n}`).join(' ')}`);
    console.log(`fuzz: statuses per operation (${RUNS} valid + ${RUNS} violating runs each)\n${lines.join('\n')}`);
  }
});

interface Generated {
  path: Record<string, string>;
  query: Record<string, unknown>;
  headers: Record<string, unknown>;
  body: unknown;
  hasBody: boolean;
}

function requestArbitrary(op: ContractOperation): fc.Arbitrary<Generated> {
  const pool = op.app === 'admin' ? knownIds.admin : knownIds.public;
  const path: Record<string, fc.Arbitrary<string>> = {};
  const query: Record<string, fc.Arbitrary<unknown>> = {};
  const headers: Record<string, fc.Arbitrary<unknown>> = {};
  const requiredQuery: string[] = [];
  const requiredHeaders: string[] = [];
  for (const p of op.parameters) {
    if (p.in === 'path') path[p.name] = fc.oneof(arbitraryFor(p.schema) as fc.Arbitrary<string>, fc.constantFrom(...pool)).map(String);
    else if (p.in === 'query') {
      query[p.name] = arbitraryFor(p.schema);
      if (p.required) requiredQuery.push(p.name);
    } else if (p.in === 'header') {
      headers[p.name] = arbitraryFor(p.schema);
      if (p.required) requiredHeaders.push(p.name);
    }
  }
  const body = op.body ? arbitraryFor(op.body.schema) : fc.constant(undefined);
  return fc.record({
    path: fc.record(path),
    query: fc.record(query, { requiredKeys: requiredQuery }),
    headers: fc.record(headers, { requiredKeys: requiredHeaders }),
    body,
    hasBody: op.body ? (op.body.required ? fc.constant(true) : fc.boolean()) : fc.constant(false),
  });
}

type Violation = { on: 'body'; v: BodyViolation } | { on: 'query'; v: QueryViolation } | { on: 'path'; v: string } | { on: 'header'; v: string };

function violationArbitrary(op: ContractOperation): fc.Arbitrary<Violation> {
  const options: Array<fc.Arbitrary<Violation>> = [queryViolation.map((v) => ({ on: 'query' as const, v }))];
  if (op.body) options.push(bodyViolation.map((v) => ({ on: 'body' as const, v })), bodyViolation.map((v) => ({ on: 'body' as const, v })));
  if (op.parameters.some((p) => p.in === 'path')) options.push(pathViolation.map((v) => ({ on: 'path' as const, v })));
  if (op.parameters.some((p) => p.in === 'header')) {
    options.push(fc.constantFrom('', 'has space', 'x'.repeat(256), 'tab\there', 'caf\u00e9').map((v) => ({ on: 'header' as const, v })));
  }
  return fc.oneof(...options);
}

const serialize = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value));

function build(op: ContractOperation, g: Generated, violation?: Violation): RawRequest {
  const pathParams = { ...g.path };
  if (violation?.on === 'path') {
    const name = Object.keys(pathParams)[0]!;
    pathParams[name] = violation.v;
  }
  let path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) =>
    violation?.on === 'path' && name === Object.keys(pathParams)[0] ? pathParams[name]! : encodeURIComponentSafe(pathParams[name] ?? 'x'),
  );
  const pairs: Array<[string, string]> = Object.entries(g.query)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => [k, serialize(v)]);
  if (violation?.on === 'query') {
    const v = violation.v;
    if (v.kind === 'unknown-param') pairs.push(['zz_unknown', '1']);
    else if (v.kind === 'bad-value') {
      const names = op.parameters.filter((p) => p.in === 'query').map((p) => p.name);
      const name = names.length > 0 ? names[v.at % names.length]! : 'page';
      pairs.push([name, v.value]);
    } else {
      const names = op.parameters.filter((p) => p.in === 'query').map((p) => p.name);
      if (names.length > 0) {
        const name = names[v.at % names.length]!;
        pairs.push([name, '1'], [name, '2']);
      } else pairs.push(['page', '1'], ['page', '2']);
    }
  }
  if (pairs.length > 0) path += `?${pairs.map(([k, v]) => `${encodeURIComponentSafe(k)}=${encodeURIComponentSafe(v)}`).join('&')}`;

  const headers: Record<string, string> = { ...credentials(op), Accept: 'application/json' };
  for (const [name, value] of Object.entries(g.headers)) if (value !== undefined) headers[name] = serialize(value);
  if (violation?.on === 'header') {
    const name = op.parameters.find((p) => p.in === 'header')!.name;
    headers[name] = violation.v;
  }
  let body: string | undefined;
  if (violation?.on === 'body') body = applyBodyViolation(g.body, violation.v);
  else if (g.hasBody) body = JSON.stringify(g.body);
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  return { method: op.method.toUpperCase(), path, headers, body };
}

async function check(op: ContractOperation, request: RawRequest, mode: 'valid' | 'violation'): Promise<void> {
  // Spread requests over time: rate-limit windows and agent request timestamps move on.
  ctx.clock.advance(50);
  const response = await listeners[op.app].send(request);
  const label = `${op.operationId} ${mode}`;
  const counts = tally.get(label) ?? new Map<number, number>();
  counts.set(response.status, (counts.get(response.status) ?? 0) + 1);
  tally.set(label, counts);
  if (process.env.KASSA_FUZZ_DEBUG && mode === 'valid' && response.status === 400) console.log(op.operationId, request.path, request.body?.slice(0, 300), '→', response.text.slice(0, 300));
  const shown = `${mode} ${request.method} ${request.path.slice(0, 300)} body=${(request.body ?? '').slice(0, 400)}\n→ ${response.status} ${response.text.slice(0, 500)}`;
  expect(response.status, shown).toBeLessThan(500);
  const routeNotFound = response.status === 404 && (response.json as { message?: string } | undefined)?.message === 'Route not found';
  if (!routeNotFound) expect(op.statuses, shown).toContain(response.status);
  if (response.status >= 400) expectErrorBody(op.flavor, response, shown);
  else if (response.status !== 204) expect(response.headers['content-type'], shown).toMatch(/^application\/json/);
}

describe('fuzzing every operation from its schemas', async () => {
  const ops = await contractOperations();
  it.each(ops.map((op) => [op.operationId, op] as const))('%s', async (_id, template) => {
    const op = operations.find((o) => o.operationId === template.operationId)!;
    await fc.assert(
      fc.asyncProperty(requestArbitrary(op), async (g) => check(op, build(op, g), 'valid')),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
    await fc.assert(
      fc.asyncProperty(requestArbitrary(op), violationArbitrary(op), async (g, v) => check(op, build(op, g, v), 'violation')),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
  }, 120_000);
});
