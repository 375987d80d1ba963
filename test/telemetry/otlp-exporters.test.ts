/**
 * The official OpenTelemetry JS exporters against Kassa over real HTTP: OTLP/HTTP protobuf
 * (@opentelemetry/exporter-trace-otlp-proto) and JSON (@opentelemetry/exporter-trace-otlp-http),
 * each with and without gzip; what they send is read back through GET /v1/traces/{id}. A
 * throttled exporter gets 429 with Retry-After, waits it out and its retry is stored.
 */
import { SpanKind, context, trace } from '@opentelemetry/api';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { CompressionAlgorithm } from '@opentelemetry/otlp-exporter-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, keyFor, type TelemetryKeyFixture } from './helpers.js';
import { serveRecording, type RecordingServer } from './otlp-server.js';

const RATE_LIMIT = 6;
let ctx: TestContext;
let p: TelemetryKeyFixture;
let server: RecordingServer;

beforeAll(async () => {
  ctx = await createTestContext({ env: { TELEMETRY_RATE_LIMIT: String(RATE_LIMIT), TELEMETRY_RATE_LIMIT_WINDOW_SECONDS: '60' } });
  p = await createProjectWithKey(ctx, ctx.orgA.orgId);
  server = await serveRecording(ctx.apps.platform);
});
afterAll(async () => {
  await server?.close();
  await ctx?.close();
});

/** A fresh key per test keeps the rate-limit windows of the tests apart. */
const freshKey = () => keyFor(ctx, ctx.orgA.orgId, p.projectId);

type ExporterKind = 'protobuf' | 'json';

function exporterFor(kind: ExporterKind, key: string, gzip: boolean): SpanExporter {
  const options = {
    url: `${server.origin}/v1/otlp/v1/traces`,
    headers: { Authorization: `Bearer ${key}` },
    compression: gzip ? CompressionAlgorithm.GZIP : CompressionAlgorithm.NONE,
  };
  return kind === 'protobuf' ? new ProtoTraceExporter(options) : new JsonTraceExporter(options);
}

/** One LLM request as an app's tracer records it: a workflow span and a chat span with GenAI attributes and a prompt event. */
async function exportChat(exporter: SpanExporter): Promise<{ traceId: string; rootId: string; callId: string }> {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'support-bot' }),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer('kassa-exporter-test');
  const root = tracer.startSpan('support_answer.workflow', { attributes: { 'traceloop.workflow.name': 'support_answer' } });
  const call = tracer.startSpan(
    'chat gpt-4o',
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.system': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.usage.prompt_tokens': 1200,
        'gen_ai.usage.completion_tokens': 350,
        'gen_ai.usage.cache_read_input_tokens': 1024,
        'llm.request.type': 'chat',
        'gen_ai.prompt.0.role': 'user',
        'gen_ai.prompt.0.content': 'Where is my order?',
        'gen_ai.completion.0.content': 'It ships today.',
        'app.ticket': 'T-1',
      },
    },
    trace.setSpan(context.active(), root),
  );
  call.addEvent('gen_ai.content.prompt', { 'gen_ai.prompt': 'Where is my order?' });
  call.end();
  root.end();
  await provider.forceFlush();
  await provider.shutdown();
  return { traceId: root.spanContext().traceId, rootId: root.spanContext().spanId, callId: call.spanContext().spanId };
}

describe.each([
  ['protobuf', false],
  ['protobuf', true],
  ['json', false],
  ['json', true],
] as Array<[ExporterKind, boolean]>)('the official %s exporter (gzip %s)', (kind, gzip) => {
  it('sends spans that are read back with model, tokens, cost, workflow name, prompts and events', async () => {
    const k = await freshKey();
    const before = server.exchanges.length;
    const { traceId, rootId, callId } = await exportChat(exporterFor(kind, k.key, gzip));

    const sent = server.exchanges.slice(before).filter((e) => e.path === '/v1/otlp/v1/traces');
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      status: 200,
      contentType: kind === 'protobuf' ? 'application/x-protobuf' : 'application/json',
      contentEncoding: gzip ? 'gzip' : undefined,
      responseType: kind === 'protobuf' ? 'application/x-protobuf' : expect.stringContaining('application/json'),
    });

    const detail = await ctx.platform.get(`/v1/traces/${traceId}`).set(bearer(k.key));
    expect(detail.status).toBe(200);
    expect(detail.body.data.name).toBe('support_answer');
    const spans = Object.fromEntries(detail.body.data.spans.map((s: { span_id: string }) => [s.span_id, s]));
    expect(spans[rootId]).toMatchObject({ parent_span_id: null, name: 'support_answer.workflow' });
    expect(spans[callId]).toMatchObject({
      parent_span_id: rootId,
      name: 'chat gpt-4o',
      attributes: {
        'service.name': 'support-bot',
        'llm.vendor': 'openai',
        'llm.model': 'gpt-4o',
        'llm.tokens.input': 1200,
        'llm.tokens.output': 350,
        'llm.tokens.cache_read': 1024,
        'llm.operation': 'chat',
        'llm.cost': 0.0065,
        'gen_ai.prompt.0.content': 'Where is my order?',
        'gen_ai.completion.0.content': 'It ships today.',
        'app.ticket': 'T-1',
      },
      events: [{ name: 'gen_ai.content.prompt', time: expect.any(String), attributes: { 'gen_ai.prompt': 'Where is my order?' } }],
    });
    const list = await ctx.platform.get('/v1/traces').set(bearer(k.key)).query({ model: 'gpt-4o', limit: 100 });
    expect(list.body.data.find((t: { trace_id: string }) => t.trace_id === traceId)).toMatchObject({
      name: 'support_answer',
      llm_summary: { model: 'gpt-4o', tokens_input: 1200, tokens_output: 350, cost: 0.0065 },
    });
  });
});

describe('a throttled exporter', () => {
  it.each(['protobuf', 'json'] as ExporterKind[])('%s: gets 429 with Retry-After, waits it out, and its retry is stored', async (kind) => {
    const k = await freshKey();
    // The clock stands one second before the window ends, so Retry-After is 1; once the exporter
    // has been told so, the clock moves past the window and its retry goes through.
    const windowEnd = Math.ceil((ctx.clock.now().getTime() + 1) / 60_000) * 60_000;
    ctx.clock.set(windowEnd - 1000);
    // Use up the key's window with reads.
    for (let i = 0; i < RATE_LIMIT; i++) expect((await ctx.platform.get('/v1/traces').set(bearer(k.key))).status).toBe(200);
    const before = server.exchanges.length;
    server.onExchange = (e) => {
      if (e.status === 429) ctx.clock.set(windowEnd + 1);
    };
    try {
      const { traceId } = await exportChat(exporterFor(kind, k.key, true));
      const sent = server.exchanges.slice(before).filter((e) => e.path === '/v1/otlp/v1/traces');
      expect(sent.map((e) => [e.status, e.retryAfter])).toEqual([
        [429, '1'],
        [200, undefined],
      ]);
      expect((await ctx.platform.get(`/v1/traces/${traceId}`).set(bearer(k.key))).body.data.name).toBe('support_answer');
    } finally {
      server.onExchange = undefined;
    }
  });
});
