/**
 * The telemetry explorer in Chromium with traces sent the way users send them (issue 31): the
 * official OpenTelemetry exporter over OTLP/HTTP protobuf (@opentelemetry/exporter-trace-otlp-proto)
 * and OpenLLMetry (@traceloop/node-server-sdk) instrumenting the official `openai` client pointed
 * at a local OpenAI-shaped server, both from this test process, to the platform app on a loopback
 * port. Then: the list with GET /v1/traces' order, a filter, a trace with one waterfall row per
 * span of GET /v1/traces/{id} and its rendered messages, a session followed, and a metrics bucket
 * (the figures of GET /v1/metrics) opening its traces.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, SpanKind, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { CompressionAlgorithm } from '@opentelemetry/otlp-exporter-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import * as traceloop from '@traceloop/node-server-sdk';
import OpenAI from 'openai';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { startConsoleHarness, type ConsoleHarness } from '../harness/console-browser.js';
import { bearer, createProjectWithKey, type TelemetryKeyFixture } from '../telemetry/helpers.js';
import { serveRecording, type RecordingServer } from '../telemetry/otlp-server.js';

type El = { dataset: Record<string, string | undefined>; innerText: string; querySelector(selector: string): El | null };

let h: ConsoleHarness;
let p: TelemetryKeyFixture;
let kassa: RecordingServer;
let openaiServer: Server;
let page: Page;
const ids = { otel: '', openllmetry: '' };

/** Answers POST /v1/chat/completions the way the OpenAI API does, with usage. */
async function startOpenAiShapedServer(): Promise<string> {
  openaiServer = createServer((req, res) => {
    req.resume();
    req.on('end', () =>
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(
        JSON.stringify({
          id: 'chatcmpl-local',
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model: 'gpt-4o-mini-2024-07-18',
          choices: [{ index: 0, message: { role: 'assistant', content: 'Your refund was issued today.', refusal: null }, logprobs: null, finish_reason: 'stop' }],
          usage: { prompt_tokens: 800, completion_tokens: 120, total_tokens: 920 },
        }),
      ),
    );
  }).listen(0, '127.0.0.1');
  await once(openaiServer, 'listening');
  return `http://127.0.0.1:${(openaiServer.address() as AddressInfo).port}`;
}

