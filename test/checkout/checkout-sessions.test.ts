/** POST/GET/expire checkout sessions: every rule of the spec's table, idempotency, org isolation. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let priceId: string;
let productId: string;
beforeAll(async () => {
  ctx = await createTestContext();
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Coffee beans', description: '1 kg, whole' });
  productId = product.id;
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 2500, currency: 'USD', pricingName: 'One bag' })).id;
});
afterAll(async () => {
  await ctx?.close();
});

let keyCounter = 0;
const create = (body: object, options: { key?: string; apiKey?: string } = {}) =>
  ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', options.apiKey ?? ctx.orgA.apiKey)
    .set('Idempotency-Key', options.key ?? `key-${++keyCounter}`)
    .send(body);

const inline = (extra: object = {}) => ({ pricingData: { amount: 1500, currency: 'usd', productData: { name: '  T-shirt  ', description: 'Blue' } }, ...extra });

describe('POST /v1/checkout-sessions', () => {
  it('creates a payable session from inline pricing, with a snapshot and an unguessable URL', async () => {
    const res = await create(inline({ quantity: 3, customerEmail: 'ann@example.com', merchantReference: 'order-42', metadata: { cart: 'c1' }, successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/cancel' }));
    expect(res.status).toBe(201);
    const s = res.body.data;
    expect(s).toMatchObject({
      status: 'CREATED',
      amount: 4500,
      currency: 'USD',
      quantity: 3,
      provider: 'STRIPE',
      customerId: null,
      customerEmail: 'ann@example.com',
      merchantReference: 'order-42',
      metadata: { cart: 'c1' },
      orderId: null,
      orderStatus: null,
      paymentLinkId: null,
      productName: 'T-shirt',
      lastError: null,
      createdAt: '2026-11-22T09:00:00.000Z',
      expiresAt: '2026-11-22T10:00:00.000Z',
      pricing: { amount: 1500, currency: 'USD', pricingType: 'ONE_TIME', billingInterval: null, billingIntervalCount: 1, pricingId: null, pricingName: 'T-shirt', flexibleAmount: false, minAmount: null, maxAmount: null },
      product: { productId: null, name: 'T-shirt', description: 'Blue' },
    });
    expect(s.id).toMatch(/^CS_[0-9A-Za-z]{24}$/);
    expect(s.url).toMatch(/^http:\/\/merchant\.test\/checkout\/[0-9A-Za-z]{32}$/);
    expect(s.url).not.toContain(s.id);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
  });

  it('creates no catalog product or price for inline details', async () => {
    const before = await ctx.testDb.database.db('products').count<{ count: number }[]>({ count: '*' }).first();
    await create(inline());
    const after = await ctx.testDb.database.db('products').count<{ count: number }[]>({ count: '*' }).first();
    expect(Number(after?.count)).toBe(Number(before?.count));
  });

  it('sells a catalog price by pricingId and keeps the snapshot when the catalog changes later', async () => {
    const res = await create({ pricingId: priceId, quantity: 2 });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ amount: 5000, pricing: { pricingId: priceId, amount: 2500, pricingName: 'One bag' }, product: { productId, name: 'Coffee beans', description: '1 kg, whole' } });
    await ctx.services.catalog.updateProduct(productId, { name: 'Renamed beans' });
    const read = await ctx.merchant.get(`/v1/checkout-sessions/${res.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(read.body.data.product.name).toBe('Coffee beans');
    expect(read.body.data.productName).toBe('Coffee beans');
    await ctx.services.catalog.updateProduct(productId, { name: 'Coffee beans' });
  });

  it('sells an existing product at a price given for this purchase (pricingData.productId)', async () => {
    const res = await create({ pricingData: { amount: 999, currency: 'EUR', productId } });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ amount: 999, currency: 'EUR', product: { productId, name: 'Coffee beans' }, pricing: { pricingId: null } });
  });

  it('accepts subscription pricing on the card rail', async () => {
    const res = await create({ pricingData: { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', productData: { name: 'Pro plan' } } });
    expect(res.status).toBe(201);
    expect(res.body.data.pricing).toMatchObject({ pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 });
  });

  it.each([
    ['an unknown pricingId', { pricingId: 'PRC_000000000000000000000000' }, /pricingId/],
    ["another organization's product", 'ORG_B_PRODUCT', /productId/],
    ['an empty inline name after trimming', { pricingData: { amount: 1, currency: 'USD', productData: { name: '   ' } } }, /name/],
    ['a crypto currency on the card rail', { pricingData: { amount: 1, currency: 'USDC', productData: { name: 'x' } } }, /currency/],
    ['a made-up currency', { pricingData: { amount: 1, currency: 'XYZ', productData: { name: 'x' } } }, /ISO 4217/],
    ['an interval on a one-time price', { pricingData: { amount: 1, currency: 'USD', billingInterval: 'MONTH', productData: { name: 'x' } } }, /billingInterval, billingIntervalCount are not allowed here/],
    ['expiresIn below the card minimum', { ...inline(), expiresIn: 1799 }, /expiresIn/],
    ['expiresIn above the maximum', { ...inline(), expiresIn: 86401 }, /expiresIn/],
    ['an amount × quantity past 2^53', { pricingData: { amount: 9007199254740991, currency: 'USD', productData: { name: 'x' } }, quantity: 2 }, /amount/],
    ['a customerId of no customer', { ...inline(), customerId: 'CUS_000000000000000000000000' }, /customerId/],
    ['a subscription without interval', { pricingData: { amount: 1, currency: 'USD', pricingType: 'SUBSCRIPTION', productData: { name: 'x' } } }, /billingInterval/],
    ['an invalid e-mail', { ...inline(), customerEmail: 'not-an-email' }, /customerEmail/],
    ['a customerEmail over 255 bytes', { ...inline(), customerEmail: `${'é'.repeat(120)}@example.com` }, /customerEmail/],
  ])('answers 400 naming the field for %s', async (_label, body, message) => {
    let payload: unknown = body;
    if (body === 'ORG_B_PRODUCT') {
      const other = await ctx.services.catalog.createProduct(ctx.orgB.orgId, { name: 'B product' });
      payload = { pricingData: { amount: 1, currency: 'USD', productId: other.id } };
    }
    const res = await create(payload as object);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.message).toMatch(message);
  });

  it.each([
    [{ frozen: true }, /frozen/],
    [{ cardVerified: false }, /verification/],
    [{ cardAccountEnabled: false }, /payment account/],
  ])('answers 403 FORBIDDEN with the reason when the organization is %o', async (flags, message) => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Restricted' });
    const key = await ctx.services.orgs.createApiKey(org.id, {});
    await ctx.services.orgs.updateOrganization(org.id, flags);
    const res = await create(inline(), { apiKey: key.key });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('FORBIDDEN');
    expect(res.body.error.message).toMatch(message);
  });
});

describe('idempotency', () => {
  it('returns the same session for the same key and parameters, marked as a replay', async () => {
    const first = await create(inline({ merchantReference: 'idem-1' }), { key: 'idem-same' });
    const second = await create(inline({ merchantReference: 'idem-1' }), { key: 'idem-same' });
    expect(second.status).toBe(201);
    expect(second.body.data.id).toBe(first.body.data.id);
    expect(second.body.data.url).toBe(first.body.data.url);
    expect(second.headers['idempotent-replayed']).toBe('true');
  });

  it('answers 409 IDEMPOTENCY_KEY_REUSED for the same key with different parameters', async () => {
    await create(inline({ quantity: 1 }), { key: 'idem-diff' });
    const res = await create(inline({ quantity: 2 }), { key: 'idem-diff' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('answers 409 CONFLICT when the session of a retried key can no longer be paid', async () => {
    const first = await create(inline(), { key: 'idem-expired' });
    await ctx.merchant.post(`/v1/checkout-sessions/${first.body.data.id}/expire`).set('X-API-Key', ctx.orgA.apiKey);
    const res = await create(inline(), { key: 'idem-expired' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('CONFLICT');
    expect(res.body.error.message).toMatch(/new key/);
  });

  it('scopes keys per organization', async () => {
    const a = await create(inline(), { key: 'idem-shared' });
    const b = await create(inline(), { key: 'idem-shared', apiKey: ctx.orgB.apiKey });
    expect(b.status).toBe(201);
    expect(b.body.data.id).not.toBe(a.body.data.id);
  });

  it('lets different keys create separate sessions with the same merchantReference', async () => {
    const a = await create(inline({ merchantReference: 'same-ref' }));
    const b = await create(inline({ merchantReference: 'same-ref' }));
    expect(a.body.data.id).not.toBe(b.body.data.id);
  });

  it('stores nothing for a failed creation, so a corrected retry with the same key succeeds', async () => {
    const bad = await create({ pricingId: 'PRC_000000000000000000000000' }, { key: 'idem-retry' });
    expect(bad.status).toBe(400);
    expect(bad.body.data).toBeUndefined();
    const good = await create(inline(), { key: 'idem-retry' });
    expect(good.status).toBe(201);
  });

  it('forgets keys after 24 hours: the key starts a new session and the old one is kept', async () => {
    const first = await create(inline(), { key: 'idem-ttl' });
    ctx.clock.advance(24 * 3600 * 1000 + 1000);
    const again = await create(inline(), { key: 'idem-ttl' });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.data.id).not.toBe(first.body.data.id);
    // The key now belongs to the new session; the old session is still readable.
    const replay = await create(inline(), { key: 'idem-ttl' });
    expect(replay.body.data.id).toBe(again.body.data.id);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    const old = await ctx.merchant.get(`/v1/checkout-sessions/${first.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(old.status).toBe(200);
  });

  it('replays the original session to a retry the organization would now refuse (frozen after the first call)', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Frozen later' });
    const key = await ctx.services.orgs.createApiKey(org.id, {});
    const first = await create(inline(), { key: 'idem-frozen', apiKey: key.key });
    expect(first.status).toBe(201);
    await ctx.services.orgs.updateOrganization(org.id, { frozen: true });
    const retry = await create(inline(), { key: 'idem-frozen', apiKey: key.key });
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body.data.id).toBe(first.body.data.id);
    // A new key is refused, so the replay is not a way around the freeze.
    const fresh = await create(inline(), { key: 'idem-frozen-new', apiKey: key.key });
    expect(fresh.status).toBe(403);
  });

  it('answers IDEMPOTENCY_KEY_REUSED, not a validation error, when a used key comes back with invalid parameters', async () => {
    await create(inline(), { key: 'idem-invalid-retry' });
    const res = await create({ pricingId: 'PRC_000000000000000000000000' }, { key: 'idem-invalid-retry' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('creates exactly one session when 20 retries with one key arrive at once', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, () => create(inline({ merchantReference: 'burst' }), { key: 'idem-burst' })));
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(201));
    expect(new Set(results.map((r) => r.body.data.id)).size).toBe(1);
    const rows = await ctx.testDb.database.db('checkout_sessions').where({ org_id: ctx.orgA.orgId, merchant_reference: 'burst' });
    expect(rows).toHaveLength(1);
  });
});

describe('GET and expire', () => {
  it("reads a session of the caller's organization and 404s another organization's", async () => {
    const created = await create(inline());
    const id = created.body.data.id;
    const own = await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(own.status).toBe(200);
    expect(own.body.data).toEqual(created.body.data);
    const other = await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', ctx.orgB.apiKey);
    expect(other.status).toBe(404);
    expect(other.body.error.code).toBe('NOT_FOUND');
    expect((await ctx.merchant.post(`/v1/checkout-sessions/${id}/expire`).set('X-API-Key', ctx.orgB.apiKey)).status).toBe(404);
    expect((await ctx.merchant.get('/v1/checkout-sessions/CS_000000000000000000000000').set('X-API-Key', ctx.orgA.apiKey)).status).toBe(404);
  });

  it('expires CREATED → EXPIRED with a null url, and succeeds again on EXPIRED', async () => {
    const { id } = (await create(inline())).body.data;
    const first = await ctx.merchant.post(`/v1/checkout-sessions/${id}/expire`).set('X-API-Key', ctx.orgA.apiKey);
    expect(first.status).toBe(200);
    expect(first.body.data).toMatchObject({ id, status: 'EXPIRED', url: null });
    const again = await ctx.merchant.post(`/v1/checkout-sessions/${id}/expire`).set('X-API-Key', ctx.orgA.apiKey);
    expect(again.status).toBe(200);
    expect(again.body.data.status).toBe('EXPIRED');
  });

  it('moves a session to EXPIRED by itself once expiresAt passes (on read, and by the sweeper)', async () => {
    const { id } = (await create(inline({ expiresIn: 1800 }))).body.data;
    const { id: unread } = (await create(inline({ expiresIn: 1800 }))).body.data;
    ctx.clock.advance(1800 * 1000);
    const read = await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(read.body.data).toMatchObject({ status: 'EXPIRED', url: null });
    expect(await ctx.services.checkout.expireDue()).toBeGreaterThan(0);
    const row = await ctx.testDb.database.db('checkout_sessions').where({ id: unread }).first();
    expect(row.status).toBe('EXPIRED');
  });
});
