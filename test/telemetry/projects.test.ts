/** Telemetry keys (admin API), Bearer authentication, and the projects routes. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, keyFor, span, spanId, traceId, type TelemetryKeyFixture } from './helpers.js';

let ctx: TestContext;
let a: TelemetryKeyFixture;
let b: TelemetryKeyFixture;
beforeAll(async () => {
  ctx = await createTestContext();
  a = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Support Assistant');
  b = await createProjectWithKey(ctx, ctx.orgB.orgId, 'Org B bot');
});
afterAll(async () => {
  await ctx?.close();
});

const telemetryError = (code: string) => ({ error: { code }, meta: { request_id: expect.any(String), timestamp: expect.any(String) } });

describe('admin API: telemetry projects and keys', () => {
  it('creates a project with a slug, defaults and the organization', async () => {
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/telemetry-projects`).send({ name: 'Café Bot — EU!', description: 'x' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      success: true,
      message: 'Telemetry project created',
      data: {
        projectId: expect.stringMatching(/^PRJ_[0-9A-Za-z]{24}$/),
        orgId: ctx.orgA.orgId,
        name: 'Café Bot — EU!',
        slug: 'caf-bot-eu',
        environment: 'production',
        description: 'x',
        sampleRate: 1,
        dataRetentionDays: 30,
        createdAt: '2026-11-22T09:00:00.000Z',
        updatedAt: '2026-11-22T09:00:00.000Z',
      },
    });
  });

  it('answers 404 for an unknown organization and 400 for a bad body', async () => {
    expect((await ctx.admin.post('/v1/orgs/ORG_nope/telemetry-projects').send({ name: 'x' })).status).toBe(404);
    expect((await ctx.admin.get('/v1/orgs/ORG_nope/telemetry-projects')).status).toBe(404);
    const bad = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/telemetry-projects`).send({ name: '', extra: 1 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('VALIDATION_ERROR');
  });

  it('shows a new key once, stores it hashed, and lists keys without the secret', async () => {
    const created = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/telemetry-keys`).send({ projectId: a.projectId, name: 'backend' });
    expect(created.status).toBe(201);
    const key = created.body.data.key as string;
    expect(key).toMatch(/^tk_[A-Za-z0-9_-]{43}$/);
    expect(created.body.data).toMatchObject({ projectId: a.projectId, orgId: ctx.orgA.orgId, name: 'backend', prefix: key.slice(0, 10), revoked: false, revokedAt: null });
    const stored = await ctx.testDb.database.db('telemetry_api_keys').where({ id: created.body.data.telemetryKeyId }).first();
    expect(JSON.stringify(stored)).not.toContain(key);
    expect(stored.key_hash).toMatch(/^[0-9a-f]{64}$/);
    const list = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/telemetry-keys`);
    expect(list.status).toBe(200);
    expect(JSON.stringify(list.body)).not.toContain(key);
    expect(list.body.data.map((k: { telemetryKeyId: string }) => k.telemetryKeyId)).toContain(created.body.data.telemetryKeyId);
  });

  it("refuses a key for another organization's project (404)", async () => {
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/telemetry-keys`).send({ projectId: b.projectId });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
  });

  it('revokes a key at once (401 afterwards); revoking twice changes nothing; unknown id is 404', async () => {
    const k = await keyFor(ctx, ctx.orgA.orgId, a.projectId);
    expect((await ctx.platform.get('/v1/projects').set(bearer(k.key))).status).toBe(200);
    const revoked = await ctx.admin.post(`/v1/telemetry-keys/${k.keyId}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.data).toMatchObject({ revoked: true, revokedAt: '2026-11-22T09:00:00.000Z' });
    const after = await ctx.platform.get('/v1/projects').set(bearer(k.key));
    expect(after.status).toBe(401);
    expect(after.body).toMatchObject(telemetryError('unauthorized'));
    expect((await ctx.admin.post(`/v1/telemetry-keys/${k.keyId}/revoke`)).body.data.revoked).toBe(true);
    expect((await ctx.admin.post('/v1/telemetry-keys/TKI_nope/revoke')).status).toBe(404);
  });
});

describe('Bearer authentication', () => {
  it.each([
    ['missing', undefined],
    ['not Bearer', `Basic ${'x'.repeat(10)}`],
    ['malformed', 'Bearer tk_short'],
    ['well-formed but unknown', `Bearer tk_${'A'.repeat(43)}`],
    ['a merchant key', 'MERCHANT'],
  ])('answers 401 unauthorized for a %s key, without rate-limit headers', async (_label, value) => {
    const req = ctx.platform.get('/v1/projects');
    if (value === 'MERCHANT') req.set('Authorization', `Bearer ${ctx.orgA.apiKey}`);
    else if (value !== undefined) req.set('Authorization', value);
    const res = await req;
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: { code: 'unauthorized', message: 'Missing or invalid API key', details: null }, meta: { request_id: expect.any(String), timestamp: '2026-11-22T09:00:00.000Z' } });
    expect(res.headers['x-ratelimit-limit']).toBeUndefined();
  });

  it('puts X-RateLimit-* headers on every authenticated answer, errors included', async () => {
    const ok = await ctx.platform.get('/v1/projects').set(bearer(a.key));
    expect(ok.headers['x-ratelimit-limit']).toBe('1200');
    expect(Number(ok.headers['x-ratelimit-remaining'])).toBeLessThan(1200);
    expect(ok.headers['x-ratelimit-reset']).toBe(String(Date.parse('2026-11-22T09:01:00.000Z') / 1000));
    const notFound = await ctx.platform.get('/v1/projects/PRJ_nope').set(bearer(a.key));
    expect(notFound.status).toBe(404);
    expect(notFound.headers['x-ratelimit-limit']).toBe('1200');
  });
});

describe('projects', () => {
  it('lists the organization’s projects oldest first, without stats', async () => {
    const res = await ctx.platform.get('/v1/projects').set(bearer(a.key));
    expect(res.status).toBe(200);
    const ids = res.body.data.map((p: { id: string }) => p.id);
    expect(ids).toContain(a.projectId);
    expect(ids).not.toContain(b.projectId);
    const created = res.body.data.map((p: { created_at: string; id: string }) => `${p.created_at} ${p.id}`);
    expect(created).toEqual([...created].sort());
    expect(res.body.data.find((p: { id: string }) => p.id === a.projectId)).toEqual({
      id: a.projectId,
      name: 'Support Assistant',
      slug: 'support-assistant',
      environment: 'production',
      description: null,
      settings: { sample_rate: 1, data_retention_days: 30 },
      created_at: '2026-11-22T09:00:00.000Z',
      updated_at: '2026-11-22T09:00:00.000Z',
    });
    expect(res.body.meta).toEqual({ request_id: expect.stringMatching(/^req_/), timestamp: '2026-11-22T09:00:00.000Z' });
  });

  it('creates projects (201) with unique slugs per organization', async () => {
    const first = await ctx.platform.post('/v1/projects').set(bearer(a.key)).send({ name: 'Support Assistant', environment: 'staging', description: 'second' });
    expect(first.status).toBe(201);
    expect(first.body.data).toMatchObject({ slug: 'support-assistant-2', environment: 'staging', description: 'second', settings: { sample_rate: 1, data_retention_days: 30 } });
    expect(first.body.data.stats).toBeUndefined();
    const second = await ctx.platform.post('/v1/projects').set(bearer(a.key)).send({ name: 'support  ASSISTANT' });
    expect(second.body.data.slug).toBe('support-assistant-3');
    const symbols = await ctx.platform.post('/v1/projects').set(bearer(a.key)).send({ name: '!!!' });
    expect(symbols.body.data.slug).toBe('project');
    // Slugs are per organization: org B may reuse one.
    const inB = await ctx.platform.post('/v1/projects').set(bearer(b.key)).send({ name: 'Support Assistant' });
    expect(inB.body.data.slug).toBe('support-assistant');
  });

  it.each([
    ['an empty name', { name: '' }, 'name'],
    ['a name over 100 characters', { name: 'x'.repeat(101) }, 'name'],
    ['an unknown environment', { name: 'x', environment: 'qa' }, 'environment'],
    ['an unknown field', { name: 'x', owner: 'me' }, 'owner'],
    ['no name', { environment: 'staging' }, 'name'],
  ])('refuses %s with 400 invalid_request', async (_label, body, field) => {
    const res = await ctx.platform.post('/v1/projects').set(bearer(a.key)).send(body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject(telemetryError('invalid_request'));
    expect(res.body.error.message).toContain(field);
  });

  it('refuses a malformed JSON body with invalid_request', async () => {
    const res = await ctx.platform.post('/v1/projects').set(bearer(a.key)).set('Content-Type', 'application/json').send('{"name":');
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject(telemetryError('invalid_request'));
  });

  it('reads a project with description, settings and stats (traces by first ingestion, UTC day and month)', async () => {
    const p = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Stats');
    const ingest = (id: string, at: number) =>
      ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({ traces: [{ trace_id: id, spans: [span({ start: at, durationMs: 5 })] }] });
    ctx.clock.set('2026-11-01T00:00:00.000Z');
    expect((await ingest(traceId(), Date.parse('2026-10-20T00:00:00Z'))).status).toBe(202);
    ctx.clock.set('2026-10-31T23:59:59.000Z');
    expect((await ingest(traceId(), Date.parse('2026-10-31T00:00:00Z'))).status).toBe(202);
    ctx.clock.set('2026-11-22T00:00:00.000Z');
    const today = traceId();
    expect((await ingest(today, Date.parse('2026-11-21T00:00:00Z'))).status).toBe(202);
    // Re-sending a trace does not count it again.
    ctx.clock.set('2026-11-22T08:00:00.000Z');
    expect((await ingest(today, Date.parse('2026-11-21T00:00:01Z'))).status).toBe(202);
    ctx.clock.set('2026-11-22T09:00:00.000Z');
    const res = await ctx.platform.get(`/v1/projects/${p.projectId}`).set(bearer(a.key));
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: p.projectId, description: null, settings: { sample_rate: 1, data_retention_days: 30 }, stats: { traces_today: 1, traces_this_month: 2 } });
  });

  it('updates name, description, environment and settings field by field; the slug stays', async () => {
    const created = await ctx.platform.post('/v1/projects').set(bearer(a.key)).send({ name: 'Patch me', description: 'd' });
    const id = created.body.data.id;
    ctx.clock.advance(1000);
    const res = await ctx.platform.patch(`/v1/projects/${id}`).set(bearer(a.key)).send({ name: 'Patched', settings: { sample_rate: 0.5 } });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ name: 'Patched', slug: 'patch-me', description: 'd', settings: { sample_rate: 0.5, data_retention_days: 30 }, updated_at: '2026-11-22T09:00:01.000Z' });
    expect(res.body.data.stats).toBeUndefined();
    const res2 = await ctx.platform.patch(`/v1/projects/${id}`).set(bearer(a.key)).send({ description: null, environment: 'development', settings: { data_retention_days: 7 } });
    expect(res2.body.data).toMatchObject({ name: 'Patched', description: null, environment: 'development', settings: { sample_rate: 0.5, data_retention_days: 7 } });
    ctx.clock.set('2026-11-22T09:00:00.000Z');
  });

  it.each([
    ['an empty body', {}],
    ['sample_rate above 1', { settings: { sample_rate: 1.5 } }],
    ['a negative sample_rate', { settings: { sample_rate: -0.1 } }],
    ['data_retention_days 0', { settings: { data_retention_days: 0 } }],
    ['empty settings', { settings: {} }],
    ['an unknown settings field', { settings: { foo: 1 } }],
    ['a slug', { slug: 'x' }],
  ])('refuses a PATCH with %s (400 invalid_request)', async (_label, body) => {
    const res = await ctx.platform.patch(`/v1/projects/${a.projectId}`).set(bearer(a.key)).send(body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject(telemetryError('invalid_request'));
  });

  it("answers 404 not_found for a missing or another organization's project, on every project route", async () => {
    for (const id of ['PRJ_doesnotexist000000000000', b.projectId]) {
      for (const res of [
        await ctx.platform.get(`/v1/projects/${id}`).set(bearer(a.key)),
        await ctx.platform.patch(`/v1/projects/${id}`).set(bearer(a.key)).send({ name: 'x' }),
        await ctx.platform.delete(`/v1/projects/${id}`).set(bearer(a.key)),
      ]) {
        expect(res.status).toBe(404);
        expect(res.body).toEqual({ error: { code: 'not_found', message: 'Project not found', details: null }, meta: expect.any(Object) });
      }
    }
    // Org B's project is untouched.
    const mine = await ctx.platform.get(`/v1/projects/${b.projectId}`).set(bearer(b.key));
    expect(mine.body.data.name).toBe('Org B bot');
  });

  it('refuses to delete a project with active keys (409 conflict, with the count)', async () => {
    const res = await ctx.platform.delete(`/v1/projects/${a.projectId}`).set(bearer(a.key));
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'conflict', details: { project_id: a.projectId, active_api_keys: expect.any(Number) } });
    expect(res.body.error.details.active_api_keys).toBeGreaterThanOrEqual(2);
  });

  it('deletes a project with all its traces, spans, metric points and rollups once its keys are revoked', async () => {
    const doomed = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Doomed');
    const tid = traceId();
    const ingest = await ctx.platform.post('/v1/ingest').set(bearer(doomed.key)).send({
      traces: [{ trace_id: tid, spans: [span({ start: Date.parse('2026-11-22T08:00:00Z'), durationMs: 100, attributes: { 'llm.model': 'gpt-4o', 'llm.tokens.input': 10 } })] }],
      metrics: [{ name: 'queue.depth', value: 3, timestamp: '2026-11-22T08:00:00Z' }],
    });
    expect(ingest.status).toBe(202);
    const db = ctx.testDb.database.db;
    const count = async (table: string) => Number((await db(table).where({ project_id: doomed.projectId }).count({ n: '*' }).first())!.n);
    for (const table of ['telemetry_traces', 'telemetry_model_calls', 'telemetry_metric_points', 'telemetry_rollups']) expect(await count(table)).toBeGreaterThan(0);

    await ctx.admin.post(`/v1/telemetry-keys/${doomed.keyId}/revoke`);
    const res = await ctx.platform.delete(`/v1/projects/${doomed.projectId}`).set(bearer(a.key));
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ id: doomed.projectId, deleted: true });
    for (const table of ['telemetry_traces', 'telemetry_model_calls', 'telemetry_metric_points', 'telemetry_rollups', 'telemetry_api_keys']) expect(await count(table)).toBe(0);
    expect((await ctx.platform.get(`/v1/projects/${doomed.projectId}`).set(bearer(a.key))).status).toBe(404);
    expect((await ctx.platform.delete(`/v1/projects/${doomed.projectId}`).set(bearer(a.key))).status).toBe(404);
  });

  it('refuses the 101st project of an organization with 409 conflict', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Many projects' });
    const first = await createProjectWithKey(ctx, org.id, 'p0');
    for (let i = 1; i < 100; i++) await ctx.services.telemetry.projects.create(org.id, { name: `p${i}` });
    const res = await ctx.platform.post('/v1/projects').set(bearer(first.key)).send({ name: 'one too many' });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'conflict', details: { limit: 100 } });
    expect((await ctx.platform.get('/v1/projects').set(bearer(first.key))).body.data).toHaveLength(100);
  });
});

describe('trace routes are scoped to the key’s project', () => {
  it("another organization's key cannot read a trace (404), nor see it in search", async () => {
    const tid = traceId();
    const res = await ctx.platform.post('/v1/ingest').set(bearer(a.key)).send({ traces: [{ trace_id: tid, spans: [span({ span_id: spanId(), start: Date.parse('2026-11-22T08:30:00Z'), durationMs: 3 })] }] });
    expect(res.status).toBe(202);
    expect((await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(a.key))).status).toBe(200);
    const other = await ctx.platform.get(`/v1/traces/${tid}`).set(bearer(b.key));
    expect(other.status).toBe(404);
    expect(other.body.error.code).toBe('not_found');
    const search = await ctx.platform.get('/v1/traces').set(bearer(b.key));
    expect(search.body.data.map((t: { trace_id: string }) => t.trace_id)).not.toContain(tid);
  });
});
