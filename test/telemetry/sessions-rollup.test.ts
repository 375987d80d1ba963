/**
 * The session and user rollups (migration 0210) stay equal to a GROUP BY over telemetry_traces
 * once the queued changes (0211) are applied: random ingest in several batches (spans arriving
 * late, re-sent spans moving a trace in time, a trace's session and user changing), two batches
 * at once (on PostgreSQL really concurrent), the changes of one trace applied in queue order, two
 * appliers at once, retention with changes still queued, project deletion; the lists read them;
 * projects stay apart.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateLatest } from '../../src/db/knex.js';
import { migrationSource } from '../../src/db/migrations/index.js';
import { APPLIER_LOCK, KnexGroupChangeRepository } from '../../src/telemetry/groups.repository.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, prng, spanId, traceId, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let a: TelemetryKeyFixture;
let b: TelemetryKeyFixture;
const DAY = 86_400_000;
const NOW = Date.parse('2026-11-22T09:00:00.000Z');
const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

beforeAll(async () => {
  ctx = await createTestContext();
  ctx.clock.set(new Date(NOW));
  a = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Sessions A');
  b = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Sessions B');
}, 120_000);

afterAll(async () => {
  await ctx?.close();
});

const db = () => ctx.testDb.database.db;

interface SessionRow {
  project_id: string;
  session_id: string;
  user_id: string | null;
  first_start: string;
  last_end: string;
  trace_count: number;
  tokens_input: number;
  tokens_output: number;
  cost: number;
  error_count: number;
}
interface UserRow {
  project_id: string;
  user_id: string;
  session_count: number;
  first_start: string;
  last_end: string;
  trace_count: number;
  tokens_input: number;
  tokens_output: number;
  cost: number;
  error_count: number;
}

const norm = <T extends Record<string, unknown>>(r: T): T => {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(r)) {
    out[k] = v instanceof Date ? v.toISOString() : typeof v === 'string' && /^(first_start|last_end)$/.test(k) ? new Date(v).toISOString() : /count|tokens/.test(k) ? Number(v) : k === 'cost' ? Math.round(Number(v) * 1e9) / 1e9 : v;
  }
  return out as T;
};

/** The rollups as stored, and as recomputed from telemetry_traces (the definition). */
async function rollups(): Promise<{ stored: { sessions: SessionRow[]; users: UserRow[] }; expected: { sessions: SessionRow[]; users: UserRow[] } }> {
  const sessions = (
    await db().raw(`SELECT project_id, session_id, user_id, first_start, last_end, trace_count, tokens_input, tokens_output, cost, error_count
                      FROM telemetry_sessions ORDER BY project_id, session_id`)
  ).rows.map(norm) as SessionRow[];
  const users = (
    await db().raw(`SELECT project_id, user_id, session_count, first_start, last_end, trace_count, tokens_input, tokens_output, cost, error_count
                      FROM telemetry_users ORDER BY project_id, user_id`)
  ).rows.map(norm) as UserRow[];
  const expectedSessions = (
    await db().raw(`SELECT project_id, session_id, min(user_id) AS user_id, min(start_time) AS first_start, max(end_time) AS last_end,
                           count(*) AS trace_count, sum(tokens_input) AS tokens_input, sum(tokens_output) AS tokens_output, sum(cost) AS cost,
                           count(*) FILTER (WHERE has_error) AS error_count
                      FROM telemetry_traces WHERE session_id IS NOT NULL GROUP BY project_id, session_id ORDER BY project_id, session_id`)
  ).rows.map(norm) as SessionRow[];
  const expectedUsers = (
    await db().raw(`SELECT project_id, user_id, 0 AS session_count, min(start_time) AS first_start, max(end_time) AS last_end,
                           count(*) AS trace_count, sum(tokens_input) AS tokens_input, sum(tokens_output) AS tokens_output, sum(cost) AS cost,
                           count(*) FILTER (WHERE has_error) AS error_count
                      FROM telemetry_traces WHERE user_id IS NOT NULL GROUP BY project_id, user_id ORDER BY project_id, user_id`)
  ).rows.map(norm) as UserRow[];
  for (const u of expectedUsers) u.session_count = expectedSessions.filter((s) => s.project_id === u.project_id && s.user_id === u.user_id).length;
  return { stored: { sessions, users }, expected: { sessions: expectedSessions, users: expectedUsers } };
}