/** OpenTelemetry's SDK and its protobuf exporter: a workflow and a model call in session conv-sdk of user-7. */
async function sendWithOtel(): Promise<string> {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'support-bot' }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${kassa.origin}/v1/otlp/v1/traces`, headers: bearer(p.key), compression: CompressionAlgorithm.GZIP }))],
  });
  const tracer = provider.getTracer('support-bot');
  const root = tracer.startSpan('support_answer', { attributes: { 'session.id': 'conv-sdk', 'user.id': 'user-7' } });
  const call = tracer.startSpan(
    'chat gpt-4o',
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.usage.input_tokens': 1200,
        'gen_ai.usage.output_tokens': 350,
        'gen_ai.prompt.0.role': 'system',
        'gen_ai.prompt.0.content': 'You answer billing questions.',
        'gen_ai.prompt.1.role': 'user',
        'gen_ai.prompt.1.content': 'Where is my invoice?',
        'gen_ai.completion.0.role': 'assistant',
        'gen_ai.completion.0.content': 'It is in Settings › Billing.',
      },
    },
    trace.setSpan(context.active(), root),
  );
  await new Promise((r) => setTimeout(r, 20));
  call.end();
  root.end();
  await provider.forceFlush();
  await provider.shutdown();
  return root.spanContext().traceId;
}

/** OpenLLMetry's Node SDK instrumenting the openai client: a workflow in the same session, later. */
async function sendWithOpenLlmetry(openaiOrigin: string): Promise<string> {
  traceloop.initialize({
    appName: 'support-bot',
    baseUrl: `${kassa.origin}/v1/otlp`,
    headers: bearer(p.key),
    disableBatch: true,
    silenceInitializationMessage: true,
    instrumentModules: { openAI: OpenAI as never },
  });
  const openai = new OpenAI({ apiKey: 'sk-local-test', baseURL: `${openaiOrigin}/v1` });
  const traceId = await traceloop.withWorkflow({ name: 'refund_followup', associationProperties: { session_id: 'conv-sdk' } }, async () => {
    await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'And my refund?' }] });
    return trace.getActiveSpan()?.spanContext().traceId ?? '';
  });
  await traceloop.forceFlush();
  return traceId;
}

describe.skipIf(!chromiumAvailable)(skippedUnless('telemetry explorer with traces from the OpenTelemetry and OpenLLMetry SDKs', 'chromium'), () => {
  beforeAll(async () => {
    h = await startConsoleHarness();
    p = await createProjectWithKey(h.ctx, h.ctx.orgA.orgId, 'SDK bot');
    kassa = await serveRecording(h.ctx.apps.platform as never);
    const openaiOrigin = await startOpenAiShapedServer();
    ids.otel = await sendWithOtel();
    await new Promise((r) => setTimeout(r, 50));
    ids.openllmetry = await sendWithOpenLlmetry(openaiOrigin);
    const sent = kassa.exchanges.filter((e) => e.path === '/v1/otlp/v1/traces');
    expect(sent.length).toBeGreaterThanOrEqual(2);
    expect(sent.every((e) => e.status === 200 && e.contentType === 'application/x-protobuf')).toBe(true);
    // The session and user lists: the queued changes applied, as the worker's job does within a second.
    await h.ctx.services.telemetry.groupChanges.applyAll();
    page = await h.signedInPage('developer');
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    await kassa?.close();
    await new Promise<void>((resolve) => (openaiServer ? openaiServer.close(() => resolve()) : resolve()));
  });

  it('lists both traces in the order of GET /v1/traces, and filters by model', async () => {
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/traces`);
    await page.locator(`tr[data-trace-id="${ids.openllmetry}"]`).waitFor();
    const api = (await h.ctx.platform.get('/v1/traces').set(bearer(p.key))).body.data as Array<{ trace_id: string }>;
    const shown = await page.locator('tr[data-trace-id]').evaluateAll((rows) => rows.map((r) => (r as unknown as El).dataset.traceId));
    expect(shown).toEqual(api.map((t) => t.trace_id));
    expect(shown).toEqual(expect.arrayContaining([ids.otel, ids.openllmetry]));
    await expect(page.locator(`tr[data-trace-id="${ids.openllmetry}"]`).innerText()).resolves.toContain('refund_followup');

    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/traces?model=gpt-4o`);
    await page.locator(`tr[data-trace-id="${ids.otel}"]`).waitFor();
    const filtered = (await h.ctx.platform.get('/v1/traces').query({ model: 'gpt-4o' }).set(bearer(p.key))).body.data as Array<{ trace_id: string }>;
    expect(await page.locator('tr[data-trace-id]').evaluateAll((rows) => rows.map((r) => (r as unknown as El).dataset.traceId))).toEqual(filtered.map((t) => t.trace_id));
    await h.check(page, 'explorer-sdk-traces');
  });

  it.each([
    ['otel', 'chat gpt-4o', ['system', 'user', 'assistant'], 'It is in Settings › Billing.'],
    ['openllmetry', 'chat gpt-4o-mini', ['user', 'assistant'], 'Your refund was issued today.'],
  ] as const)('opens the %s trace: one waterfall row per span of GET /v1/traces/{id}, and the rendered messages', async (which, spanName, roles, answer) => {
    const id = ids[which];
    const api = (await h.ctx.platform.get(`/v1/traces/${id}`).set(bearer(p.key))).body.data as { spans: Array<{ span_id: string; name: string }> };
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/traces/${id}`);
    await page.getByRole('tree', { name: 'Spans' }).waitFor();
    expect(await page.getByRole('treeitem').count()).toBe(api.spans.length);
    const call = api.spans.find((s) => s.name === spanName)!;
    expect(call, JSON.stringify(api.spans.map((s) => s.name))).toBeDefined();
    await page.getByRole('link', { name: spanName }).click();
    expect(page.url()).toContain(`span=${call.span_id}`);
    const chat = page.getByLabel('Conversation');
    await chat.waitFor();
    expect(await chat.locator('[data-role]').evaluateAll((els) => els.map((e) => (e as unknown as El).dataset.role))).toEqual(roles);
    await expect(chat.innerText()).resolves.toContain(answer);
    await h.check(page, `explorer-sdk-trace-${which}`);
  });

  it('follows the session: the OpenTelemetry and the OpenLLMetry traces in order', async () => {
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/sessions`);
    await page.getByRole('link', { name: 'conv-sdk' }).click();
    await page.locator(`tr[data-trace-id="${ids.openllmetry}"]`).waitFor();
    const shown = await page.locator('tr[data-trace-id]').evaluateAll((rows) => rows.map((r) => (r as unknown as El).dataset.traceId));
    expect(shown).toEqual([ids.otel, ids.openllmetry]);
  });

  it("a metrics bucket shows GET /v1/metrics' figures and opens its traces", async () => {
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/metrics`);
    await page.getByRole('table', { name: 'Metrics by hour' }).waitFor();
    const buckets = await page.locator('tr[data-bucket]').evaluateAll((rows) => rows.map((r) => (r as unknown as El).dataset.bucket!));
    const end = new Date(Date.parse(buckets.at(-1)!) + 3_600_000).toISOString();
    for (const [field, metric, aggregation] of [['requests', 'llm.requests.total', 'sum'], ['tokens_in', 'llm.tokens.input', 'sum'], ['p95', 'llm.latency_ms', 'p95']] as const) {
      const api = await h.ctx.platform.get('/v1/metrics').set(bearer(p.key)).query({ metric, aggregation, interval: '1h', start_time: buckets[0], end_time: end, project_id: p.projectId });
      const values = (api.body.data.series[0]?.datapoints ?? []).map((d: { value: number | null }) => (d.value === null ? '—' : String(Math.round(d.value * 100) / 100)));
      // Thousands are grouped on the page ("2,000"): read back without the separators.
      const shown = (await page.locator(`tr[data-bucket] td[data-field="${field}"]`).allInnerTexts()).map((t) => t.replaceAll(',', ''));
      expect(shown, field).toEqual(values);
    }
    const busy = await page.locator('tr[data-bucket]').evaluateAll((rows) => rows.findIndex((r) => (r as unknown as El).querySelector('td[data-field="requests"]')!.innerText !== '0'));
    expect(busy).toBeGreaterThanOrEqual(0);
    await page.locator('tr[data-bucket]').nth(busy).getByRole('link').click();
    await page.getByRole('heading', { name: 'Traces', level: 1 }).waitFor();
    await page.locator(`tr[data-trace-id="${ids.otel}"]`).waitFor();
    expect(h.pageErrors).toEqual([]);
  });
});
