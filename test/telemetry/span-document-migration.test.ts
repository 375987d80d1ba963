/**
 * Migration 0070: stored span documents move from one-letter keys to readable ones (and back on
 * rollback), values carried over as written; spans a previous release wrote in the old shape are
 * read and extended correctly meanwhile.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateLatest } from '../../src/db/knex.js';
import { migrationSource } from '../../src/db/migrations/index.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, span, spanId, traceId, type TelemetryKeyFixture } from './helpers.js';

const MIGRATION = '0071_telemetry_span_document_keys';
const T0 = Date.parse('2026-11-22T08:00:00.000Z');
const COMPACT_KEYS = ['s', 'p', 'n', 'k', 'st', 'et', 'c', 'm', 'a'];
const READABLE_KEYS = ['span_id', 'parent_span_id', 'name', 'kind', 'start_ms', 'end_ms', 'status_code', 'status_message', 'attributes'];

let ctx: TestContext;
let p: TelemetryKeyFixture;
beforeAll(async () => {
  ctx = await createTestContext();
  p = await createProjectWithKey(ctx, ctx.orgA.orgId);
});
afterAll(async () => {
  await ctx?.close();
});

const db = () => ctx.testDb.database.db;
const storedText = async (tid: string): Promise<string> =>
  ((await db()('telemetry_traces').where({ project_id: p.projectId, trace_id: tid }).first('spans')) as { spans: string }).spans;
const storedKeys = async (tid: string): Promise<string[][]> => (JSON.parse(await storedText(tid)) as object[]).map((d) => Object.keys(d));
const getTrace = async (tid: string) => {
  const res = await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(p.key));
  expect(res.status).toBe(200);
  return res.body.data;
};
const ingest = async (tid: string, spans: unknown[]) => {
  const res = await ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({ traces: [{ trace_id: tid, spans }] });
  expect(res.status).toBe(202);
};

/** A trace row as a release before 0070 wrote it: compact keys, JSON.stringify spelling. */
async function insertCompactTrace(tid: string, spansText: string, startMs: number, endMs: number): Promise<void> {
  await db()('telemetry_traces').insert({
    project_id: p.projectId,
    trace_id: tid,
    start_time: new Date(startMs),
    end_time: new Date(endMs),
    duration_ms: endMs - startMs,
    span_count: (JSON.parse(spansText) as unknown[]).length,
    root_name: 'legacy.root',
    root_attributes: '{}',
    model: null,
    models: [],
    tokens_input: 0,
    tokens_output: 0,
    cost: 0,
    has_error: true,
    spans: spansText,
    created_at: new Date(startMs),
    updated_at: new Date(startMs),
    // Since migration 0390: the partition key and the trace's id, as ingest writes them.
    partition_start: new Date(startMs),
  });
  await db()('telemetry_trace_ids').insert({ project_id: p.projectId, trace_id: tid, partition_start: new Date(startMs) });
}

