/**
 * docs/send-traces.md, proven: its Node snippets run as their own processes with the documented
 * environment variables against Kassa on a loopback port — OpenTelemetry's Node SDK, and
 * OpenLLMetry's Node SDK instrumenting the official `openai` client pointed at a local
 * OpenAI-shaped server — and its Collector configuration is parsed and its exporter's request
 * sent to the endpoint it names. The page's code blocks are these files, byte for byte.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { encodeOtlpTraceRequest } from '../../src/telemetry/otlp-protobuf.js';
import { bearer, createProjectWithKey, spanId, traceId, type TelemetryKeyFixture } from './helpers.js';
import { serveRecording, type RecordingServer } from './otlp-server.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const EXAMPLES = 'scripts/examples/telemetry';
const PYTHON = process.env.KASSA_TEST_PYTHON ?? 'python3';
const hasPythonOtel = spawnSync(PYTHON, ['-c', 'import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http'], { stdio: 'ignore' }).status === 0;

let ctx: TestContext;
let p: TelemetryKeyFixture;
let kassa: RecordingServer;
let openai: Server;
let openaiOrigin: string;
const openaiRequests: Array<{ path: string; body: { model?: string; messages?: unknown[] } }> = [];

/** Answers POST /v1/chat/completions the way the OpenAI API does, with usage. */
async function startOpenAiShapedServer(): Promise<void> {
  openai = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    req.on('end', () => {
      openaiRequests.push({ path: req.url ?? '', body: JSON.parse(text || '{}') });
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":{"message":"not found"}}');
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json', 'x-request-id': 'req_local' }).end(
        JSON.stringify({
          id: 'chatcmpl-local',
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model: 'gpt-4o-2024-08-06',
          choices: [{ index: 0, message: { role: 'assistant', content: 'It ships today.', refusal: null }, logprobs: null, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1200, completion_tokens: 350, total_tokens: 1550 },
        }),
      );
    });
  }).listen(0, '127.0.0.1');
  await once(openai, 'listening');
  openaiOrigin = `http://127.0.0.1:${(openai.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  ctx = await createTestContext();
  p = await createProjectWithKey(ctx, ctx.orgA.orgId);
  kassa = await serveRecording(ctx.apps.platform);
  await startOpenAiShapedServer();
});
afterAll(async () => {
  await kassa?.close();
  await new Promise((resolve) => (openai ? openai.close(resolve) : resolve(undefined)));
  await ctx?.close();
});

/** Runs an example as its own process with only the documented variables added; its last stdout line is JSON. */
async function runExample(file: string, env: Record<string, string>, outcome: { refused?: true } = {}): Promise<Record<string, string>> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_') && !k.startsWith('TRACELOOP_') && !k.startsWith('OPENAI_')));
  const [command, args] = file.endsWith('.py') ? [PYTHON, [path.join(EXAMPLES, file)]] : [process.execPath, ['--import', 'tsx', path.join(EXAMPLES, file)]];
  const child = spawn(command, args, { cwd: ROOT, env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (outcome.refused) {
    // The exporter's flush rejects with the server's refusal.
    expect(stderr).toMatch(/OTLPExporterError: Unauthorized/);
    return {};
  }
  expect(code, `${file} failed:\n${stdout}\n${stderr}`).toBe(0);
  const last = stdout.trim().split('\n').at(-1)!;
  return JSON.parse(last) as Record<string, string>;
}

describe('the Node snippets, run as documented', () => {
  it('OpenTelemetry Node SDK (http/protobuf, gzip): the span is stored with model, tokens and cost', async () => {
    const before = kassa.exchanges.length;
    const out = await runExample('otel-node.ts', {
      OTEL_EXPORTER_OTLP_ENDPOINT: `${kassa.origin}/v1/otlp`,
      OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer%20${p.key}`,
      OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip',
    });
    expect(kassa.exchanges.slice(before)).toEqual([
      expect.objectContaining({ path: '/v1/otlp/v1/traces', contentType: 'application/x-protobuf', contentEncoding: 'gzip', status: 200 }),
    ]);
    const detail = await ctx.platform.get(`/v1/traces/${out.trace_id}`).set(bearer(p.key));
    expect(detail.status).toBe(200);
    expect(detail.body.data.spans[0].attributes).toMatchObject({
      'service.name': 'support-bot',
      'llm.model': 'gpt-4o',
      'llm.vendor': 'openai',
      'llm.operation': 'chat',
      'llm.tokens.input': 1200,
      'llm.tokens.output': 350,
      'llm.cost': 0.0065,
    });
  });

  it("OpenLLMetry's Node SDK instrumenting the openai client: workflow name, model, tokens, priced cost; GET /v1/metrics counts it", async () => {
    const started = Date.now();
    const out = await runExample('openllmetry-node.ts', {
      TRACELOOP_BASE_URL: `${kassa.origin}/v1/otlp`,
      TRACELOOP_HEADERS: `Authorization=Bearer ${p.key}`,
      OPENAI_API_KEY: 'sk-local-test',
      OPENAI_BASE_URL: `${openaiOrigin}/v1`,
    });
    expect(out.answer).toBe('It ships today.');
    expect(openaiRequests.at(-1)).toMatchObject({ path: '/v1/chat/completions', body: { model: 'gpt-4o' } });

    const detail = await ctx.platform.get(`/v1/traces/${out.trace_id}`).set(bearer(p.key));
    expect(detail.status).toBe(200);
    expect(detail.body.data.name).toBe('support_answer');
    const call = detail.body.data.spans.find((s: { attributes: Record<string, unknown> }) => s.attributes['llm.model'] !== undefined);
    expect(call.attributes).toMatchObject({
      'traceloop.workflow.name': 'support_answer',
      'llm.model': 'gpt-4o-2024-08-06',
      'llm.tokens.input': 1200,
      'llm.tokens.output': 350,
      'llm.cost': 0.0065,
    });
    // The prompt and the completion are kept on the span.
    expect(JSON.stringify(call.attributes)).toContain('Where is my order?');
    expect(JSON.stringify(call.attributes)).toContain('It ships today.');
    const list = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ model: 'gpt-4o-2024-08-06' });
    expect(list.body.data.find((t: { trace_id: string }) => t.trace_id === out.trace_id)).toMatchObject({
      name: 'support_answer',
      llm_summary: { model: 'gpt-4o-2024-08-06', tokens_input: 1200, tokens_output: 350, cost: 0.0065 },
    });

    const hour = 3_600_000;
    const window = { start_time: new Date(Math.floor(started / hour) * hour).toISOString(), end_time: new Date(Math.floor(started / hour) * hour + 2 * hour).toISOString(), interval: '1h' };
    const metric = async (name: string, aggregation = 'sum') => {
      const res = await ctx.platform.get('/v1/metrics').set(bearer(p.key)).query({ metric: name, aggregation, model: 'gpt-4o-2024-08-06', ...window });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return (res.body.data.series as Array<{ datapoints: Array<{ value: number | null }> }>).flatMap((s) => s.datapoints).reduce((sum, d) => sum + (d.value ?? 0), 0);
    };
    expect(await metric('llm.requests.total')).toBe(1);
    expect(await metric('llm.tokens.input')).toBe(1200);
    expect(await metric('llm.cost.total')).toBeCloseTo(0.0065, 9);
  });
});