/** Applies every queued change (what the worker's job does within about a second). */
const drain = () => ctx.services.telemetry.groupChanges.applyAll();
const queued = async () => Number((await db()('telemetry_group_changes').count({ n: '*' }).first())!.n);

async function expectExact(): Promise<void> {
  await drain();
  expect(await queued()).toBe(0);
  const { stored, expected } = await rollups();
  expect(stored.sessions).toEqual(expected.sessions);
  expect(stored.users).toEqual(expected.users);
}

const SESSIONS = ['s-a', 's-b', 's-c', 's-d'];
const USERS = ['u-1', 'u-2', 'u-3'];

interface SpanBody {
  span_id: string;
  parent_span_id?: string;
  name: string;
  start_time: string;
  end_time: string;
  attributes: Record<string, unknown>;
  status?: { code: string };
}

/** A random span of trace `root`'s tree: sometimes a session and a user, a model call, an error. */
function randomSpan(rand: () => number, base: number, root: string | null, id = spanId()): SpanBody {
  const start = base + Math.floor(rand() * 60_000);
  const attributes: Record<string, unknown> = {};
  if (rand() < 0.5) attributes['session.id'] = SESSIONS[Math.floor(rand() * SESSIONS.length)];
  if (rand() < 0.5) attributes[rand() < 0.5 ? 'user.id' : 'enduser.id'] = USERS[Math.floor(rand() * USERS.length)];
  if (rand() < 0.6) Object.assign(attributes, { 'llm.model': 'gpt-4o', 'llm.tokens.input': 1 + Math.floor(rand() * 500), 'llm.tokens.output': Math.floor(rand() * 200), 'llm.cost': Math.floor(rand() * 1000) / 100_000 });
  return {
    span_id: id,
    ...(root !== null ? { parent_span_id: root } : {}),
    name: root === null ? 'root' : 'child',
    start_time: new Date(start).toISOString(),
    end_time: new Date(start + 1 + Math.floor(rand() * 5_000)).toISOString(),
    attributes,
    ...(rand() < 0.15 ? { status: { code: 'ERROR' } } : {}),
  };
}

const ingest = async (p: TelemetryKeyFixture, traces: Array<{ trace_id: string; spans: SpanBody[] }>) => {
  const res = await ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({ traces });
  expect(res.status).toBe(202);
};

/** Traces whose spans (root included, re-sent ones too) arrive over `batches` batches in random order. */
function scenario(rand: () => number, traces: number, base: number, batches: number) {
  const pending: Array<{ trace_id: string; span: SpanBody }> = [];
  for (let t = 0; t < traces; t++) {
    const tid = traceId();
    const root = randomSpan(rand, base + t * 1000, null);
    pending.push({ trace_id: tid, span: root });
    const children = 1 + Math.floor(rand() * 3);
    for (let c = 0; c < children; c++) {
      const child = randomSpan(rand, base + t * 1000, root.span_id);
      pending.push({ trace_id: tid, span: child });
      // Re-sent later with other times and attributes: the trace may shrink, move, change session or user.
      if (rand() < 0.3) pending.push({ trace_id: tid, span: randomSpan(rand, base + t * 1000 + 30_000, root.span_id, child.span_id) });
    }
    if (rand() < 0.2) pending.push({ trace_id: tid, span: randomSpan(rand, base + t * 1000 - 20_000, null, root.span_id) });
  }
  const out: Array<Array<{ trace_id: string; spans: SpanBody[] }>> = Array.from({ length: batches }, () => []);
  // In order per span id (a re-send comes after the first send), in random batches otherwise.
  let batch = 0;
  for (const item of pending) {
    batch = Math.min(batches - 1, batch + (rand() < 0.3 ? 1 : 0));
    const target = rand() < 0.5 ? batch : Math.min(batches - 1, batch + Math.floor(rand() * (batches - batch)));
    const list = out[target]!;
    let trace = list.find((x) => x.trace_id === item.trace_id);
    if (!trace) list.push((trace = { trace_id: item.trace_id, spans: [] }));
    const same = trace.spans.findIndex((s) => s.span_id === item.span.span_id);
    if (same >= 0) trace.spans[same] = item.span;
    else trace.spans.push(item.span);
  }
  return out.filter((x) => x.length > 0);
}

