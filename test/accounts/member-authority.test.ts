/**
 * What a member made does not outlive their authority (issue 37): an API key never exceeds its
 * maker's current role and dies with the membership, so do the telemetry keys and agents' keys
 * they made in the console, and the removal lists what went (item 7); their pending invites are
 * revoked on removal, and above the new role on demotion (item 8). The operator's keys stay.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { ORIGIN, PASSWORD, as, linkToken, signUp, type Member } from './helpers.js';

let ctx: TestContext;
let owner: Member;

beforeAll(async () => {
  ctx = await createTestContext();
  owner = await signUp(ctx, ctx.orgA.orgId, 'owner');
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

const apiKeyOf = async (member: Member, permissions: string[]) => {
  const res = await as(member, ctx.merchant.post('/v1/console/api-keys')).send({ name: 'member key', permissions });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { apiKeyId: string; key: string };
};
const withKey = (key: string, path: string) => ctx.merchant.get(path).set('X-API-Key', key);
const setRole = async (userId: string, role: string) => {
  const res = await as(owner, ctx.merchant.patch(`/v1/console/members/${userId}`)).send({ role });
  expect(res.status, res.text).toBe(200);
};

describe('API keys of a member (item 7)', () => {
  it('a key never exceeds its maker’s current role: a demotion narrows it at once (even cached), a removal ends it', async () => {
    const dev = await signUp(ctx, ctx.orgA.orgId, 'developer');
    const { apiKeyId, key } = await apiKeyOf(dev, ['orders:read', 'webhooks:write', 'checkout:write']);
    // Used (and cached) before the demotion.
    expect((await withKey(key, '/v1/webhook')).status).toBe(200);
    expect((await withKey(key, '/v1/orders')).status).toBe(200);
    await setRole(dev.userId, 'viewer');
    const narrowed = await withKey(key, '/v1/webhook');
    expect(narrowed.status).toBe(403);
    expect(narrowed.body.error.message).toContain('no longer grants it');
    expect((await withKey(key, '/v1/orders')).status).toBe(200);
    // The key's own permissions are unchanged: promoted back, it works again.
    await setRole(dev.userId, 'developer');
    expect((await withKey(key, '/v1/webhook')).status).toBe(200);

    const removed = await as(owner, ctx.merchant.delete(`/v1/console/members/${dev.userId}`));
    expect(removed.status, removed.text).toBe(200);
    expect(removed.body.data).toMatchObject({ userId: dev.userId, role: 'developer', revoked: { sessions: 1, apiKeys: [{ id: apiKeyId, name: 'member key' }] } });
    expect((await withKey(key, '/v1/orders')).status).toBe(401);
    const listed = (await as(owner, ctx.merchant.get('/v1/console/api-keys'))).body.data as Array<{ apiKeyId: string; revoked: boolean }>;
    expect(listed.find((k) => k.apiKeyId === apiKeyId)?.revoked).toBe(true);
  });

  it('the key of a member removed by a direct membership change (another process, no revocation yet) is refused at the next request', async () => {
    const dev = await signUp(ctx, ctx.orgA.orgId, 'developer');
    const { key } = await apiKeyOf(dev, ['orders:read']);
    expect((await withKey(key, '/v1/orders')).status).toBe(200);
    await ctx.testDb.database.db('memberships').where({ org_id: ctx.orgA.orgId, user_id: dev.userId }).delete();
    // The cache's bound (5 s) passes, as it would in another process.
    ctx.clock.advance(6_000);
    expect((await withKey(key, '/v1/orders')).status).toBe(401);
  });

  it('telemetry keys and agents’ keys made in the console go with the member; the operator’s keys stay', async () => {
    const dev = await signUp(ctx, ctx.orgA.orgId, 'developer');
    const project = await as(dev, ctx.merchant.post('/v1/console/telemetry-projects')).send({ name: 'Member project', environment: 'staging' });
    expect(project.status, project.text).toBe(201);
    const tkey = await as(dev, ctx.merchant.post('/v1/console/telemetry-keys')).send({ projectId: project.body.data.projectId, name: 'ingest' });
    expect(tkey.status, tkey.text).toBe(201);
    const bearer = { Authorization: `Bearer ${tkey.body.data.key}` };
    expect((await ctx.platform.get('/v1/projects').set(bearer)).status).toBe(200);
    const agent = await as(dev, ctx.merchant.post('/v1/console/agents')).send({ name: 'member agent' });
    expect(agent.status, agent.text).toBe(201);
    // An agent made by the owner, and the key the operator made for the harness, are not the developer's.
    const ownersAgent = await as(owner, ctx.merchant.post('/v1/console/agents')).send({ name: 'owner agent' });
    expect(ownersAgent.status).toBe(201);

    const removed = await as(owner, ctx.merchant.delete(`/v1/console/members/${dev.userId}`));
    expect(removed.status, removed.text).toBe(200);
    expect(removed.body.data.revoked).toMatchObject({
      telemetryKeys: [{ id: tkey.body.data.telemetryKeyId, name: 'ingest' }],
      agents: [{ id: agent.body.data.agentId, name: 'member agent' }],
    });
    expect((await ctx.platform.get('/v1/projects').set(bearer)).status).toBe(401);
    const agents = (await as(owner, ctx.merchant.get('/v1/console/agents'))).body.data as Array<{ agentId: string; revokedAt: string | null }>;
    expect(agents.find((a) => a.agentId === agent.body.data.agentId)?.revokedAt).not.toBeNull();
    expect(agents.find((a) => a.agentId === ownersAgent.body.data.agentId)?.revokedAt).toBeNull();
    expect((await withKey(ctx.orgA.apiKey, '/v1/orders')).status).toBe(200);
    const audit = (await as(owner, ctx.merchant.get('/v1/console/audit-log?size=100'))).body.data.records as Array<{ action: string; targetId: string; summary: string }>;
    expect(audit.find((e) => e.action === 'member.remove' && e.targetId === dev.userId)?.summary).toContain(tkey.body.data.telemetryKeyId);
  });

  it('a demotion below telemetry:manage and agents:manage revokes the telemetry keys and agents’ keys the member made', async () => {
    const dev = await signUp(ctx, ctx.orgA.orgId, 'developer');
    const project = await as(dev, ctx.merchant.post('/v1/console/telemetry-projects')).send({ name: 'Demoted project', environment: 'staging' });
    const tkey = await as(dev, ctx.merchant.post('/v1/console/telemetry-keys')).send({ projectId: project.body.data.projectId });
    const agent = await as(dev, ctx.merchant.post('/v1/console/agents')).send({ name: 'demoted agent' });
    await setRole(dev.userId, 'support');
    expect((await ctx.platform.get('/v1/projects').set({ Authorization: `Bearer ${tkey.body.data.key}` })).status).toBe(401);
    const agents = (await as(owner, ctx.merchant.get('/v1/console/agents'))).body.data as Array<{ agentId: string; revokedAt: string | null }>;
    expect(agents.find((a) => a.agentId === agent.body.data.agentId)?.revokedAt).not.toBeNull();
  });
});

describe('invites of a member (item 8)', () => {
  const invite = async (by: Member, email: string, role: string) => {
    const res = await as(by, ctx.merchant.post('/v1/console/invites')).send({ email, role });
    expect(res.status, res.text).toBe(201);
    // The console never shows the link (it goes to the mailbox); the operator's copy stands in for it.
    const link = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites/${res.body.data.inviteId}/link`);
    expect(link.status, link.text).toBe(200);
    return { id: res.body.data.inviteId as string, token: linkToken(link.body.data.url) };
  };
  const accept = (token: string) => ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).send({ token, password: PASSWORD });
  const statusOf = async (id: string) => ((await as(owner, ctx.merchant.get('/v1/console/invites'))).body.data as Array<{ inviteId: string; status: string }>).find((i) => i.inviteId === id)?.status;

  it('a removed admin’s pending invites are revoked (and listed); accepting one is 404', async () => {
    const admin = await signUp(ctx, ctx.orgA.orgId, 'admin');
    const pendingAdmin = await invite(admin, `later-admin-${Date.now()}@example.com`, 'admin');
    const pendingViewer = await invite(admin, `later-viewer-${Date.now()}@example.com`, 'viewer');
    const ownersInvite = await invite(owner, `owners-guest-${Date.now()}@example.com`, 'viewer');
    const removed = await as(owner, ctx.merchant.delete(`/v1/console/members/${admin.userId}`));
    expect(removed.status).toBe(200);
    expect((removed.body.data.revoked.invites as Array<{ inviteId: string; status: string }>).map((i) => [i.inviteId, i.status]).sort()).toEqual(
      [[pendingAdmin.id, 'REVOKED'], [pendingViewer.id, 'REVOKED']].sort(),
    );
    expect((await accept(pendingAdmin.token)).status).toBe(404);
    expect(await statusOf(ownersInvite.id)).toBe('PENDING');
  });

  it('a demotion revokes the pending invites above the new role only', async () => {
    const second = await signUp(ctx, ctx.orgA.orgId, 'owner');
    const ownerInvite = await invite(second, `next-owner-${Date.now()}@example.com`, 'owner');
    const adminInvite = await invite(second, `next-admin-${Date.now()}@example.com`, 'admin');
    const devInvite = await invite(second, `next-dev-${Date.now()}@example.com`, 'developer');
    await setRole(second.userId, 'admin');
    expect(await statusOf(ownerInvite.id)).toBe('REVOKED');
    expect(await statusOf(adminInvite.id)).toBe('PENDING');
    expect(await statusOf(devInvite.id)).toBe('PENDING');
    // A developer grants no role: every pending invite of theirs goes.
    await setRole(second.userId, 'developer');
    expect(await statusOf(adminInvite.id)).toBe('REVOKED');
    expect(await statusOf(devInvite.id)).toBe('REVOKED');
    expect((await accept(adminInvite.token)).status).toBe(404);
  });
});