describe('TRACELOOP_HEADERS in Node, as docs/send-traces.md warns', () => {
  it("the Python form (Bearer%20…) is sent as is by the Node SDK and refused with 401; the page's Node form is accepted (above)", async () => {
    const before = kassa.exchanges.length;
    await runExample('openllmetry-node.ts', {
      TRACELOOP_BASE_URL: `${kassa.origin}/v1/otlp`,
      TRACELOOP_HEADERS: `Authorization=Bearer%20${p.key}`,
      OPENAI_API_KEY: 'sk-local-test',
      OPENAI_BASE_URL: `${openaiOrigin}/v1`,
    }, { refused: true });
    const exports = kassa.exchanges.slice(before).filter((e) => e.path === '/v1/otlp/v1/traces');
    expect(exports.length).toBeGreaterThan(0);
    expect(exports.every((e) => e.status === 401)).toBe(true);
  });
});

describe.skipIf(!hasPythonOtel)(skippedUnless('the Python snippet, run as documented', 'pythonOpenTelemetry'), () => {
  it('OpenTelemetry Python SDK (http/protobuf, gzip): the span is stored with model, tokens and cost', async () => {
    const before = kassa.exchanges.length;
    const out = await runExample('otel-python.py', {
      OTEL_EXPORTER_OTLP_ENDPOINT: `${kassa.origin}/v1/otlp`,
      OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer%20${p.key}`,
      OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip',
      OTEL_SERVICE_NAME: 'support-bot',
    });
    expect(kassa.exchanges.slice(before)).toEqual([
      expect.objectContaining({ path: '/v1/otlp/v1/traces', contentType: 'application/x-protobuf', contentEncoding: 'gzip', status: 200 }),
    ]);
    const detail = await ctx.platform.get(`/v1/traces/${out.trace_id}`).set(bearer(p.key));
    expect(detail.status).toBe(200);
    expect(detail.body.data.spans[0].attributes).toMatchObject({ 'service.name': 'support-bot', 'llm.model': 'gpt-4o', 'llm.tokens.input': 1200, 'llm.cost': 0.0065 });
  });
});

describe('the OpenTelemetry Collector configuration', () => {
  it("parses, and its otlphttp exporter's request (endpoint + /v1/traces, headers, gzip, proto) is stored", async () => {
    const config = parseYaml(await readFile(path.join(ROOT, EXAMPLES, 'otel-collector.yaml'), 'utf8')) as {
      exporters: Record<string, { endpoint: string; headers: Record<string, string>; encoding: string; compression: string }>;
      service: { pipelines: { traces: { exporters: string[] } } };
    };
    const name = config.service.pipelines.traces.exporters[0]!;
    expect(name).toMatch(/^otlphttp(\/|$)/);
    const exporter = config.exporters[name]!;
    expect(exporter).toMatchObject({ encoding: 'proto', compression: 'gzip' });
    // The Collector's ${env:NAME} substitution.
    const env: Record<string, string> = { KASSA_API_URL: kassa.origin, KASSA_TELEMETRY_KEY: p.key };
    const expand = (text: string) => text.replace(/\$\{env:([A-Z_]+)\}/g, (_, v: string) => env[v]!);
    const tid = traceId();
    const body = encodeOtlpTraceRequest({
      resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: tid, spanId: spanId(), name: 'collector', startTimeUnixNano: '1763803798000000000', endTimeUnixNano: '1763803799000000000' }] }] }],
    });
    // What otlphttp sends: POST {endpoint}/v1/traces with the configured headers.
    const res = await fetch(`${expand(exporter.endpoint)}/v1/traces`, {
      method: 'POST',
      headers: { ...Object.fromEntries(Object.entries(exporter.headers).map(([k, v]) => [k, expand(v)])), 'Content-Type': 'application/x-protobuf', 'Content-Encoding': 'gzip' },
      body: gzipSync(body),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-protobuf');
    expect((await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(p.key))).status).toBe(200);
  });
});

describe('docs/send-traces.md', () => {
  it('shows these files as they are', async () => {
    const page = await readFile(path.join(ROOT, 'docs/send-traces.md'), 'utf8');
    for (const file of ['otel-node.ts', 'openllmetry-node.ts', 'otel-collector.yaml', 'otel-python.py']) {
      const text = await readFile(path.join(ROOT, EXAMPLES, file), 'utf8');
      expect(page, file).toContain(text);
    }
  });
});
