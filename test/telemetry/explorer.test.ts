/**
 * The explorer's API (issue 31): listTraces' new filters and sorts, sessions and users, model
 * prices, getMetrics' project filter, and the same reads through the console's door
 * (/v1/console/telemetry/…, a member's session): happy, error and security cases.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { as, signUp, type Member } from '../accounts/helpers.js';
import { bearer, createProjectWithKey, span, traceId, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let p: TelemetryKeyFixture;
let other: TelemetryKeyFixture;
let viewer: Member;
let developer: Member;
let outsider: Member;
const T0 = Date.parse('2026-11-21T00:00:00.000Z');

interface Made {
  traceId: string;
  start: number;
  duration: number;
  cost: number;
  session: string | null;
  user: string | null;
  error: boolean;
  tokensIn: number;
  tokensOut: number;
}
const made: Made[] = [];

const ingest = async (key: string, traces: unknown[]) => {
  const res = await ctx.platform.post('/v1/ingest').set(bearer(key)).send({ traces });
  expect(res.status).toBe(202);
};

beforeAll(async () => {
  ctx = await createTestContext();
  ctx.clock.set(new Date(T0 + 3_600_000));
  p = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Explorer');
  other = await createProjectWithKey(ctx, ctx.orgB.orgId, 'Elsewhere');
  [viewer, developer, outsider] = await Promise.all([
    signUp(ctx, ctx.orgA.orgId, 'viewer'),
    signUp(ctx, ctx.orgA.orgId, 'developer'),
    signUp(ctx, ctx.orgB.orgId, 'owner'),
  ]);
  const traces = [];
  for (let i = 0; i < 30; i++) {
    const tid = traceId();
    const start = T0 + Math.floor(i / 2) * 1000; // pairs share a start: ties by trace id
    const duration = 100 + ((i * 37) % 17) * 10; // repeats: ties by trace id
    const session = i % 3 === 0 ? null : `s-${i % 4}`;
    const user = i % 5 === 0 ? null : `u-${i % 2}`;
    const cost = ((i * 7) % 5) / 1000;
    const error = i % 7 === 0;
    const rootAttrs: Record<string, unknown> = { 'service.name': i % 2 === 0 ? 'even' : 'odd', n: i };
    // OpenTelemetry's spelling on even traces, OpenLLMetry's association properties on odd ones.
    if (session !== null) rootAttrs[i % 2 === 0 ? 'session.id' : 'traceloop.association.properties.session_id'] = session;
    const root = span({ start, durationMs: duration, name: `root-${i}`, attributes: rootAttrs, status: error ? 'ERROR' : 'OK' });
    const childAttrs: Record<string, unknown> = { 'llm.model': 'gpt-4o', 'llm.cost': cost, 'llm.tokens.input': i, 'llm.tokens.output': 2 * i, 'gen_ai.prompt.0.content': 'secret words' };
    if (user !== null) childAttrs[i % 2 === 0 ? 'user.id' : 'enduser.id'] = user;
    const child = span({ parent_span_id: root.span_id, start: start + 1, durationMs: 5, attributes: childAttrs });
    traces.push({ trace_id: tid, spans: [root, child] });
    made.push({ traceId: tid, start, duration, cost, session, user, error, tokensIn: i, tokensOut: 2 * i });
  }
  await ingest(p.key, traces);
  // The session and user lists: the queued changes applied (the worker's job, within a second).
  await ctx.services.telemetry.groupChanges.applyAll();
}, 120_000);

afterAll(async () => {
  await ctx?.close();
});

type Row = { trace_id: string; start_time: string; duration_ms: number; llm_summary: { cost: number }; session_id: string | null; user_id: string | null };

async function all(query: Record<string, string | number>, path = '/v1/traces'): Promise<Row[]> {
  const out: Row[] = [];
  let cursor: string | null = null;
  do {
    const res = await ctx.platform
      .get(path)
      .set(bearer(p.key))
      .query({ ...query, ...(cursor ? { cursor } : {}) });
    expect(res.status).toBe(200);
    out.push(...res.body.data);
    cursor = res.body.pagination.next_cursor;
    expect(res.body.pagination.has_more).toBe(cursor !== null);
  } while (cursor);
  return out;
}

const byId = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

describe('GET /v1/traces: the explorer filters and sorts', () => {
  it('each trace carries its session and user, from OpenTelemetry or OpenLLMetry spellings', async () => {
    const rows = await all({ limit: 100 });
    expect(rows).toHaveLength(30);
    for (const m of made) {
      const row = rows.find((r) => r.trace_id === m.traceId)!;
      expect(row.session_id).toBe(m.session);
      expect(row.user_id).toBe(m.user);
    }
  });

  for (const [sort, key] of [
    ['-start_time', (m: Made) => m.start],
    ['start_time', (m: Made) => m.start],
    ['-duration_ms', (m: Made) => m.duration],
    ['duration_ms', (m: Made) => m.duration],
    ['-cost', (m: Made) => m.cost],
    ['cost', (m: Made) => m.cost],
  ] as const) {
    it(`sort=${sort} pages through every trace once, in order, ties by trace id`, async () => {
      const desc = sort.startsWith('-');
      const expected = [...made].sort((a, b) => (desc ? -1 : 1) * (key(a) - key(b) || byId(a.traceId, b.traceId))).map((m) => m.traceId);
      expect((await all({ sort, limit: 4 })).map((r) => r.trace_id)).toEqual(expected);
    });
  }

  it('a cursor belongs to its sort: sent with another sort it is 400', async () => {
    const first = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ sort: '-cost', limit: 2 });
    const res = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ sort: 'duration_ms', cursor: first.body.pagination.next_cursor });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'cursor' } });
    const legacy = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ limit: 2 });
    expect((await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ sort: 'cost', cursor: legacy.body.pagination.next_cursor })).status).toBe(400);
  });

  it('trace_id finds that trace only', async () => {
    const rows = await all({ trace_id: made[7]!.traceId });
    expect(rows.map((r) => r.trace_id)).toEqual([made[7]!.traceId]);
    expect(await all({ trace_id: traceId() })).toEqual([]);
  });

  it('attribute_key = attribute_value matches any span, compared as text; message content is not searchable', async () => {
    const odd = await all({ attribute_key: 'service.name', attribute_value: 'odd' });
    expect(odd.map((r) => r.trace_id).sort()).toEqual(made.filter((_, i) => i % 2 === 1).map((m) => m.traceId).sort());
    const n = await all({ attribute_key: 'n', attribute_value: '12' });
    expect(n.map((r) => r.trace_id)).toEqual([made[12]!.traceId]);
    const child = await all({ attribute_key: 'llm.model', attribute_value: 'gpt-4o' });
    expect(child).toHaveLength(30);
    expect(await all({ attribute_key: 'gen_ai.prompt.0.content', attribute_value: 'secret words' })).toEqual([]);
  });

  it('attribute_key without attribute_value (or the reverse) is 400', async () => {
    for (const query of [{ attribute_key: 'n' }, { attribute_value: '1' }]) {
      const res = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query(query);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
    }
  });

  it("session_id with sort=start_time is the session's traces in conversation order; user_id a user's traces", async () => {
    const session = await all({ session_id: 's-1', sort: 'start_time' });
    expect(session.map((r) => r.trace_id)).toEqual(
      made.filter((m) => m.session === 's-1').sort((a, b) => a.start - b.start || byId(a.traceId, b.traceId)).map((m) => m.traceId),
    );
    const user = await all({ user_id: 'u-1' });
    expect(user.map((r) => r.trace_id).sort()).toEqual(made.filter((m) => m.user === 'u-1').map((m) => m.traceId).sort());
  });

  it('an unknown sort is 400, and a key is 401 without credentials', async () => {
    expect((await ctx.platform.get('/v1/traces').set(bearer(p.key)).query({ sort: 'name' })).status).toBe(400);
    expect((await ctx.platform.get('/v1/traces').query({ sort: 'cost' })).status).toBe(401);
  });
});

const totals = (ms: Made[]) => ({
  trace_count: ms.length,
  first_start: new Date(Math.min(...ms.map((m) => m.start))).toISOString(),
  last_end: new Date(Math.max(...ms.map((m) => m.start + m.duration))).toISOString(),
  tokens_input: ms.reduce((s, m) => s + m.tokensIn, 0),
  tokens_output: ms.reduce((s, m) => s + m.tokensOut, 0),
  cost: expect.closeTo(ms.reduce((s, m) => s + m.cost, 0), 9),
  error_count: ms.filter((m) => m.error).length,
});

describe('GET /v1/sessions and GET /v1/users', () => {
  it('lists every session with its totals, newest activity first, through the cursor', async () => {
    const rows = (await all({ limit: 1 }, '/v1/sessions')) as unknown as Array<{ session_id: string; last_end: string }>;
    const ids = [...new Set(made.filter((m) => m.session).map((m) => m.session!))];
    expect(rows.map((r) => r.session_id).sort()).toEqual(ids.sort());
    expect(rows.map((r) => r.last_end)).toEqual([...rows.map((r) => r.last_end)].sort().reverse());
    for (const id of ids) {
      const ms = made.filter((m) => m.session === id);
      const users = ms.map((m) => m.user).filter((u): u is string => u !== null).sort();
      expect(rows.find((r) => r.session_id === id)).toEqual({ session_id: id, user_id: users[0] ?? null, ...totals(ms) });
    }
  });

  it("user_id narrows to one user's sessions", async () => {
    const rows = (await all({ user_id: 'u-0' }, '/v1/sessions')) as unknown as Array<{ session_id: string }>;
    expect(rows.map((r) => r.session_id).sort()).toEqual([...new Set(made.filter((m) => m.user === 'u-0' && m.session).map((m) => m.session!))].sort());
  });

  it('lists every user with sessions and totals', async () => {
    const rows = await all({ limit: 1 }, '/v1/users');
    expect(rows).toHaveLength(2);
    for (const id of ['u-0', 'u-1']) {
      const ms = made.filter((m) => m.user === id);
      expect(rows.find((r) => r.user_id === id)).toEqual({
        user_id: id,
        session_count: new Set(ms.filter((m) => m.session).map((m) => m.session)).size,
        ...totals(ms),
      });
    }
  });

  it('a range lists the sessions and users active in it, with totals over all their traces; a bad range or cursor is 400; no key is 401', async () => {
    // Semantics since the rollups (migration 0210): listed when first_start..last_end overlaps the
    // range; totals are the whole session's (user's), not clipped to the range.
    const end = (m: Made) => m.start + m.duration;
    for (const [from, to] of [
      [T0 + 10_000, undefined],
      [T0 + 10_050, T0 + 12_000],
      [undefined, T0 + 3_000],
      [T0 + 60_000, undefined],
    ] as Array<[number | undefined, number | undefined]>) {
      const query = { ...(from !== undefined ? { start_time: new Date(from).toISOString() } : {}), ...(to !== undefined ? { end_time: new Date(to).toISOString() } : {}) };
      const overlaps = (ms: Made[]) => Math.max(...ms.map(end)) >= (from ?? -Infinity) && Math.min(...ms.map((m) => m.start)) <= (to ?? Infinity);
      const sessions = (await all({ ...query, limit: 2 }, '/v1/sessions')) as unknown as Array<{ session_id: string; trace_count: number }>;
      const sessionIds = [...new Set(made.filter((m) => m.session).map((m) => m.session!))].filter((id) => overlaps(made.filter((m) => m.session === id)));
      expect(sessions.map((r) => r.session_id).sort()).toEqual(sessionIds.sort());
      for (const r of sessions) expect(r.trace_count).toBe(made.filter((m) => m.session === r.session_id).length);
      const users = (await all({ ...query, limit: 1 }, '/v1/users')) as unknown as Array<{ user_id: string; trace_count: number }>;
      const userIds = ['u-0', 'u-1'].filter((id) => overlaps(made.filter((m) => m.user === id)));
      expect(users.map((r) => r.user_id).sort()).toEqual(userIds);
      for (const r of users) expect(r.trace_count).toBe(made.filter((m) => m.user === r.user_id).length);
    }
    for (const path of ['/v1/sessions', '/v1/users']) {
      expect((await ctx.platform.get(path).set(bearer(p.key)).query({ start_time: new Date(T0).toISOString(), end_time: new Date(T0).toISOString() })).status).toBe(400);
      expect((await ctx.platform.get(path).set(bearer(p.key)).query({ cursor: 'bm90LWpzb24' })).status).toBe(400);
      expect((await ctx.platform.get(path)).status).toBe(401);
    }
  });
});

describe('model prices', () => {
  const path = () => `/v1/projects/${p.projectId}/model-prices`;

  it('lists the built-in table with its sources, sorted by model', async () => {
    const res = await ctx.platform.get(path()).set(bearer(p.key));
    expect(res.status).toBe(200);
    expect(res.body.data).toContainEqual({ model: 'gpt-4o', input_per_million: 2.5, output_per_million: 10, source: 'default' });
    const models = res.body.data.map((e: { model: string }) => e.model);
    expect(models).toEqual([...models].sort());
  });

  it("an override prices the project's new spans (not stored ones, not another project's), and deleting it restores the table", async () => {
    const set = await ctx.platform.put(path()).set(bearer(p.key)).send({ model: 'my-finetune', input_per_million: 3, output_per_million: 12 });
    expect(set.status).toBe(200);
    expect(set.body.data).toEqual({ model: 'my-finetune', input_per_million: 3, output_per_million: 12, source: 'project' });
    const over = await ctx.platform.put(path()).set(bearer(p.key)).send({ model: 'gpt-4o', input_per_million: 1, output_per_million: 1 });
    expect(over.status).toBe(200);
    const listed = await ctx.platform.get(path()).set(bearer(p.key));
    expect(listed.body.data).toContainEqual({ model: 'gpt-4o', input_per_million: 1, output_per_million: 1, source: 'project' });

    const tid = traceId();
    await ingest(p.key, [{ trace_id: tid, spans: [span({ start: T0 + 50_000, durationMs: 10, attributes: { 'llm.model': 'my-finetune-v2', 'llm.tokens.input': 1_000_000, 'llm.tokens.output': 1_000_000 } })] }]);
    const trace = await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(p.key));
    expect(trace.body.data.spans[0].attributes['llm.cost']).toBe(15);
    // Another organization's project keeps the deployment's table.
    const elsewhere = traceId();
    await ingest(other.key, [{ trace_id: elsewhere, spans: [span({ start: T0 + 50_000, durationMs: 10, attributes: { 'llm.model': 'gpt-4o', 'llm.tokens.input': 1_000_000 } })] }]);
    expect((await ctx.platform.get(`/v1/traces/${elsewhere}`).set(bearer(other.key))).body.data.spans[0].attributes['llm.cost']).toBe(2.5);

    const del = await ctx.platform.delete(path()).set(bearer(p.key)).query({ model: 'gpt-4o' });
    expect(del.status).toBe(200);
    expect(del.body.data).toEqual({ model: 'gpt-4o', deleted: true });
    expect((await ctx.platform.get(path()).set(bearer(p.key))).body.data).toContainEqual({ model: 'gpt-4o', input_per_million: 2.5, output_per_million: 10, source: 'default' });
    expect((await ctx.platform.delete(path()).set(bearer(p.key)).query({ model: 'gpt-4o' })).status).toBe(404);
  });

  it('another organization\'s project is 404 for every method; bad bodies are 400; no key is 401', async () => {
    const foreign = `/v1/projects/${other.projectId}/model-prices`;
    expect((await ctx.platform.get(foreign).set(bearer(p.key))).status).toBe(404);
    expect((await ctx.platform.put(foreign).set(bearer(p.key)).send({ model: 'x', input_per_million: 1, output_per_million: 1 })).status).toBe(404);
    expect((await ctx.platform.delete(foreign).set(bearer(p.key)).query({ model: 'x' })).status).toBe(404);
    for (const body of [{ model: 'x', input_per_million: -1, output_per_million: 1 }, { model: '', input_per_million: 1, output_per_million: 1 }, { model: 'x', input_per_million: 1 }, { model: 'x', input_per_million: 1, output_per_million: 1, extra: 1 }]) {
      expect((await ctx.platform.put(path()).set(bearer(p.key)).send(body)).status).toBe(400);
    }
    expect((await ctx.platform.delete(path()).set(bearer(p.key))).status).toBe(400);
    expect((await ctx.platform.put(path()).set(bearer(p.key)).set('Content-Type', 'application/json').send(`{"model":"${'x'.repeat(70_000)}"}`)).status).toBe(413);
    expect((await ctx.platform.get(path())).status).toBe(401);
    expect((await ctx.platform.put(path()).send({ model: 'x', input_per_million: 1, output_per_million: 1 })).status).toBe(401);
    expect((await ctx.platform.delete(path()).query({ model: 'x' })).status).toBe(401);
  });

  it('a project holds at most 500 overrides (409); replacing one of them still works', async () => {
    const q = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Many prices');
    const now = new Date();
    await ctx.testDb.database.db('telemetry_model_prices').insert(
      Array.from({ length: 500 }, (_, i) => ({ project_id: q.projectId, model: `m-${i}`, input_per_million: 1, output_per_million: 1, created_at: now, updated_at: now })),
    );
    const res = await ctx.platform.put(`/v1/projects/${q.projectId}/model-prices`).set(bearer(q.key)).send({ model: 'one-more', input_per_million: 1, output_per_million: 1 });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'conflict', details: { limit: 500 } });
    expect((await ctx.platform.put(`/v1/projects/${q.projectId}/model-prices`).set(bearer(q.key)).send({ model: 'm-3', input_per_million: 2, output_per_million: 2 })).status).toBe(200);
  });
});

describe('GET /v1/metrics?project_id', () => {
  it("counts only that project's model calls; another organization's project is 404", async () => {
    const range = { metric: 'llm.requests.total', start_time: new Date(T0).toISOString(), end_time: new Date(T0 + 60_000).toISOString(), interval: '1h' };
    const res = await ctx.platform.get('/v1/metrics').set(bearer(p.key)).query({ ...range, project_id: p.projectId });
    expect(res.status).toBe(200);
    expect(res.body.data.series[0].datapoints[0].value).toBe(31);
    expect((await ctx.platform.get('/v1/metrics').set(bearer(p.key)).query({ ...range, project_id: other.projectId })).status).toBe(404);
  });
});

describe('the console door: /v1/console/telemetry-projects/{project_id}/…', () => {
  const base = () => `/v1/console/telemetry-projects/${p.projectId}`;

  it('a viewer reads the traces, a trace, sessions, users, metrics and prices, with the figures of the telemetry API', async () => {

    const query = { sort: '-cost', limit: 5, status: 'ok' };
    const viaConsole = await as(viewer, ctx.merchant.get(`${base()}/traces`).query(query));
    const viaApi = await ctx.platform.get('/v1/traces').set(bearer(p.key)).query(query);
    expect(viaConsole.status).toBe(200);
    expect(viaConsole.body.data.items).toEqual(viaApi.body.data);
    expect(viaConsole.body.data.pagination).toEqual(viaApi.body.pagination);

    const trace = await as(viewer, ctx.merchant.get(`${base()}/traces/${made[3]!.traceId}`));
    expect(trace.status).toBe(200);
    expect(trace.body.data).toEqual((await ctx.platform.get(`/v1/traces/${made[3]!.traceId}`).set(bearer(p.key))).body.data);

    for (const what of ['sessions', 'users'] as const) {
      const c = await as(viewer, ctx.merchant.get(`${base()}/${what}`));
      expect(c.status).toBe(200);
      expect(c.body.data.items).toEqual((await ctx.platform.get(`/v1/${what}`).set(bearer(p.key))).body.data);
    }

    const range = { metric: 'llm.cost.total', start_time: new Date(T0).toISOString(), end_time: new Date(T0 + 3_600_000).toISOString(), interval: '5m', group_by: 'model' };
    const metrics = await as(viewer, ctx.merchant.get(`${base()}/metrics`).query(range));
    expect(metrics.status).toBe(200);
    expect(metrics.body.data).toEqual((await ctx.platform.get('/v1/metrics').set(bearer(p.key)).query({ ...range, project_id: p.projectId })).body.data);

    const prices = await as(viewer, ctx.merchant.get(`${base()}/model-prices`));
    expect(prices.status).toBe(200);
    expect(prices.body.data).toEqual((await ctx.platform.get(`/v1/projects/${p.projectId}/model-prices`).set(bearer(p.key))).body.data);
  });

  it('a developer sets and removes a price; a viewer may not (403)', async () => {
    const body = { model: 'console-model', input_per_million: 4, output_per_million: 8 };
    expect((await as(viewer, ctx.merchant.put(`${base()}/model-prices`).send(body))).status).toBe(403);
    const set = await as(developer, ctx.merchant.put(`${base()}/model-prices`).send(body));
    expect(set.status).toBe(200);
    expect(set.body.data).toEqual({ ...body, source: 'project' });
    expect((await as(viewer, ctx.merchant.delete(`${base()}/model-prices`).query({ model: 'console-model' }))).status).toBe(403);
    const del = await as(developer, ctx.merchant.delete(`${base()}/model-prices`).query({ model: 'console-model' }));
    expect(del.status).toBe(200);
    expect(del.body.data).toEqual({ model: 'console-model', deleted: true });
    expect((await as(developer, ctx.merchant.delete(`${base()}/model-prices`).query({ model: 'console-model' }))).status).toBe(404);
  });

  it('a write without the CSRF token is 403; a body of the wrong type 415, too large 413; at the limit 409', async () => {
    const put = ctx.merchant.put(`${base()}/model-prices`).set('Cookie', developer.cookie).set('Origin', 'http://merchant.test');
    expect((await put.send({ model: 'x', input_per_million: 1, output_per_million: 1 })).status).toBe(403);
    expect((await as(developer, ctx.merchant.put(`${base()}/model-prices`)).set('Content-Type', 'text/plain').send('model=x')).status).toBe(415);
    expect((await as(developer, ctx.merchant.put(`${base()}/model-prices`)).set('Content-Type', 'application/json').send(`{"model":"${'x'.repeat(70_000)}"}`)).status).toBe(413);
    const q = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Console many prices');
    const now = new Date();
    await ctx.testDb.database.db('telemetry_model_prices').insert(
      Array.from({ length: 500 }, (_, i) => ({ project_id: q.projectId, model: `m-${i}`, input_per_million: 1, output_per_million: 1, created_at: now, updated_at: now })),
    );
    const full = await as(developer, ctx.merchant.put(`/v1/console/telemetry-projects/${q.projectId}/model-prices`).send({ model: 'one-more', input_per_million: 1, output_per_million: 1 }));
    expect(full.status).toBe(409);
  });

  it("another organization's project is 404 on every operation; a trace it does not hold is 404", async () => {
    const foreign = `/v1/console/telemetry-projects/${other.projectId}`;
    for (const path of ['traces', `traces/${made[0]!.traceId}`, 'sessions', 'users', 'model-prices']) {
      expect((await as(viewer, ctx.merchant.get(`${foreign}/${path}`))).status).toBe(404);
    }
    expect((await as(viewer, ctx.merchant.get(`${foreign}/metrics`).query({ metric: 'llm.requests.total', start_time: new Date(T0).toISOString(), end_time: new Date(T0 + 60_000).toISOString() }))).status).toBe(404);
    // The metrics reads start with the path's id before the project is found: an unknown id, and one
    // no project id looks like (the path takes any token), are still 404.
    for (const id of ['PRJ_000000000000000000000000', 'not-a-project', 'a{b}"c']) {
      const res = await as(viewer, ctx.merchant.get(`/v1/console/telemetry-projects/${encodeURIComponent(id)}/metrics`).query({ metric: 'llm.requests.total', start_time: new Date(T0).toISOString(), end_time: new Date(T0 + 60_000).toISOString() }));
      expect(res.status, id).toBe(404);
    }
    expect((await as(developer, ctx.merchant.put(`${foreign}/model-prices`).send({ model: 'x', input_per_million: 1, output_per_million: 1 }))).status).toBe(404);
    // The other organization's owner cannot read ours either.
    expect((await as(outsider, ctx.merchant.get(`${base()}/traces`))).status).toBe(404);
    expect((await as(viewer, ctx.merchant.get(`${base()}/traces/${traceId()}`))).status).toBe(404);
  });

  it('without a session every operation is 401; bad queries are 400', async () => {
    for (const path of [`${base()}/traces`, `${base()}/traces/${made[0]!.traceId}`, `${base()}/sessions`, `${base()}/users`, `${base()}/model-prices`]) {
      expect((await ctx.merchant.get(path)).status).toBe(401);
    }
    expect((await ctx.merchant.get(`${base()}/metrics`).query({ metric: 'llm.requests.total', start_time: new Date(T0).toISOString(), end_time: new Date(T0 + 60_000).toISOString() })).status).toBe(401);
    expect((await ctx.merchant.put(`${base()}/model-prices`).send({ model: 'x', input_per_million: 1, output_per_million: 1 })).status).toBe(401);
    expect((await ctx.merchant.delete(`${base()}/model-prices`).query({ model: 'x' })).status).toBe(401);

    expect((await as(viewer, ctx.merchant.get(`${base()}/traces`).query({ sort: 'bogus' }))).status).toBe(400);
    expect((await as(viewer, ctx.merchant.get(`${base()}/traces/not-hex`))).status).toBe(400);
    expect((await as(viewer, ctx.merchant.get(`${base()}/sessions`).query({ cursor: '!!' }))).status).toBe(400);
    expect((await as(viewer, ctx.merchant.get(`${base()}/users`).query({ limit: 0 }))).status).toBe(400);
    expect((await as(viewer, ctx.merchant.get(`${base()}/metrics`).query({ metric: 'nope', start_time: new Date(T0).toISOString(), end_time: new Date(T0 + 60_000).toISOString() }))).status).toBe(400);
    expect((await as(viewer, ctx.merchant.get(`${base()}/model-prices`).query({ x: 1 }))).status).toBe(400);
    expect((await as(developer, ctx.merchant.put(`${base()}/model-prices`).send({ model: 'x' }))).status).toBe(400);
    expect((await as(developer, ctx.merchant.delete(`${base()}/model-prices`))).status).toBe(400);
  });
});
