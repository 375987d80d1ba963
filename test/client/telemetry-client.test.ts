/** The telemetry SDK against the platform app on an ephemeral port: projects, ingest, reads, typed errors. */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTelemetryClient, KassaApiError, type TelemetryClient } from '../../src/client/index.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createProjectWithKey, span, spanId, traceId, type TelemetryKeyFixture } from '../telemetry/helpers.js';

let ctx: TestContext;
let server: Server;
let telemetry: TelemetryClient;
let fixture: TelemetryKeyFixture;
const T0 = Date.parse('2026-11-22T08:00:00.000Z');

beforeAll(async () => {
  ctx = await createTestContext();
  fixture = await createProjectWithKey(ctx, ctx.orgA.orgId, 'SDK project');
  server = ctx.apps.platform.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  telemetry = createTelemetryClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, apiKey: fixture.key, retryDelayMs: 1 });
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await ctx?.close();
});

async function caught(promise: Promise<unknown>): Promise<KassaApiError> {
  const error = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(KassaApiError);
  return error as KassaApiError;
}

describe('createTelemetryClient', () => {
  it('ingests a trace and reads it back, whole bodies with meta and pagination', async () => {
    const tid = traceId();
    const root = spanId();
    const accepted = await telemetry.ingest({
      traces: [
        {
          trace_id: tid,
          spans: [
            span({ span_id: root, parent_span_id: null, name: 'chat', start: T0, durationMs: 900 }),
            span({ parent_span_id: root, name: 'llm', start: T0 + 100, durationMs: 700, attributes: { 'llm.model': 'gpt-4o', 'llm.tokens.input': 10, 'llm.tokens.output': 5 } }),
          ],
        },
      ],
    } as never);
    expect(accepted.data).toMatchObject({ traces_received: 1, spans_received: 2 });
    expect(accepted.meta.request_id).toMatch(/^req_/);

    const trace = await telemetry.getTrace(tid);
    expect(trace.data.trace_id).toBe(tid);
    expect(trace.data.spans).toHaveLength(2);

    const list = await telemetry.listTraces({ limit: 10 });
    expect(list.data.map((t) => t.trace_id)).toContain(tid);
    expect(list.pagination).toMatchObject({ limit: 10, has_more: false, next_cursor: null });
  });

  it('manages projects', async () => {
    const created = await telemetry.createProject({ name: 'Second project', environment: 'staging' });
    expect(created.data).toMatchObject({ name: 'Second project', environment: 'staging' });
    const id = created.data.id;
    expect((await telemetry.updateProject(id, { description: 'from the SDK' })).data.description).toBe('from the SDK');
    expect((await telemetry.getProject(id)).data.id).toBe(id);
    expect((await telemetry.listProjects()).data.map((p) => p.id)).toEqual(expect.arrayContaining([fixture.projectId, id]));
    expect((await telemetry.deleteProject(id)).data).toEqual({ id, deleted: true });
  });

  it('throws KassaApiError with the telemetry code, details and request id', async () => {
    const missing = await caught(telemetry.getTrace(traceId()));
    expect(missing).toMatchObject({ status: 404, code: 'not_found' });
    expect(missing.requestId).toMatch(/^req_/);

    const invalid = await caught(telemetry.ingest({ traces: [{ trace_id: 'nope', spans: [] }] } as never));
    expect(invalid.status).toBe(400);
    expect(invalid.code).toBe('invalid_trace');
    expect(invalid.details).not.toBeNull();

    const metric = await caught(telemetry.getMetrics({ metric: 'llm.bogus', start_time: '2026-11-21T00:00:00Z', end_time: '2026-11-22T00:00:00Z' } as never));
    expect(metric).toMatchObject({ status: 400, code: 'invalid_metric' });

    const unauthorized = await caught(createTelemetryClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: 'tk_wrong' }).listProjects());
    expect(unauthorized).toMatchObject({ status: 401, code: 'unauthorized' });
  });
});
