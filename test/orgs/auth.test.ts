/** Merchant API keys: format, lookup, revocation, permissions, organization scoping. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

const UNAUTHORIZED = { success: false, error: { code: 'UNAUTHORIZED' } };

describe('GET /v1/me', () => {
  it("returns the calling key's id, organization and permissions", async () => {
    const res = await ctx.merchant.get('/v1/me').set('X-API-Key', ctx.orgA.apiKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      message: 'OK',
      data: {
        apiKeyId: ctx.orgA.apiKeyId,
        orgId: ctx.orgA.orgId,
        permissions: ['checkout:write', 'catalog:read', 'orders:read', 'subscriptions:read', 'customers:read', 'webhooks:write', 'entitlements:read', 'x402:settle', 'customers:write', 'usage:write', 'meters:read', 'meters:write', 'subscriptions:manage'],
      },
    });
  });

  it("another organization's key sees only that organization", async () => {
    const res = await ctx.merchant.get('/v1/me').set('X-API-Key', ctx.orgB.apiKey);
    expect(res.body.data.orgId).toBe(ctx.orgB.orgId);
    expect(res.body.data.orgId).not.toBe(ctx.orgA.orgId);
  });

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['malformed', 'not-a-key'],
    ['well-formed but unknown', `ak_${'A'.repeat(43)}`],
    ['a real key with one character changed', 'MUTATE'],
  ])('answers 401 UNAUTHORIZED for a %s key', async (_label, value) => {
    let key = value;
    if (key === 'MUTATE') key = ctx.orgA.apiKey.slice(0, -1) + (ctx.orgA.apiKey.endsWith('A') ? 'B' : 'A');
    const req = ctx.merchant.get('/v1/me');
    if (key !== undefined) req.set('X-API-Key', key);
    const res = await req;
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject(UNAUTHORIZED);
  });

  it('answers 401 once a key is revoked', async () => {
    const created = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'to revoke' });
    expect((await ctx.merchant.get('/v1/me').set('X-API-Key', created.key)).status).toBe(200);
    await ctx.services.orgs.revokeApiKey(created.id);
    const res = await ctx.merchant.get('/v1/me').set('X-API-Key', created.key);
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject(UNAUTHORIZED);
  });

  it('checks authentication before validating the request', async () => {
    const res = await ctx.merchant.post('/v1/checkout-sessions').send({ nonsense: true });
    expect(res.status).toBe(401);
  });
});

describe('permissions', () => {
  it('refuses an operation whose permission the key lacks with 403 FORBIDDEN', async () => {
    const limited = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { permissions: ['orders:read'] });
    const me = await ctx.merchant.get('/v1/me').set('X-API-Key', limited.key);
    expect(me.status).toBe(200);
    expect(me.body.data.permissions).toEqual(['orders:read']);
    const res = await ctx.merchant.get('/v1/product').set('X-API-Key', limited.key);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ success: false, error: { code: 'FORBIDDEN' } });
    expect(res.body.error.message).toContain('catalog:read');
  });
});

describe('key storage', () => {
  it('stores only a SHA-256 hash and a short prefix of the key', async () => {
    const rows = await ctx.testDb.database.db('api_keys').where({ id: ctx.orgA.apiKeyId });
    expect(rows).toHaveLength(1);
    const serialized = JSON.stringify(rows[0]);
    expect(serialized).not.toContain(ctx.orgA.apiKey);
    expect(rows[0].key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(ctx.orgA.apiKey.startsWith(rows[0].prefix)).toBe(true);
    expect(rows[0].prefix.length).toBeLessThanOrEqual(10);
  });

  it('issues keys of the documented shape: ak_ + base64url(32 bytes)', () => {
    expect(ctx.orgA.apiKey).toMatch(/^ak_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(ctx.orgA.apiKey.slice(3), 'base64url')).toHaveLength(32);
  });
});