describe('session and user rollups', () => {
  it('equal a recomputation from the traces after random ingest in batches (late spans, re-sent spans, sessions and users changing)', async () => {
    const rand = prng(7);
    for (let round = 0; round < 8; round++) {
      for (const p of [a, b]) {
        for (const batch of scenario(rand, 10, NOW - 3 * DAY + round * 120_000, 4)) {
          await ingest(p, batch);
          await expectExact();
        }
      }
    }
    const { stored } = await rollups();
    expect(stored.sessions.length).toBeGreaterThan(4);
    expect(stored.users.length).toBeGreaterThan(3);
  }, 120_000);

  it(`equal it after two batches at once, ${onPostgres ? 50 : 10} times (concurrent on PostgreSQL)`, async () => {
    const rand = prng(11);
    for (let i = 0; i < (onPostgres ? 50 : 10); i++) {
      // Both batches extend the same traces, and share sessions and users.
      const [first, second] = scenario(rand, 6, NOW - 2 * DAY + i * 60_000, 2);
      const shared = scenario(rand, 3, NOW - 2 * DAY + i * 60_000, 2);
      await Promise.all([ingest(a, [...(first ?? []), ...(shared[0] ?? [])]), ingest(a, [...(second ?? []), ...(shared[1] ?? [])])]);
      await expectExact();
    }
  }, 300_000);

  it('the lists read them: every session and user once, newest activity first, with the stored totals; projects apart', async () => {
    const { expected } = await rollups();
    for (const p of [a, b]) {
      const sessions = expected.sessions.filter((s) => s.project_id === p.projectId);
      const order = (x: { last_end: string; id: string }, y: { last_end: string; id: string }) => (x.last_end < y.last_end ? 1 : x.last_end > y.last_end ? -1 : x.id < y.id ? 1 : -1);
      const listed: Array<Record<string, unknown>> = [];
      for (const [path, out] of [
        ['/v1/sessions', listed],
      ] as const) {
        let cursor: string | null = null;
        do {
          const res = await ctx.platform.get(path).set(bearer(p.key)).query({ limit: 3, ...(cursor ? { cursor } : {}) });
          expect(res.status).toBe(200);
          out.push(...res.body.data);
          cursor = res.body.pagination.next_cursor;
        } while (cursor);
      }
      const want = sessions
        .map((s) => ({ ...s, id: s.session_id }))
        .sort(order)
        .map(({ project_id: _p, id: _i, ...s }) => ({ ...s, cost: expect.closeTo(s.cost, 9) }));
      expect(listed).toEqual(want);
      const users = (await ctx.platform.get('/v1/users').set(bearer(p.key)).query({ limit: 100 })).body.data as UserRow[];
      const wantUsers = expected.users
        .filter((u) => u.project_id === p.projectId)
        .map((u) => ({ ...u, id: u.user_id }))
        .sort(order)
        .map(({ project_id: _p, id: _i, ...u }) => ({ ...u, cost: expect.closeTo(u.cost, 9) }));
      expect(users).toEqual(wantUsers);
      // user_id: the sessions whose user that is, as many as the user's session_count.
      for (const u of wantUsers) {
        const mine = (await ctx.platform.get('/v1/sessions').set(bearer(p.key)).query({ user_id: u.user_id, limit: 100 })).body.data as SessionRow[];
        expect(mine.map((s) => s.session_id).sort()).toEqual(sessions.filter((s) => s.user_id === u.user_id).map((s) => s.session_id).sort());
        expect(mine).toHaveLength(u.session_count);
      }
    }
    // Ranges (past ones too, where the active sessions at end_time and the ended ones are merged):
    // the sessions whose activity overlaps it, in order, through the cursor.
    const rand = prng(5);
    const all = expected.sessions.filter((x) => x.project_id === a.projectId);
    const times = all.flatMap((x) => [Date.parse(x.first_start), Date.parse(x.last_end)]).sort((x, y) => x - y);
    for (let i = 0; i < 12; i++) {
      const pick = () => times[Math.floor(rand() * times.length)]! + Math.floor(rand() * 3) - 1;
      const [from, to] = [pick(), pick()].sort((x, y) => x - y) as [number, number];
      if (to <= from) continue;
      const query = { ...(i % 3 !== 0 ? { start_time: new Date(from).toISOString() } : {}), ...(i % 3 !== 1 ? { end_time: new Date(to).toISOString() } : {}) };
      const got: SessionRow[] = [];
      let cursor: string | null = null;
      do {
        const res = await ctx.platform.get('/v1/sessions').set(bearer(a.key)).query({ ...query, limit: 2, ...(cursor ? { cursor } : {}) });
        expect(res.status).toBe(200);
        got.push(...res.body.data);
        cursor = res.body.pagination.next_cursor;
      } while (cursor);
      const want = all
        .filter((x) => (query.start_time === undefined || x.last_end >= query.start_time) && (query.end_time === undefined || x.first_start <= query.end_time))
        .sort((x, y) => (x.last_end < y.last_end ? 1 : x.last_end > y.last_end ? -1 : x.session_id < y.session_id ? 1 : -1))
        .map((x) => x.session_id);
      expect(got.map((x) => x.session_id)).toEqual(want);
    }
    // The same session ids in both projects, with each project's own totals.
    const ids = (p: TelemetryKeyFixture) => expected.sessions.filter((s) => s.project_id === p.projectId).map((s) => s.session_id);
    expect(ids(a).filter((id) => ids(b).includes(id)).length).toBeGreaterThan(0);
  }, 120_000);

  it('retention takes expired traces out of them (sessions and users emptied are gone); project deletion deletes them', async () => {
    // Older traces, some in the same sessions as newer ones.
    const rand = prng(23);
    for (let day = 12; day >= 8; day--) for (const batch of scenario(rand, 8, NOW - day * DAY, 2)) await ingest(b, batch);
    await expectExact();
    const before = (await rollups()).stored.sessions.filter((s) => s.project_id === b.projectId);
    expect((await ctx.platform.patch(`/v1/projects/${b.projectId}`).set(bearer(b.key)).send({ settings: { data_retention_days: 10 } })).status).toBe(200);
    while (await ctx.services.telemetry.retention.run());
    await expectExact();
    const after = (await rollups()).stored.sessions.filter((s) => s.project_id === b.projectId);
    expect(after.reduce((n, s) => n + s.trace_count, 0)).toBeLessThan(before.reduce((n, s) => n + s.trace_count, 0));
    expect(after.length).toBeGreaterThan(0);

    await ctx.admin.post(`/v1/telemetry-keys/${b.keyId}/revoke`);
    expect((await ctx.platform.delete(`/v1/projects/${b.projectId}`).set(bearer(a.key))).status).toBe(200);
    for (const table of ['telemetry_sessions', 'telemetry_users']) {
      expect(Number((await db()(table).where({ project_id: b.projectId }).count({ n: '*' }).first())!.n)).toBe(0);
      expect(Number((await db()(table).where({ project_id: a.projectId }).count({ n: '*' }).first())!.n)).toBeGreaterThan(0);
    }
    await expectExact();
  }, 120_000);

  it('a trace the rollups never counted (an earlier release wrote it) is extended without error; migration 0210 rebuilds them from the traces', async () => {
    const tid = traceId();
    const root = { span_id: spanId(), name: 'root', start_time: new Date(NOW - DAY).toISOString(), end_time: new Date(NOW - DAY + 100).toISOString(), attributes: { 'session.id': 'legacy', 'user.id': 'legacy-user' } };
    await ingest(a, [{ trace_id: tid, spans: [root] }]);
    await drain();
    // As if written before the rollups existed.
    await db()('telemetry_sessions').where({ project_id: a.projectId, session_id: 'legacy' }).delete();
    await db()('telemetry_users').where({ project_id: a.projectId, user_id: 'legacy-user' }).delete();
    // The trace moves to another session and user: a removal from rows that do not exist.
    await ingest(a, [{ trace_id: tid, spans: [{ ...root, start_time: new Date(NOW - DAY - 50).toISOString(), attributes: { 'session.id': 'moved', 'user.id': 'moved-user' } }] }]);
    await drain();
    expect(await db()('telemetry_sessions').where({ project_id: a.projectId, session_id: 'legacy' }).first()).toBeUndefined();
    expect(await db()('telemetry_users').where('trace_count', '<=', 0).first()).toBeUndefined();
    expect(await db()('telemetry_sessions').where('trace_count', '<=', 0).first()).toBeUndefined();

    // A session's user passing (on recompute) to a user the rollups never counted: no row with no trace.
    const [t1, t2] = [traceId(), traceId()];
    const at = (ms: number, attributes: Record<string, string>) => ({ span_id: spanId(), name: 'root', start_time: new Date(ms).toISOString(), end_time: new Date(ms + 10).toISOString(), attributes });
    const first = at(NOW - DAY + 1000, { 'session.id': 'shared', 'user.id': 'aa-user' });
    await ingest(a, [
      { trace_id: t1, spans: [first] },
      { trace_id: t2, spans: [at(NOW - DAY + 2000, { 'session.id': 'shared', 'user.id': 'bb-user' })] },
    ]);
    await drain();
    await db()('telemetry_users').where({ project_id: a.projectId, user_id: 'bb-user' }).delete();
    await ingest(a, [{ trace_id: t1, spans: [{ ...first, attributes: { 'session.id': 'elsewhere', 'user.id': 'aa-user' } }] }]);
    await drain();
    expect(await db()('telemetry_users').where('trace_count', '<=', 0).first()).toBeUndefined();
    expect((await ctx.platform.get('/v1/users').set(bearer(a.key)).query({ limit: 100 })).status).toBe(200);

    await db().migrate.down({ migrationSource, name: '0210_telemetry_sessions' });
    expect(await migrateLatest(db())).toBe(1);
    await expectExact();
    const { stored } = await rollups();
    expect(stored.sessions.find((s) => s.session_id === 'moved')).toMatchObject({ user_id: 'moved-user', trace_count: 1 });
  }, 120_000);

  it('ingest queues one row per batch and leaves the rollups alone; the job applies them, full chunks at once', async () => {
    await drain();
    const sessionsBefore = (await rollups()).stored.sessions;
    const rand = prng(31);
    const batches = scenario(rand, 6, NOW - 4 * DAY, 3);
    for (const batch of batches) await ingest(a, batch);
    expect(await queued()).toBe(batches.length);
    expect((await rollups()).stored.sessions).toEqual(sessionsBefore);
    const job = ctx.services.telemetry.groupChanges;
    expect(await job.run()).toBe(false); // fewer than a chunk: nothing more to do at once
    expect(await queued()).toBe(0);
    await expectExact();
    expect(await job.run()).toBe(false);
  }, 60_000);

  it('applies the changes of one trace in queue order (a trace moved in time and to another session by a later batch)', async () => {
    await drain();
    const repo = new KnexGroupChangeRepository(db());
    const tid = traceId();
    const root = { span_id: spanId(), name: 'root', start_time: new Date(NOW - 5 * DAY).toISOString(), end_time: new Date(NOW - 5 * DAY + 100).toISOString(), attributes: { 'session.id': 'ordered', 'user.id': 'ordered-user' } };
    // Batch 1: the trace at t; batch 2: re-sent root later (the trace's old start and end no longer
    // held); batch 3: the trace moved to another session and user.
    await ingest(a, [{ trace_id: tid, spans: [root] }]);
    await ingest(a, [{ trace_id: tid, spans: [{ ...root, start_time: new Date(NOW - 5 * DAY + 5000).toISOString(), end_time: new Date(NOW - 5 * DAY + 6000).toISOString() }] }]);
    await ingest(a, [{ trace_id: tid, spans: [{ ...root, start_time: new Date(NOW - 5 * DAY + 7000).toISOString(), end_time: new Date(NOW - 5 * DAY + 8000).toISOString(), attributes: { 'session.id': 'ordered-2', 'user.id': 'ordered-user-2' } }] }]);
    expect(await queued()).toBe(3);
    // One batch at a time, oldest first (in the reverse order the session 'ordered' would be
    // recreated by the first batch's insertion, applied last, and left with one trace).
    expect(await repo.applyQueued(1)).toBe(1);
    expect(await repo.applyQueued(1)).toBe(1);
    expect(await repo.applyQueued(1)).toBe(1);
    await expectExact();
    expect(await db()('telemetry_sessions').where({ project_id: a.projectId, session_id: 'ordered' }).first()).toBeUndefined();
    // The same three batches merged into one application.
    const t2 = traceId();
    await ingest(a, [{ trace_id: t2, spans: [{ ...root, attributes: { 'session.id': 'merged', 'user.id': 'merged-user' } }] }]);
    await ingest(a, [{ trace_id: t2, spans: [{ ...root, start_time: new Date(NOW - 5 * DAY + 5000).toISOString(), end_time: new Date(NOW - 5 * DAY + 6000).toISOString(), attributes: { 'session.id': 'merged', 'user.id': 'merged-user' } }] }]);
    expect(await repo.applyQueued(500)).toBe(2);
    await expectExact();
    expect(await db()('telemetry_sessions').where({ project_id: a.projectId, session_id: 'merged' }).first('first_start')).toMatchObject({ first_start: new Date(NOW - 5 * DAY + 5000) });
  }, 60_000);

  it.runIf(onPostgres)('two appliers at once: one applies, the other does nothing; nothing lost or doubled', async () => {
    await drain();
    const repo = new KnexGroupChangeRepository(db());
    const rand = prng(37);
    for (let round = 0; round < 20; round++) {
      const batches = scenario(rand, 5, NOW - 6 * DAY + round * 60_000, 4);
      for (const batch of batches) await ingest(a, batch);
      const waiting = await queued();
      expect(waiting).toBeGreaterThan(0);
      // Another applier holds the lock: this one leaves the queue as it is.
      await db().transaction(async (trx) => {
        await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [APPLIER_LOCK]);
        expect(await repo.applyQueued(500)).toBe(-1);
      });
      expect(await queued()).toBe(waiting);
      // Appliers racing (with ingest still going on): each row applied once.
      const more = scenario(rand, 5, NOW - 6 * DAY + round * 60_000 + 30_000, 2);
      const results = await Promise.all([repo.applyQueued(2), repo.applyQueued(2), repo.applyQueued(2), ...more.map((batch) => ingest(a, batch))]);
      expect(results.slice(0, 3).filter((n) => n === 2).length).toBeGreaterThanOrEqual(1);
      await Promise.all([repo.drain(3), repo.drain(3)]);
      await expectExact();
    }
  }, 300_000);

  it('retention with changes still queued: the removals queue behind the insertions, nothing resurrected or counted twice', async () => {
    await drain();
    const p = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Sessions retention');
    const rand = prng(41);
    // Old traces whose changes are not applied yet, in sessions that also have newer traces.
    for (let day = 14; day >= 6; day -= 2) for (const batch of scenario(rand, 6, NOW - day * DAY, 2)) await ingest(p, batch);
    // And a session and user with expired traces only: their rows must not come back.
    const lone = (ms: number) => ({ trace_id: traceId(), spans: [{ span_id: spanId(), name: 'root', start_time: new Date(ms).toISOString(), end_time: new Date(ms + 10).toISOString(), attributes: { 'session.id': 'expired-only', 'user.id': 'expired-user' } }] });
    await ingest(p, [lone(NOW - 13 * DAY), lone(NOW - 12 * DAY)]);
    expect(await queued()).toBeGreaterThan(0);
    expect(await db()('telemetry_sessions').where({ project_id: p.projectId }).first()).toBeUndefined();
    expect((await ctx.platform.patch(`/v1/projects/${p.projectId}`).set(bearer(p.key)).send({ settings: { data_retention_days: 10 } })).status).toBe(200);
    // Part of the queue applied, then retention (which queues its removals), then the rest.
    await new KnexGroupChangeRepository(db()).applyQueued(2);
    while (await ctx.services.telemetry.retention.run());
    expect(Number((await db()('telemetry_traces').where({ project_id: p.projectId }).andWhere('start_time', '<', new Date(NOW - 11 * DAY)).count({ n: '*' }).first())!.n)).toBe(0);
    await expectExact();
    expect(Number((await db()('telemetry_sessions').where({ project_id: p.projectId }).count({ n: '*' }).first())!.n)).toBeGreaterThan(0);
    expect(await db()('telemetry_sessions').where({ project_id: p.projectId, session_id: 'expired-only' }).first()).toBeUndefined();
    expect(await db()('telemetry_users').where({ project_id: p.projectId, user_id: 'expired-user' }).first()).toBeUndefined();
  }, 120_000);

  it.runIf(onPostgres)('an applier meeting a project being deleted waits for it, then skips its changes (no error)', async () => {
    await drain();
    const p = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Sessions deleted meanwhile');
    await ingest(p, scenario(prng(47), 4, NOW - DAY, 1)[0]!);
    await ingest(a, scenario(prng(53), 4, NOW - DAY, 1)[0]!);
    await ctx.admin.post(`/v1/telemetry-keys/${p.keyId}/revoke`);
    let applied: Promise<number> | undefined;
    await db().transaction(async (trx) => {
      // As deleteProject does: the project locked, its rows deleted, then the project.
      await trx('telemetry_projects').where({ id: p.projectId }).forUpdate().first('id');
      applied = new KnexGroupChangeRepository(db()).applyQueued(500);
      await new Promise((resolve) => setTimeout(resolve, 200));
      for (const table of ['telemetry_group_changes', 'telemetry_users', 'telemetry_sessions', 'telemetry_traces', 'telemetry_api_keys']) await trx(table).where({ project_id: p.projectId }).delete();
      await trx('telemetry_projects').where({ id: p.projectId }).delete();
    });
    expect(await applied).toBe(2);
    expect(await db()('telemetry_sessions').where({ project_id: p.projectId }).first()).toBeUndefined();
    await expectExact();
  }, 60_000);

  it('project deletion deletes its queued changes', async () => {
    const p = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Sessions deleted');
    await ingest(p, scenario(prng(43), 4, NOW - DAY, 1)[0]!);
    expect(Number((await db()('telemetry_group_changes').where({ project_id: p.projectId }).count({ n: '*' }).first())!.n)).toBe(1);
    await ctx.admin.post(`/v1/telemetry-keys/${p.keyId}/revoke`);
    expect((await ctx.platform.delete(`/v1/projects/${p.projectId}`).set(bearer(a.key))).status).toBe(200);
    expect(Number((await db()('telemetry_group_changes').where({ project_id: p.projectId }).count({ n: '*' }).first())!.n)).toBe(0);
    await expectExact();
  }, 60_000);
});
