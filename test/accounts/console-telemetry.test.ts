/**
 * The console's telemetry operations (openapi/console.yaml, tag Telemetry): projects (list,
 * create, read with counts, update, delete) and telemetry keys (create shown once, list with last
 * use, revoke) — by role, across two organizations, with the session's CSRF checks, in the audit
 * log and never with a key's value.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PROJECTS_PER_ORG } from '../../src/telemetry/projects.service.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer } from '../telemetry/helpers.js';
import { ORIGIN, as, signUp, type Member } from './helpers.js';

let ctx: TestContext;
let dev: Member;
let support: Member;
let viewer: Member;
let ownerA: Member;
let ownerB: Member;

beforeAll(async () => {
  ctx = await createTestContext();
  const members = await Promise.all([
    signUp(ctx, ctx.orgA.orgId, 'developer'),
    signUp(ctx, ctx.orgA.orgId, 'support'),
    signUp(ctx, ctx.orgA.orgId, 'viewer'),
    signUp(ctx, ctx.orgA.orgId, 'owner'),
    signUp(ctx, ctx.orgB.orgId, 'owner'),
  ]);
  [dev, support, viewer, ownerA, ownerB] = members as [Member, Member, Member, Member, Member];
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

const createProject = async (member: Member, name: string) => {
  const res = await as(member, ctx.merchant.post('/v1/console/telemetry-projects')).send({ name, environment: 'staging' });
  expect(res.status).toBe(201);
  return res.body.data.projectId as string;
};

describe('projects', () => {
  it('a developer creates, lists, reads (with counts), updates and deletes a project', async () => {
    const created = await as(dev, ctx.merchant.post('/v1/console/telemetry-projects')).send({ name: 'Support Assistant (EU)', description: 'chatbot' });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ orgId: ctx.orgA.orgId, name: 'Support Assistant (EU)', slug: 'support-assistant-eu', environment: 'production', sampleRate: 1, dataRetentionDays: 30, description: 'chatbot' });
    const id = created.body.data.projectId;

    const listed = await as(dev, ctx.merchant.get('/v1/console/telemetry-projects'));
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((p: { projectId: string }) => p.projectId)).toContain(id);

    const read = await as(dev, ctx.merchant.get(`/v1/console/telemetry-projects/${id}`));
    expect(read.status).toBe(200);
    expect(read.body.data.stats).toEqual({ tracesToday: 0, tracesThisMonth: 0 });
    // The endpoint exporters are configured with: the telemetry listener's PUBLIC_API_URL + /v1/otlp.
    expect(read.body.data.otlpEndpoint).toBe('http://api.test/v1/otlp');

    const updated = await as(dev, ctx.merchant.patch(`/v1/console/telemetry-projects/${id}`)).send({ name: 'Renamed', sampleRate: 0.25, dataRetentionDays: 7, environment: 'development', description: null });
    expect(updated.status).toBe(200);
    expect(updated.body.data).toMatchObject({ name: 'Renamed', slug: 'support-assistant-eu', sampleRate: 0.25, dataRetentionDays: 7, environment: 'development', description: null });
    // The telemetry API sees the same project (one service).
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/telemetry-projects`)).body.data.find((p: { projectId: string }) => p.projectId === id)).toMatchObject({ name: 'Renamed', sampleRate: 0.25 });

    const deleted = await as(dev, ctx.merchant.delete(`/v1/console/telemetry-projects/${id}`));
    expect(deleted.status).toBe(204);
    expect((await as(dev, ctx.merchant.get(`/v1/console/telemetry-projects/${id}`))).status).toBe(404);

    const audit = await as(ownerA, ctx.merchant.get('/v1/console/audit-log').query({ size: 100 }));
    const actions = audit.body.data.records.filter((e: { actorId: string }) => e.actorId === dev.userId).map((e: { action: string }) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['createConsoleTelemetryProject', 'updateConsoleTelemetryProject', 'deleteConsoleTelemetryProject']));
  });

  it('refuses bad input (400): an empty update, a sample rate above 1', async () => {
    const id = await createProject(dev, 'Bounds');
    expect((await as(dev, ctx.merchant.patch(`/v1/console/telemetry-projects/${id}`)).send({})).status).toBe(400);
    const res = await as(dev, ctx.merchant.patch(`/v1/console/telemetry-projects/${id}`)).send({ sampleRate: 1.5 });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
  });

  it('a project with an active key cannot be deleted (409) until the key is revoked', async () => {
    const id = await createProject(dev, 'Keyed');
    const key = await as(dev, ctx.merchant.post('/v1/console/telemetry-keys')).send({ projectId: id });
    const blocked = await as(dev, ctx.merchant.delete(`/v1/console/telemetry-projects/${id}`));
    expect(blocked.status).toBe(409);
    expect(blocked.body.error.message).toContain('active API keys');
    expect((await as(dev, ctx.merchant.post(`/v1/console/telemetry-keys/${key.body.data.telemetryKeyId}/revoke`))).status).toBe(200);
    expect((await as(dev, ctx.merchant.delete(`/v1/console/telemetry-projects/${id}`))).status).toBe(204);
  });

  it(`an organization holds at most ${MAX_PROJECTS_PER_ORG} projects (409)`, async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Org C' });
    const owner = await signUp(ctx, org.id, 'owner');
    for (let i = 0; i < MAX_PROJECTS_PER_ORG; i += 1) await ctx.services.telemetry.projects.create(org.id, { name: `P${i}` });
    const res = await as(owner, ctx.merchant.post('/v1/console/telemetry-projects')).send({ name: 'One more' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('CONFLICT');
  });

  it('another organization’s project is 404 for every operation, and absent from the list', async () => {
    const foreign = await createProject(ownerB, 'B only');
    expect((await as(dev, ctx.merchant.get(`/v1/console/telemetry-projects/${foreign}`))).status).toBe(404);
    expect((await as(dev, ctx.merchant.patch(`/v1/console/telemetry-projects/${foreign}`)).send({ name: 'mine' })).status).toBe(404);
    expect((await as(dev, ctx.merchant.delete(`/v1/console/telemetry-projects/${foreign}`))).status).toBe(404);
    expect((await as(dev, ctx.merchant.post('/v1/console/telemetry-keys')).send({ projectId: foreign })).status).toBe(404);
    const listed = await as(dev, ctx.merchant.get('/v1/console/telemetry-projects'));
    expect(listed.body.data.map((p: { projectId: string }) => p.projectId)).not.toContain(foreign);
    const read = await as(ownerB, ctx.merchant.get(`/v1/console/telemetry-projects/${foreign}`));
    expect(read.body.data.name).toBe('B only');
  });
});

describe('telemetry keys', () => {
  it('a key is shown once (no-store), works on the telemetry API, lists with its last use, and stops at revocation', async () => {
    const projectId = await createProject(dev, 'Ingest');
    const created = await as(dev, ctx.merchant.post('/v1/console/telemetry-keys')).send({ projectId, name: 'prod ingest' });
    expect(created.status).toBe(201);
    expect(created.headers['cache-control']).toBe('no-store');
    const { key, telemetryKeyId } = created.body.data;
    expect(key).toMatch(/^tk_[A-Za-z0-9_-]{43}$/);
    expect(created.body.data).toMatchObject({ projectId, name: 'prod ingest', revoked: false, lastUsedAt: null, prefix: key.slice(0, 10) });

    const before = await as(dev, ctx.merchant.get('/v1/console/telemetry-keys').query({ project_id: projectId }));
    expect(before.body.data).toHaveLength(1);
    expect(before.body.data[0]).not.toHaveProperty('key');
    expect(before.body.data[0].lastUsedAt).toBeNull();

    expect((await ctx.platform.get('/v1/projects').set(bearer(key))).status).toBe(200);
    const after = await as(dev, ctx.merchant.get('/v1/console/telemetry-keys').query({ project_id: projectId }));
    expect(after.body.data[0].lastUsedAt).not.toBeNull();
    expect(Date.parse(after.body.data[0].lastUsedAt)).toBeLessThanOrEqual(ctx.clock.now().getTime());

    const revoked = await as(dev, ctx.merchant.post(`/v1/console/telemetry-keys/${telemetryKeyId}/revoke`));
    expect(revoked.status).toBe(200);
    expect(revoked.body.data).toMatchObject({ telemetryKeyId, revoked: true, revokedAt: expect.any(String) });
    expect((await ctx.platform.get('/v1/projects').set(bearer(key))).status).toBe(401);

    // The key's value is in no audit entry.
    const audit = await as(ownerA, ctx.merchant.get('/v1/console/audit-log').query({ size: 100 }));
    expect(audit.text).not.toContain(key);
    expect(audit.body.data.records.map((e: { action: string }) => e.action)).toEqual(expect.arrayContaining(['createConsoleTelemetryKey', 'revokeConsoleTelemetryKey']));
  });

  it('another organization’s key cannot be revoked (404) and is not listed', async () => {
    const foreignProject = await createProject(ownerB, 'B keys');
    const foreign = await as(ownerB, ctx.merchant.post('/v1/console/telemetry-keys')).send({ projectId: foreignProject });
    const res = await as(dev, ctx.merchant.post(`/v1/console/telemetry-keys/${foreign.body.data.telemetryKeyId}/revoke`));
    expect(res.status).toBe(404);
    expect((await ctx.platform.get('/v1/projects').set(bearer(foreign.body.data.key))).status).toBe(200);
    const listed = await as(dev, ctx.merchant.get('/v1/console/telemetry-keys'));
    expect(listed.body.data.map((k: { telemetryKeyId: string }) => k.telemetryKeyId)).not.toContain(foreign.body.data.telemetryKeyId);
    expect((await as(dev, ctx.merchant.post('/v1/console/telemetry-keys')).send({ projectId: 'PRJ_000000000000000000000000' })).status).toBe(404);
  });
});

describe('roles, sessions and CSRF', () => {
  it('support and viewer are refused every telemetry operation (403)', async () => {
    const id = await createProject(dev, 'Roles');
    for (const member of [support, viewer]) {
      expect((await as(member, ctx.merchant.get('/v1/console/telemetry-projects'))).status).toBe(403);
      expect((await as(member, ctx.merchant.get(`/v1/console/telemetry-projects/${id}`))).status).toBe(403);
      expect((await as(member, ctx.merchant.get('/v1/console/telemetry-keys'))).status).toBe(403);
      expect((await as(member, ctx.merchant.post('/v1/console/telemetry-projects')).send({ name: 'x' })).status).toBe(403);
      expect((await as(member, ctx.merchant.patch(`/v1/console/telemetry-projects/${id}`)).send({ name: 'x' })).status).toBe(403);
      expect((await as(member, ctx.merchant.delete(`/v1/console/telemetry-projects/${id}`))).status).toBe(403);
      expect((await as(member, ctx.merchant.post('/v1/console/telemetry-keys')).send({ projectId: id })).status).toBe(403);
      expect((await as(member, ctx.merchant.post('/v1/console/telemetry-keys/TKI_000000000000000000000000/revoke'))).status).toBe(403);
    }
    expect((await as(ownerA, ctx.merchant.get(`/v1/console/telemetry-projects/${id}`))).status).toBe(200);
  });

  it('no session is 401; a write without the CSRF token is 403 and creates nothing', async () => {
    expect((await ctx.merchant.get('/v1/console/telemetry-projects')).status).toBe(401);
    expect((await ctx.merchant.post('/v1/console/telemetry-keys').set('Origin', ORIGIN).send({ projectId: 'PRJ_000000000000000000000000' })).status).toBe(401);
    const count = (await as(dev, ctx.merchant.get('/v1/console/telemetry-projects'))).body.data.length;
    const res = await ctx.merchant.post('/v1/console/telemetry-projects').set('Cookie', dev.cookie).set('Origin', ORIGIN).send({ name: 'Forged' });
    expect(res.status).toBe(403);
    expect((await as(dev, ctx.merchant.get('/v1/console/telemetry-projects'))).body.data.length).toBe(count);
  });
});
