/**
 * The merchant API key cache (src/orgs/api-key-cache.ts): a key revoked, or an organization
 * changed, by another process takes effect within API_KEY_CACHE_TTL_MS by the clock; in the
 * process that made the change, at once. Time moves by the test's manual clock, never by waiting.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/kernel/clock.js';
import { API_KEY_CACHE_TTL_MS, ApiKeyCache } from '../../src/orgs/api-key-cache.js';
import type { ApiKeyWithOrganization } from '../../src/orgs/orgs.repository.js';
import { KnexOrgRepository } from '../../src/orgs/orgs.repository.js';
import { OrgService } from '../../src/orgs/orgs.service.js';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
/** The same database seen by a second Kassa process (its own service, its own cache). */
let otherProcess: OrgService;
beforeAll(async () => {
  ctx = await createTestContext();
  otherProcess = new OrgService(new KnexOrgRepository(ctx.testDb.database.db), ctx.clock);
});
afterAll(async () => {
  await ctx?.close();
});

const me = (key: string) => ctx.merchant.get('/v1/me').set('X-API-Key', key);

describe('API key cache', () => {
  it('a key revoked by another process answers 401 once the bound has passed, not before', async () => {
    const created = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'revoked elsewhere' });
    expect((await me(created.key)).status).toBe(200);
    await otherProcess.revokeApiKey(created.id);
    ctx.clock.advance(API_KEY_CACHE_TTL_MS - 1);
    expect((await me(created.key)).status).toBe(200);
    ctx.clock.advance(1);
    const res = await me(created.key);
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ success: false, error: { code: 'UNAUTHORIZED' } });
    // Once refused, it stays refused (the revoked row is what is cached now).
    ctx.clock.advance(1);
    expect((await me(created.key)).status).toBe(401);
  });

  it('a key revoked in this process answers 401 on the next request', async () => {
    const created = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'revoked here' });
    expect((await me(created.key)).status).toBe(200);
    await ctx.services.orgs.revokeApiKey(created.id);
    expect((await me(created.key)).status).toBe(401);
  });

  it('an organization frozen by another process refuses checkouts within the bound', async () => {
    const create = () =>
      ctx.merchant
        .post('/v1/checkout-sessions')
        .set('X-API-Key', ctx.orgB.apiKey)
        .set('Idempotency-Key', `cache-${Math.random()}`)
        .send({ pricingData: { amount: 500, currency: 'USD', productData: { name: 'Cache test' } } });
    expect((await create()).status).toBe(201);
    await otherProcess.updateOrganization(ctx.orgB.orgId, { frozen: true });
    try {
      ctx.clock.advance(API_KEY_CACHE_TTL_MS);
      const refused = await create();
      expect(refused.status).toBe(403);
      expect(refused.body.error.message).toContain('frozen');
    } finally {
      await ctx.services.orgs.updateOrganization(ctx.orgB.orgId, { frozen: false });
    }
    expect((await create()).status).toBe(201);
  });

  it('a clock set back does not extend an entry', async () => {
    const created = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'clock back' });
    expect((await me(created.key)).status).toBe(200);
    await otherProcess.revokeApiKey(created.id);
    ctx.clock.advance(-1);
    expect((await me(created.key)).status).toBe(401);
  });
});

describe('ApiKeyCache', () => {
  const key = { id: 'AKI_1' } as ApiKeyWithOrganization;

  it('does not keep a read that overlapped an invalidation', async () => {
    const cache = new ApiKeyCache(new ManualClock());
    let reads = 0;
    let release!: () => void;
    const slowRead = () => {
      reads++;
      return new Promise<ApiKeyWithOrganization>((resolve) => (release = () => resolve(key)));
    };
    const pending = cache.get('h', slowRead);
    cache.clear(); // the key is revoked while its stale row is on the way
    release();
    expect(await pending).toBe(key);
    await cache.get('h', async () => (reads++, key));
    expect(reads).toBe(2);
  });

  it('never caches an unknown key, and holds at most its maximum of entries', async () => {
    const cache = new ApiKeyCache(new ManualClock(), API_KEY_CACHE_TTL_MS, 2);
    let reads = 0;
    const read = (found: ApiKeyWithOrganization | undefined) => async () => (reads++, found);
    await cache.get('unknown', read(undefined));
    await cache.get('unknown', read(undefined));
    expect(reads).toBe(2);
    await cache.get('a', read(key));
    await cache.get('b', read(key));
    await cache.get('c', read(key)); // pushes out 'a', the oldest
    reads = 0;
    await cache.get('b', read(key));
    await cache.get('c', read(key));
    expect(reads).toBe(0);
    await cache.get('a', read(key));
    expect(reads).toBe(1);
  });
});
