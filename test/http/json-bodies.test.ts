/**
 * What every JSON API (merchant, telemetry with native and OTLP ingest, agent wallet, admin) does
 * with a body that is JSON but not an object, or not UTF-8: a clear 400 in the API's error body,
 * before any other rule runs, and nothing stored.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, spanId, traceId, type TelemetryKeyFixture } from '../telemetry/helpers.js';
import { agentHeaders, createAgent, createWallet, type TestAgent } from '../agent-wallet/helpers.js';

let ctx: TestContext;
let telemetry: TelemetryKeyFixture;
let agent: TestAgent;
beforeAll(async () => {
  ctx = await createTestContext();
  telemetry = await createProjectWithKey(ctx, ctx.orgA.orgId);
  const wallet = await createWallet(ctx, ctx.orgA);
  agent = await createAgent(ctx, ctx.orgA, wallet.walletId);
});
afterAll(async () => {
  await ctx?.close();
});

let keys = 0;
const countRows = async (table: string) => Number((await ctx.testDb.database.db(table).count<{ count: number }[]>({ count: '*' }).first())?.count);

/** Sends a Buffer body as it is (superagent would serialize it as JSON). */
const raw = (body: unknown) => body as string;

/** One request per JSON API, each sending `body` as raw bytes with its credentials. */
const requests = {
  'merchant: create a checkout session': (body: Buffer) =>
    ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `json-${++keys}`).type('application/json').serialize(raw).send(body),
  'telemetry: create a project': (body: Buffer) => ctx.platform.post('/v1/projects').set(bearer(telemetry.key)).type('application/json').serialize(raw).send(body),
  'telemetry: ingest': (body: Buffer) => ctx.platform.post('/v1/ingest').set(bearer(telemetry.key)).type('application/json').serialize(raw).send(body),
  'telemetry: OTLP/HTTP JSON': (body: Buffer) => ctx.platform.post('/v1/otlp/v1/traces').set(bearer(telemetry.key)).type('application/json').serialize(raw).send(body),
  'agent wallet: sign typed data': (body: Buffer) =>
    ctx.platform
      .post('/v1/agent-wallet/sign-typed-data')
      .set(agentHeaders(ctx, agent, 'POST', '/v1/agent-wallet/sign-typed-data'))
      .type('application/json')
      .serialize(raw)
      .send(body),
  'admin: create an organization': (body: Buffer) => ctx.admin.post('/v1/orgs').type('application/json').serialize(raw).send(body),
};
type Api = keyof typeof requests;
const isTelemetry = (api: Api) => api.startsWith('telemetry');

function expectValidationError(api: Api, res: { status: number; body: any }, message: RegExp) {
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  if (isTelemetry(api)) {
    expect(res.body.error.code).toBe('invalid_request');
    expect(res.body.error.details).toEqual({ field: 'body' });
    expect(res.body.meta.request_id).toMatch(/\S/);
  } else {
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
  }
  expect(res.body.error.message).toMatch(message);
}

describe('a JSON body that is not an object', () => {
  it.each(Object.keys(requests) as Api[])('%s: 400 "must be a JSON object", before any field rule', async (api) => {
    for (const text of ['[]', '[{"name": "x"}]', ' [1, 2] ']) {
      const res = await requests[api](Buffer.from(text));
      expectValidationError(api, res, /^The request body must be a JSON object/);
      // Not the rules of the object's fields (the merchant API used to say "customerId and
      // customerEmail are mutually exclusive" to `[]`).
      expect(res.body.error.message).not.toMatch(/mutually exclusive|exactly one|required/);
    }
  });
});

/** `{"name": "Café …"}` with é in Latin-1 (0xE9), the usual way a body ends up not UTF-8. */
const latin1 = (before: string, after: string) => Buffer.concat([Buffer.from(before), Buffer.from([0xe9]), Buffer.from(after)]);

