/** POST /v1/otlp/v1/traces: OTLP/HTTP JSON mapped onto the same storage as native ingest. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Response } from 'supertest';
import { gzipSync } from 'node:zlib';
import { createTestContext, type TestContext } from '../harness/context.js';
import { decodeOtlpTraceResponse, encodeOtlpTraceRequest } from '../../src/telemetry/otlp-protobuf.js';
import { bearer, createProjectWithKey, spanId, traceId, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let p: TelemetryKeyFixture;

beforeAll(async () => {
  ctx = await createTestContext();
  p = await createProjectWithKey(ctx, ctx.orgA.orgId);
});
afterAll(async () => {
  await ctx?.close();
});

const send = (body: unknown) => ctx.platform.post('/v1/otlp/v1/traces').set(bearer(p.key)).send(body as object);
const nanos = (iso: string, extraNanos = 0n) => (BigInt(Date.parse(iso)) * 1_000_000n + extraNanos).toString();

describe('OTLP/HTTP JSON ingest', () => {
  it('maps resource and span attributes, ids, times, status and kind; answers an empty partialSuccess', async () => {
    const tid = traceId();
    const root = spanId();
    const call = spanId();
    const res = await send({
      resourceSpans: [
        {
          resource: {
            attributes: [
              { key: 'service.name', value: { stringValue: 'support-bot' } },
              { key: 'deployment', value: { stringValue: 'resource-value' } },
            ],
          },
          scopeSpans: [
            {
              scope: { name: 'opentelemetry.instrumentation.openai', version: '0.44b0', attributes: [{ key: 'scope.only', value: { stringValue: 'dropped' } }] },
              spans: [
                {
                  traceId: tid.toUpperCase(),
                  spanId: root.toUpperCase(),
                  parentSpanId: '',
                  name: 'chat.handle_message',
                  kind: 2,
                  startTimeUnixNano: nanos('2026-11-22T09:29:58.120Z', 999_999n),
                  endTimeUnixNano: nanos('2026-11-22T09:30:00.470Z'),
                  status: { code: 1 },
                  events: [
                    { timeUnixNano: nanos('2026-11-22T09:29:59Z'), name: 'cache.lookup', attributes: [{ key: 'hit', value: { boolValue: true } }] },
                    { name: 'no time' },
                  ],
                  links: [{ traceId: traceId(), spanId: spanId() }],
                  droppedAttributesCount: 0,
                  flags: 1,
                  traceState: 'k=v',
                },
                {
                  traceId: tid,
                  spanId: call,
                  parentSpanId: root,
                  name: 'chat gpt-4o',
                  kind: 3,
                  startTimeUnixNano: Number(nanos('2026-11-22T09:29:58.320Z')),
                  endTimeUnixNano: nanos('2026-11-22T09:30:00.450Z'),
                  attributes: [
                    { key: 'deployment', value: { stringValue: 'span-wins' } },
                    { key: 'gen_ai.provider.name', value: { stringValue: 'openai' } },
                    { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } },
                    { key: 'gen_ai.usage.input_tokens', value: { intValue: '1200' } },
                    { key: 'gen_ai.usage.output_tokens', value: { intValue: 350 } },
                    { key: 'gen_ai.request.temperature', value: { doubleValue: 0.2 } },
                    { key: 'stream', value: { boolValue: false } },
                    { key: 'stop', value: { arrayValue: { values: [{ stringValue: '\n\n' }, { intValue: '3' }] } } },
                    { key: 'extra', value: { kvlistValue: { values: [{ key: 'a', value: { intValue: '1' } }, { key: 'b', value: { stringValue: 'x' } }] } } },
                    { key: 'blob', value: { bytesValue: 'AQID' } },
                    { key: 'huge', value: { intValue: '9223372036854775807' } },
                    { key: 'empty', value: {} },
                    { key: 'service.name', value: {} },
                  ],
                  status: { code: 2, message: 'upstream timeout' },
                },
              ],
            },
          ],
        },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ partialSuccess: {} });
    expect(res.headers['x-ratelimit-limit']).toBeDefined();

    const detail = await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(p.key));
    expect(detail.status).toBe(200);
    expect(detail.body.data).toEqual({
      trace_id: tid,
      name: 'chat.handle_message',
      start_time: '2026-11-22T09:29:58.120Z',
      end_time: '2026-11-22T09:30:00.470Z',
      duration_ms: 2350,
      spans: [
        {
          span_id: root,
          parent_span_id: null,
          name: 'chat.handle_message',
          start_time: '2026-11-22T09:29:58.120Z',
          end_time: '2026-11-22T09:30:00.470Z',
          duration_ms: 2350,
          attributes: { 'service.name': 'support-bot', deployment: 'resource-value' },
          status: { code: 'OK' },
          events: [
            { name: 'cache.lookup', time: '2026-11-22T09:29:59.000Z', attributes: { hit: true } },
            { name: 'no time', time: null, attributes: {} },
          ],
        },
        {
          span_id: call,
          parent_span_id: root,
          name: 'chat gpt-4o',
          start_time: '2026-11-22T09:29:58.320Z',
          end_time: '2026-11-22T09:30:00.450Z',
          duration_ms: 2130,
          attributes: {
            deployment: 'span-wins',
            'gen_ai.provider.name': 'openai',
            'gen_ai.request.model': 'gpt-4o',
            'gen_ai.usage.input_tokens': 1200,
            'gen_ai.usage.output_tokens': 350,
            'gen_ai.request.temperature': 0.2,
            stream: false,
            stop: ['\n\n', 3],
            extra: '{"a":1,"b":"x"}',
            blob: 'AQID',
            huge: '9223372036854775807',
            'llm.vendor': 'openai',
            'llm.model': 'gpt-4o',
            'llm.tokens.input': 1200,
            'llm.tokens.output': 350,
            'llm.cost': 0.0065,
          },
          status: { code: 'ERROR', message: 'upstream timeout' },
        },
      ],
    });
    // `kind` is stored (not part of the v1 span representation).
    const stored = await ctx.testDb.database.db('telemetry_traces').where({ project_id: p.projectId, trace_id: tid }).first('spans');
    const kinds = Object.fromEntries((JSON.parse(stored.spans) as Array<{ span_id: string; kind: string }>).map((d) => [d.span_id, d.kind]));
    expect(kinds).toEqual({ [root]: 'SERVER', [call]: 'CLIENT' });
    const list = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ status: 'error' });
    expect(list.body.data[0]).toMatchObject({ trace_id: tid, status: 'error', llm_summary: { model: 'gpt-4o', tokens_input: 1200, tokens_output: 350, cost: 0.0065 } });
  });

  it('groups spans of several traces across resources and accepts an empty request', async () => {
    const [t1, t2] = [traceId(), traceId()];
    const s = (tid: string) => ({ traceId: tid, spanId: spanId(), name: 'x', startTimeUnixNano: nanos('2026-11-22T08:00:00Z'), endTimeUnixNano: nanos('2026-11-22T08:00:01Z') });
    const res = await send({ resourceSpans: [{ scopeSpans: [{ spans: [s(t1), s(t2)] }] }, { scopeSpans: [{ spans: [s(t1)] }] }] });
    expect(res.status).toBe(200);
    expect((await ctx.platform.get(`/v1/traces/${t1}`).set(bearer(p.key))).body.data.spans).toHaveLength(2);
    expect((await ctx.platform.get(`/v1/traces/${t2}`).set(bearer(p.key))).body.data.spans).toHaveLength(1);
    expect((await send({})).status).toBe(200);
    expect((await send({ resourceSpans: [] })).body).toEqual({ partialSuccess: {} });
  });

  describe('errors', () => {
    const validSpan = () => ({ traceId: traceId(), spanId: spanId(), name: 'x', startTimeUnixNano: nanos('2026-11-22T08:00:00Z'), endTimeUnixNano: nanos('2026-11-22T08:00:01Z') });
    const wrap = (...spans: unknown[]) => ({ resourceSpans: [{ scopeSpans: [{ spans: [validSpan(), ...spans] }] }] });

    it('an invalid span is rejected alone: partialSuccess counts it, the other spans are stored', async () => {
      const good = validSpan();
      const bad = { ...validSpan(), endTimeUnixNano: nanos('2026-11-22T07:59:59Z') };
      const wrongType = { ...validSpan(), attributes: [{ key: 'gen_ai.request.model', value: { stringValue: 'm' } }, { key: 'gen_ai.usage.input_tokens', value: { stringValue: 'ten' } }] };
      const res = await send({ resourceSpans: [{ scopeSpans: [{ spans: [good, bad, wrongType] }] }] });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        partialSuccess: {
          rejectedSpans: '2',
          errorMessage: '2 spans rejected; first: resourceSpans[0].scopeSpans[0].spans[1]: endTimeUnixNano is before startTimeUnixNano',
        },
      });
      expect((await ctx.platform.get(`/v1/traces/${good.traceId}`).set(bearer(p.key))).status).toBe(200);
      expect((await ctx.platform.get(`/v1/traces/${bad.traceId}`).set(bearer(p.key))).status).toBe(404);
      expect((await ctx.platform.get(`/v1/traces/${wrongType.traceId}`).set(bearer(p.key))).status).toBe(404);
    });

    it('a span of a trace is rejected while its siblings are stored (a repeated span id)', async () => {
      const s = validSpan();
      const sibling = { ...validSpan(), traceId: s.traceId };
      const res = await send({ resourceSpans: [{ scopeSpans: [{ spans: [s, { ...s, name: 'again' }, sibling] }] }] });
      expect(res.body.partialSuccess).toEqual({ rejectedSpans: '1', errorMessage: expect.stringContaining(`spans[1]: spanId ${s.spanId} appears more than once`) });
      const stored = await ctx.platform.get(`/v1/traces/${s.traceId}`).set(bearer(p.key));
      expect(stored.body.data.spans.map((x: { span_id: string; name: string }) => [x.span_id, x.name]).sort()).toEqual([[s.spanId, 'x'], [sibling.spanId, 'x']].sort());
    });

    it('when every span is rejected the answer is 400 invalid_trace with the first one\'s coordinates', async () => {
      const bad = { ...validSpan(), endTimeUnixNano: nanos('2026-11-22T07:59:59Z') };
      const res = await send({ resourceSpans: [{ scopeSpans: [{ spans: [bad, { ...validSpan(), spanId: '0000000000000000' }] }] }] });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({
        code: 'invalid_trace',
        details: { resource_index: 0, scope_index: 0, span_index: 0, trace_id: bad.traceId, span_id: bad.spanId, field: 'endTimeUnixNano' },
      });
      expect((await ctx.platform.get(`/v1/traces/${bad.traceId}`).set(bearer(p.key))).status).toBe(404);
    });

    it.each([
      ['nesting deeper than one level', { attributes: [{ key: 'deep', value: { arrayValue: { values: [{ arrayValue: { values: [] } }] } } }] }],
      ['a bad span id', { spanId: 'xyz' }],
      ['an unknown span field', { color: 'red' }],
      ['an unknown status code', { status: { code: 7 } }],
      ['a non-numeric time', { startTimeUnixNano: 'yesterday' }],
    ])('%s breaks the schema: the request is malformed (400 invalid_trace), nothing stored', async (_label, patch) => {
      const body = wrap({ ...validSpan(), ...patch });
      const res = await send(body);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_trace');
      expect(res.body.error.details).toMatchObject({ resource_index: 0, scope_index: 0, span_index: 1 });
      const first = body.resourceSpans[0]!.scopeSpans[0]!.spans[0] as { traceId: string };
      expect((await ctx.platform.get(`/v1/traces/${first.traceId}`).set(bearer(p.key))).status).toBe(404);
    });

    it('more than 200 attributes after merging resource and span attributes → the span is rejected', async () => {
      const attrs = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ key: `${prefix}${i}`, value: { intValue: i } }));
      const res = await send({ resourceSpans: [{ resource: { attributes: attrs('r', 150) }, scopeSpans: [{ spans: [{ ...validSpan(), attributes: attrs('s', 60) }] }] }] });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_trace', details: { field: 'attributes', span_index: 0 } });
    });

    it('shape problems outside spans → invalid_request; a body protobuf cannot read → invalid_request', async () => {
      expect((await send({ resourceSpans: [{ scopeSpans: [], extra: 1 }] })).body.error.code).toBe('invalid_request');
      expect((await send({ resourceSpans: {} })).body.error.code).toBe('invalid_request');
      const proto = await ctx.platform.post('/v1/otlp/v1/traces').set(bearer(p.key)).set('Content-Type', 'application/x-protobuf').send(Buffer.from([0x0a, 0xff, 0x01]));
      expect(proto.status).toBe(400);
      expect(proto.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'body' } });
      const other = await ctx.platform.post('/v1/otlp/v1/traces').set(bearer(p.key)).set('Content-Type', 'text/plain').send('hello');
      expect(other.status).toBe(400);
      expect(other.body.error).toMatchObject({ code: 'invalid_request', message: 'Request body must be sent as Content-Type: application/x-protobuf or application/json' });
    });

    it('requires a telemetry key', async () => {
      const res = await ctx.platform.post('/v1/otlp/v1/traces').send({});
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    });
  });
});

/** Reads a binary answer as bytes (supertest parses only text types). */
const binary = (res: Response, callback: (err: Error | null, body: Buffer) => void) => {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => callback(null, Buffer.concat(chunks)));
};