describe(`migration ${MIGRATION}`, () => {
  it('rewrites documents to readable keys and back, values and order unchanged', async () => {
    const ingested = traceId();
    const root = spanId();
    await ingest(ingested, [
      { ...span({ span_id: root, name: 'chat', start: T0, durationMs: 900, attributes: { z: 1, a: 'é\n"q"', list: [3, 'x', true] } }), kind: 'SERVER' },
      { ...span({ parent_span_id: root, name: 'llm', start: T0 + 10, durationMs: 500, attributes: { 'llm.model': 'gpt-4o', 'llm.cost': 0.0065 } }), status: { code: 'ERROR', message: 'timeout' } },
    ]);
    const served = await getTrace(ingested);
    expect(await storedKeys(ingested)).toEqual([READABLE_KEYS, READABLE_KEYS]);

    await db().migrate.down({ migrationSource, name: MIGRATION });
    expect(await storedKeys(ingested)).toEqual([COMPACT_KEYS, COMPACT_KEYS]);

    // Written by the previous release: attribute key order and number spelling must survive.
    const legacy = traceId();
    const [a, b] = [spanId(), spanId()];
    const legacyAttributes = '{"zeta":1e+21,"alpha":"ü","nested":[1.5,"x",false],"llm.cost":0.1}';
    await insertCompactTrace(
      legacy,
      `[{"s":"${a}","p":null,"n":"legacy.root","k":"SERVER","st":${T0},"et":${T0 + 50},"c":"OK","m":null,"a":${legacyAttributes}},` +
        `{"s":"${b}","p":"${a}","n":"legacy.child","k":null,"st":${T0 + 5},"et":${T0 + 20},"c":"ERROR","m":"boom","a":{}}]`,
      T0,
      T0 + 50,
    );

    // More traces than one batch of the migration.
    const many = Array.from({ length: 1200 }, () => traceId());
    await db()
      .batchInsert(
        'telemetry_traces',
        many.map((tid) => ({
          project_id: p.projectId, trace_id: tid, start_time: new Date(T0), end_time: new Date(T0 + 1), duration_ms: 1, span_count: 1,
          root_name: 'bulk', root_attributes: '{}', model: null, models: [], tokens_input: 0, tokens_output: 0, cost: 0, has_error: false,
          spans: `[{"s":"${tid.slice(0, 16)}","p":null,"n":"bulk","k":null,"st":${T0},"et":${T0 + 1},"c":"UNSET","m":null,"a":{}}]`,
          created_at: new Date(T0), updated_at: new Date(T0), partition_start: new Date(T0),
        })),
        400,
      );

    expect(await migrateLatest(db())).toBe(1);
    const bulk = (await db()('telemetry_traces').where({ project_id: p.projectId, root_name: 'bulk' }).select('spans')) as Array<{ spans: string }>;
    expect(bulk).toHaveLength(1200);
    expect(bulk.filter((r) => Object.keys((JSON.parse(r.spans) as object[])[0]!).join() !== READABLE_KEYS.join())).toEqual([]);
    expect(await storedKeys(ingested)).toEqual([READABLE_KEYS, READABLE_KEYS]);
    expect(await storedKeys(legacy)).toEqual([READABLE_KEYS, READABLE_KEYS]);
    expect(await storedText(legacy)).toContain(`"attributes" : ${legacyAttributes}`);
    expect(await getTrace(ingested)).toEqual(served);
    expect((await getTrace(legacy)).spans).toEqual([
      { span_id: a, parent_span_id: null, name: 'legacy.root', start_time: new Date(T0).toISOString(), end_time: new Date(T0 + 50).toISOString(), duration_ms: 50, attributes: JSON.parse(legacyAttributes), status: { code: 'OK' } },
      { span_id: b, parent_span_id: a, name: 'legacy.child', start_time: new Date(T0 + 5).toISOString(), end_time: new Date(T0 + 20).toISOString(), duration_ms: 15, attributes: {}, status: { code: 'ERROR', message: 'boom' } },
    ]);
  });

  it('reads and extends a document a previous release wrote after the migration ran', async () => {
    const tid = traceId();
    const [root, child] = [spanId(), spanId()];
    await insertCompactTrace(tid, `[{"s":"${root}","p":null,"n":"old.root","k":null,"st":${T0},"et":${T0 + 100},"c":"OK","m":null,"a":{"v":1}}]`, T0, T0 + 100);
    expect((await getTrace(tid)).spans).toEqual([
      { span_id: root, parent_span_id: null, name: 'old.root', start_time: new Date(T0).toISOString(), end_time: new Date(T0 + 100).toISOString(), duration_ms: 100, attributes: { v: 1 }, status: { code: 'OK' } },
    ]);

    // Extending the trace merges the stored span by id and stores the whole document readably.
    await ingest(tid, [span({ span_id: child, parent_span_id: root, name: 'new.child', start: T0 + 10, durationMs: 20 })]);
    const detail = await getTrace(tid);
    expect(detail.spans.map((s: { span_id: string; name: string }) => [s.span_id, s.name])).toEqual([
      [root, 'old.root'],
      [child, 'new.child'],
    ]);
    expect(await storedKeys(tid)).toEqual([READABLE_KEYS, READABLE_KEYS]);
  });
});