describe('a JSON body that is not valid UTF-8', () => {
  const spanBody = (name: Buffer | string) =>
    Buffer.concat([
      Buffer.from(`{"traces":[{"trace_id":"${traceId()}","spans":[{"span_id":"${spanId()}","name":"`),
      Buffer.from(name),
      Buffer.from('","start_time":"2026-11-22T08:00:00Z","end_time":"2026-11-22T08:00:01Z"}]}]}'),
    ]);
  const otlpBody = (name: Buffer | string) =>
    Buffer.concat([
      Buffer.from(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"${traceId()}","spanId":"${spanId()}","name":"`),
      Buffer.from(name),
      Buffer.from('","startTimeUnixNano":"1795338000000000000","endTimeUnixNano":"1795338001000000000"}]}]}]}'),
    ]);
  /** Each API with a body carrying `bytes` in a text value, and the rows it would store. */
  const cases: Array<[Api, (bytes: Buffer) => Buffer, string]> = [
    ['merchant: create a checkout session', (b) => Buffer.concat([Buffer.from('{"pricingData":{"amount":1500,"currency":"USD","productData":{"name":"Caf'), b, Buffer.from('"}}}')]), 'checkout_sessions'],
    ['telemetry: create a project', (b) => Buffer.concat([Buffer.from('{"name":"Caf'), b, Buffer.from('"}')]), 'telemetry_projects'],
    ['telemetry: ingest', (b) => spanBody(Buffer.concat([Buffer.from('caf'), b])), 'telemetry_traces'],
    ['telemetry: OTLP/HTTP JSON', (b) => otlpBody(Buffer.concat([Buffer.from('caf'), b])), 'telemetry_traces'],
    ['agent wallet: sign typed data', (b) => Buffer.concat([Buffer.from('{"typed_data":{"domain":{"name":"Caf'), b, Buffer.from('"},"types":{},"primary_type":"X","message":{}},"signature":"x"}')]), 'agent_wallet_history'],
    ['admin: create an organization', (b) => Buffer.concat([Buffer.from('{"name":"Caf'), b, Buffer.from('"}')]), 'organizations'],
  ];
  // A Latin-1 byte, a truncated sequence, an overlong "/" (C0 AF), a UTF-8-encoded surrogate
  // (ED A0 80, CESU-8) and a code point above U+10FFFF (F4 90 80 80): none is UTF-8.
  const invalid: Array<[string, Buffer]> = [
    ['a Latin-1 byte', Buffer.from([0xe9])],
    ['a truncated sequence', Buffer.from([0xe2, 0x82])],
    ['an overlong encoding', Buffer.from([0xc0, 0xaf])],
    ['an encoded surrogate', Buffer.from([0xed, 0xa0, 0x80])],
    ['a code point past U+10FFFF', Buffer.from([0xf4, 0x90, 0x80, 0x80])],
  ];

  it.each(cases)('%s: 400, nothing stored', async (api, body, table) => {
    const before = await countRows(table);
    for (const [label, bytes] of invalid) {
      const res = await requests[api](body(bytes));
      expectValidationError(api, res, /^The request body is not valid UTF-8/);
      expect(res.body.error.message, label).not.toContain('\uFFFD');
    }
    expect(await countRows(table)).toBe(before);
  });

  it('still takes multi-byte UTF-8 (and a byte order mark) as before', async () => {
    const res = await requests['merchant: create a checkout session'](Buffer.from('\uFEFF{"pricingData":{"amount":1500,"currency":"USD","productData":{"name":"Café 🚀 €"}}}'));
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.productName).toBe('Café 🚀 €');
    const org = await requests['admin: create an organization'](Buffer.from('{"name":"Bäckerei Müller 東京"}'));
    expect(org.status).toBe(201);
    expect(org.body.data.name).toBe('Bäckerei Müller 東京');
  });

  it('checks the bytes after Content-Encoding is undone', async () => {
    const { gzipSync } = await import('node:zlib');
    const body = gzipSync(latin1('{"name":"Caf', '"}'));
    const res = await ctx.admin.post('/v1/orgs').type('application/json').set('Content-Encoding', 'gzip').serialize(raw).send(body);
    expectValidationError('admin: create an organization', res, /^The request body is not valid UTF-8/);
  });
});