const sendProto = (body: Record<string, unknown>, options: { gzip?: boolean } = {}) => {
  const bytes = encodeOtlpTraceRequest(body);
  const req = ctx.platform.post('/v1/otlp/v1/traces').set(bearer(p.key)).set('Content-Type', 'application/x-protobuf');
  if (options.gzip) req.set('Content-Encoding', 'gzip');
  return req.buffer(true).parse(binary as never).send(options.gzip ? gzipSync(bytes) : bytes);
};

describe('OTLP/HTTP protobuf and gzip', () => {
  const chat = (tid: string, sid: string, extra: Array<{ key: string; value: unknown }> = []) => ({
    traceId: tid,
    spanId: sid,
    name: 'chat gpt-4o',
    kind: 3,
    startTimeUnixNano: nanos('2026-11-22T09:29:58.320Z', 123n),
    endTimeUnixNano: nanos('2026-11-22T09:30:00.450Z'),
    attributes: [
      { key: 'gen_ai.system', value: { stringValue: 'openai' } },
      { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } },
      { key: 'gen_ai.usage.prompt_tokens', value: { intValue: '1200' } },
      { key: 'gen_ai.usage.completion_tokens', value: { intValue: '350' } },
      ...extra,
    ],
    events: [{ timeUnixNano: nanos('2026-11-22T09:29:59Z'), name: 'gen_ai.content.completion', attributes: [{ key: 'gen_ai.completion', value: { stringValue: 'ok' } }] }],
    status: { code: 1 },
  });

  it('a protobuf request is stored exactly as its JSON twin, and answered with a protobuf ExportTraceServiceResponse', async () => {
    const [jsonTrace, protoTrace, s1, s2] = [traceId(), traceId(), spanId(), spanId()];
    const resource = { attributes: [{ key: 'service.name', value: { stringValue: 'support-bot' } }] };
    expect((await send({ resourceSpans: [{ resource, scopeSpans: [{ spans: [chat(jsonTrace, s1)] }] }] })).status).toBe(200);
    const res = await sendProto({ resourceSpans: [{ resource, scopeSpans: [{ spans: [chat(protoTrace, s2)] }] }] });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-protobuf');
    expect(decodeOtlpTraceResponse(res.body as Buffer)).toEqual({ partialSuccess: {} });
    const [a, b] = await Promise.all([jsonTrace, protoTrace].map((t) => ctx.platform.get(`/v1/traces/${t}`).set(bearer(p.key))));
    expect(b!.body.data.spans[0]).toEqual({ ...a!.body.data.spans[0], span_id: s2 });
    expect(b!.body.data.spans[0].attributes).toMatchObject({ 'llm.tokens.input': 1200, 'llm.tokens.output': 350, 'llm.cost': 0.0065 });
  });

  it('gzip bodies of either encoding are inflated; a partial success comes back in protobuf', async () => {
    const tid = traceId();
    const good = chat(tid, spanId());
    const bad = { ...chat(tid, spanId()), endTimeUnixNano: nanos('2026-11-22T09:00:00Z') };
    const res = await sendProto({ resourceSpans: [{ scopeSpans: [{ spans: [good, bad] }] }] }, { gzip: true });
    expect(res.status).toBe(200);
    expect(decodeOtlpTraceResponse(res.body as Buffer)).toEqual({
      partialSuccess: { rejectedSpans: '1', errorMessage: '1 span rejected; first: resourceSpans[0].scopeSpans[0].spans[1]: endTimeUnixNano is before startTimeUnixNano' },
    });
    expect((await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(p.key))).body.data.spans).toHaveLength(1);

    const jsonTrace = traceId();
    const json = await ctx.platform
      .post('/v1/otlp/v1/traces')
      .set(bearer(p.key))
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', 'gzip')
      .serialize((x: unknown) => x as string)
      .send(gzipSync(JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [chat(jsonTrace, spanId())] }] }] })));
    expect(json.status).toBe(200);
    expect((await ctx.platform.get(`/v1/traces/${jsonTrace}`).set(bearer(p.key))).status).toBe(200);
  });

  it('a gzip bomb stops at the 5 MB limit of the inflated bytes (413); a corrupt gzip stream is 400', async () => {
    // 6 MB of zeros inflate from about 6 KB.
    const bomb = gzipSync(Buffer.alloc(6 * 1024 * 1024));
    expect(bomb.length).toBeLessThan(64 * 1024);
    for (const type of ['application/x-protobuf', 'application/json']) {
      const res = await ctx.platform.post('/v1/otlp/v1/traces').set(bearer(p.key)).set('Content-Type', type).set('Content-Encoding', 'gzip').serialize((x: unknown) => x as string).send(bomb);
      expect(res.status, type).toBe(413);
      expect(res.body.error.code).toBe('payload_too_large');
    }
    const corrupt = gzipSync(encodeOtlpTraceRequest({ resourceSpans: [] })).subarray(0, 12);
    const res = await ctx.platform.post('/v1/otlp/v1/traces').set(bearer(p.key)).set('Content-Type', 'application/x-protobuf').set('Content-Encoding', 'gzip').send(corrupt);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
  });

  it('maps the older and OpenLLMetry GenAI spellings; keeps unknown attributes; caps prompt text', async () => {
    const tid = traceId();
    const root = spanId();
    const long = 'p'.repeat(20_000);
    const res = await send({
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                {
                  traceId: tid,
                  spanId: root,
                  name: 'answer.workflow',
                  startTimeUnixNano: nanos('2026-11-22T09:29:58Z'),
                  endTimeUnixNano: nanos('2026-11-22T09:30:01Z'),
                  attributes: [
                    { key: 'traceloop.entity.name', value: { stringValue: 'answer' } },
                    { key: 'traceloop.span.kind', value: { stringValue: 'workflow' } },
                  ],
                },
                {
                  ...chat(tid, spanId(), [
                    { key: 'llm.usage.total_tokens', value: { intValue: '1550' } },
                    { key: 'gen_ai.usage.reasoning_tokens', value: { intValue: '64' } },
                    { key: 'gen_ai.usage.cache_creation_input_tokens', value: { intValue: '10' } },
                    { key: 'gen_ai.operation.name', value: { stringValue: 'chat' } },
                    { key: 'llm.request.type', value: { stringValue: 'completion' } },
                    { key: 'gen_ai.prompt.0.content', value: { stringValue: long } },
                    { key: 'vendor.custom', value: { stringValue: 'kept' } },
                  ]),
                  parentSpanId: root,
                },
              ],
            },
          ],
        },
      ],
    });
    expect(res.body).toEqual({ partialSuccess: {} });
    const detail = (await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(p.key))).body.data;
    expect(detail.name).toBe('answer');
    const call = detail.spans.find((s: { parent_span_id: string | null }) => s.parent_span_id === root);
    expect(call.attributes).toMatchObject({
      'llm.tokens.input': 1200,
      'llm.tokens.output': 350,
      'llm.tokens.total': 1550,
      'llm.tokens.reasoning': 64,
      'llm.tokens.cache_creation': 10,
      'llm.operation': 'chat',
      'llm.request.type': 'completion',
      'vendor.custom': 'kept',
    });
    const prompt = call.attributes['gen_ai.prompt.0.content'] as string;
    expect(prompt).toHaveLength(16_384);
    expect(prompt.endsWith('…[truncated]')).toBe(true);
    expect(call.events).toEqual([{ name: 'gen_ai.content.completion', time: '2026-11-22T09:29:59.000Z', attributes: { 'gen_ai.completion': 'ok' } }]);
  });

  it('OTLP metrics are not a route: 404 not_found', async () => {
    const res = await ctx.platform.post('/v1/otlp/v1/metrics').set(bearer(p.key)).set('Content-Type', 'application/x-protobuf').send(Buffer.alloc(0));
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
  });
});
