import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

describe('admin API', () => {
  it('refuses requests without the admin token, or with a wrong one', async () => {
    const { default: supertest } = await import('supertest');
    const bare = supertest(ctx.apps.admin);
    expect((await bare.get('/v1/orgs')).status).toBe(401);
    const wrong = await bare.get('/v1/orgs').set('Authorization', 'Bearer nope');
    expect(wrong.status).toBe(401);
    expect(wrong.body).toMatchObject({ success: false, error: { code: 'UNAUTHORIZED' } });
    // A merchant API key is not an admin credential.
    expect((await bare.get('/v1/orgs').set('Authorization', `Bearer ${ctx.orgA.apiKey}`)).status).toBe(401);
  });

  it('creates an organization with checkout-ready flags, reads and lists it', async () => {
    ctx.clock.advance(1000);
    const created = await ctx.admin.post('/v1/orgs').send({ name: '  Acme Coffee ' });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ name: 'Acme Coffee', frozen: false, cardVerified: true, cardAccountEnabled: true });
    const id = created.body.data.orgId;
    expect(id).toMatch(/^ORG_[0-9A-Za-z]{24}$/);
    expect((await ctx.admin.get(`/v1/orgs/${id}`)).body.data.orgId).toBe(id);
    const list = await ctx.admin.get('/v1/orgs?size=2');
    expect(list.body.data).toMatchObject({ total: 3, page: 1, size: 2, pages: 2, current: 1 });
    expect(list.body.data.records[0].orgId).toBe(id); // newest first
  });

  it('updates flags, validates the body and 404s unknown organizations', async () => {
    ctx.clock.advance(60_000);
    const res = await ctx.admin.patch(`/v1/orgs/${ctx.orgB.orgId}`).send({ frozen: true, cardVerified: false });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ frozen: true, cardVerified: false, cardAccountEnabled: true, updatedAt: '2026-11-22T09:01:01.000Z' });
    expect((await ctx.admin.patch(`/v1/orgs/${ctx.orgB.orgId}`).send({})).status).toBe(400);
    expect((await ctx.admin.patch(`/v1/orgs/${ctx.orgB.orgId}`).send({ frozen: 'yes' })).status).toBe(400);
    expect((await ctx.admin.patch(`/v1/orgs/${ctx.orgB.orgId}`).send({ owner: 'x' })).status).toBe(400);
    const missing = await ctx.admin.patch('/v1/orgs/ORG_doesnotexist').send({ frozen: true });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('NOT_FOUND');
  });

  it('issues a key once, lists it without the secret, and revokes it', async () => {
    const created = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/api-keys`).send({ name: 'backend', permissions: ['orders:read'] });
    expect(created.status).toBe(201);
    const { key, apiKeyId } = created.body.data;
    expect(key).toMatch(/^ak_/);
    expect((await ctx.merchant.get('/v1/me').set('X-API-Key', key)).body.data.permissions).toEqual(['orders:read']);

    const list = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/api-keys`);
    expect(JSON.stringify(list.body)).not.toContain(key);
    expect(list.body.data.find((k: { apiKeyId: string }) => k.apiKeyId === apiKeyId)).toMatchObject({ revoked: false, prefix: key.slice(0, 10) });

    const revoked = await ctx.admin.post(`/v1/api-keys/${apiKeyId}/revoke`);
    expect(revoked.body.data).toMatchObject({ revoked: true, revokedAt: expect.any(String) });
    expect((await ctx.merchant.get('/v1/me').set('X-API-Key', key)).status).toBe(401);
    // Revoking twice succeeds and keeps the first revocation time.
    const again = await ctx.admin.post(`/v1/api-keys/${apiKeyId}/revoke`);
    expect(again.body.data.revokedAt).toBe(revoked.body.data.revokedAt);
    expect((await ctx.admin.post('/v1/api-keys/AKI_missing/revoke')).status).toBe(404);
    expect((await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/api-keys`).send({ permissions: ['root'] })).status).toBe(400);
  });
});
