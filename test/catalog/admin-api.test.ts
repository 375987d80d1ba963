/**
 * Catalog management through the admin API: products, prices (every rule of PriceCreate, whether
 * the schema or the service states it), payment links; and the catalog service's reads that
 * checkout builds on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createLink, createPrice, createProduct } from './fixtures.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

const UNKNOWN_PRODUCT = 'PRD_000000000000000000000000';

describe('admin products', () => {
  it('creates a published product with trimmed fields and stores it in the organization', async () => {
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/products`).send({ name: '  Pro plan ', description: ' Priority support.  ' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ success: true, message: 'Product created' });
    const product = res.body.data;
    expect(product).toEqual({
      productId: expect.stringMatching(/^PRD_[0-9A-Za-z]{24}$/),
      orgId: ctx.orgA.orgId,
      name: 'Pro plan',
      description: 'Priority support.',
      status: 'PUBLISHED',
      createdAt: ctx.clock.now().toISOString(),
      updatedAt: ctx.clock.now().toISOString(),
    });
    const stored = await ctx.services.catalog.findProduct(ctx.orgA.orgId, product.productId);
    expect(stored).toMatchObject({ id: product.productId, name: 'Pro plan', description: 'Priority support.', status: 'PUBLISHED' });
    // Scoped reads: the same id is nothing in another organization.
    expect(await ctx.services.catalog.findProduct(ctx.orgB.orgId, product.productId)).toBeUndefined();
  });

  it('creates a draft without description (description null)', async () => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Draft thing', status: 'DRAFT' });
    expect(product).toMatchObject({ status: 'DRAFT', description: null });
  });

  it('refuses bad bodies with 400 naming the field, and unknown organizations with 404', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{}, 'name'],
      [{ name: '   ' }, 'name'],
      [{ name: 'x'.repeat(256) }, 'name'],
      [{ name: 'A', status: 'ARCHIVED' }, 'status'],
      [{ name: 'A', description: '' }, 'description'],
      [{ name: 'A', price: 100 }, 'price'],
    ];
    for (const [body, field] of cases) {
      const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/products`).send(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect(res.body.error.message, JSON.stringify(body)).toContain(field);
    }
    const missing = await ctx.admin.post('/v1/orgs/ORG_000000000000000000000000/products').send({ name: 'A' });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toEqual({ code: 'NOT_FOUND', message: 'Organization not found' });
  });

  it('requires the admin token', async () => {
    const { default: supertest } = await import('supertest');
    const res = await supertest(ctx.apps.admin).post(`/v1/orgs/${ctx.orgA.orgId}/products`).send({ name: 'A' });
    expect(res.status).toBe(401);
  });

  it('updates name, description and state; null removes the description; updatedAt moves', async () => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Old', description: 'Old text' });
    ctx.clock.advance(60_000);
    const res = await ctx.admin.patch(`/v1/products/${product.productId}`).send({ name: ' New ', description: null, status: 'DRAFT' });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ productId: product.productId, name: 'New', description: null, status: 'DRAFT', createdAt: product.createdAt });
    expect(res.body.data.updatedAt).toBe(ctx.clock.now().toISOString());
    expect(await ctx.services.catalog.findProduct(ctx.orgA.orgId, product.productId)).toMatchObject({ name: 'New', description: null });

    const described = await ctx.admin.patch(`/v1/products/${product.productId}`).send({ description: 'Fresh' });
    expect(described.body.data).toMatchObject({ name: 'New', description: 'Fresh', status: 'DRAFT' });
  });

  it('refuses empty or invalid updates and unknown products', async () => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Stable' });
    for (const [body, field] of [[{}, 'body'], [{ status: 'GONE' }, 'status'], [{ name: '' }, 'name'], [{ orgId: ctx.orgB.orgId }, 'orgId']] as const) {
      const res = await ctx.admin.patch(`/v1/products/${product.productId}`).send(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.message).toContain(field);
    }
    expect((await ctx.services.catalog.findProduct(ctx.orgA.orgId, product.productId))?.orgId).toBe(ctx.orgA.orgId);
    const missing = await ctx.admin.patch(`/v1/products/${UNKNOWN_PRODUCT}`).send({ name: 'x' });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('NOT_FOUND');
  });

  it('archives (idempotently) and can publish an archived product again', async () => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Seasonal' });
    const archived = await ctx.admin.post(`/v1/products/${product.productId}/archive`);
    expect(archived.status).toBe(200);
    expect(archived.body.data.status).toBe('ARCHIVED');
    expect((await ctx.admin.post(`/v1/products/${product.productId}/archive`)).body.data.status).toBe('ARCHIVED');
    const republished = await ctx.admin.patch(`/v1/products/${product.productId}`).send({ status: 'PUBLISHED' });
    expect(republished.body.data.status).toBe('PUBLISHED');
    expect((await ctx.admin.post(`/v1/products/${UNKNOWN_PRODUCT}/archive`)).status).toBe(404);
  });

  it("lists one organization's products in every state, filtered by status and search, newest first", async () => {
    const org = (await ctx.admin.post('/v1/orgs').send({ name: 'Listing org' })).body.data.orgId;
    const a = await createProduct(ctx, org, { name: 'Alpha' });
    ctx.clock.advance(1000);
    const b = await createProduct(ctx, org, { name: 'Beta', status: 'DRAFT' });
    ctx.clock.advance(1000);
    const c = await createProduct(ctx, org, { name: 'alphabet soup' });
    await ctx.admin.post(`/v1/products/${c.productId}/archive`);

    const all = await ctx.admin.get(`/v1/orgs/${org}/products`);
    expect(all.status).toBe(200);
    expect(all.body.data).toMatchObject({ total: 3, page: 1, size: 20, pages: 1, current: 1 });
    expect(all.body.data.records.map((p: any) => p.productId)).toEqual([c.productId, b.productId, a.productId]);

    const drafts = await ctx.admin.get(`/v1/orgs/${org}/products?status=DRAFT`);
    expect(drafts.body.data.records.map((p: any) => p.name)).toEqual(['Beta']);
    const alphas = await ctx.admin.get(`/v1/orgs/${org}/products?search=ALPHA`);
    expect(alphas.body.data.records.map((p: any) => p.name)).toEqual(['alphabet soup', 'Alpha']);
    const paged = await ctx.admin.get(`/v1/orgs/${org}/products?size=1&page=2`);
    expect(paged.body.data).toMatchObject({ total: 3, page: 2, size: 1, pages: 3 });
    expect(paged.body.data.records.map((p: any) => p.productId)).toEqual([b.productId]);

    expect((await ctx.admin.get(`/v1/orgs/${org}/products?status=GONE`)).status).toBe(400);
    expect((await ctx.admin.get('/v1/orgs/ORG_000000000000000000000000/products')).status).toBe(404);
  });
});

describe('admin prices', () => {
  let product: any;
  beforeAll(async () => {
    product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Priced product' });
  });

  it('creates a one-time card price with the defaults filled in', async () => {
    const res = await ctx.admin.post(`/v1/products/${product.productId}/prices`).send({ amount: 1500, currency: 'USD' });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      pricingId: expect.stringMatching(/^PRC_[0-9A-Za-z]{24}$/),
      orgId: ctx.orgA.orgId,
      productId: product.productId,
      amount: 1500,
      currency: 'USD',
      pricingType: 'ONE_TIME',
      billingInterval: null,
      billingIntervalCount: 1,
      pricingName: 'Priced product',
      flexibleAmount: false,
      minAmount: null,
      maxAmount: null,
      provider: 'STRIPE',
      active: true,
      meteredComponents: [],
      createdAt: ctx.clock.now().toISOString(),
    });
    const found = await ctx.services.catalog.findPrice(ctx.orgA.orgId, res.body.data.pricingId);
    expect(found?.price).toMatchObject({ amount: 1500, currency: 'USD', pricingType: 'ONE_TIME', provider: 'STRIPE', active: true });
    expect(found?.product.id).toBe(product.productId);
    expect(await ctx.services.catalog.findPrice(ctx.orgB.orgId, res.body.data.pricingId)).toBeUndefined();
  });

  it('creates subscription, crypto and flexible prices', async () => {
    const sub = await createPrice(ctx, product.productId, {
      amount: 9900, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'YEAR', billingIntervalCount: 2, pricingName: 'Biennial',
    });
    expect(sub).toMatchObject({ pricingType: 'SUBSCRIPTION', billingInterval: 'YEAR', billingIntervalCount: 2, pricingName: 'Biennial', provider: 'STRIPE' });
    const crypto = await createPrice(ctx, product.productId, { amount: 29_000_000, currency: 'USDT', provider: 'CRYPTO' });
    expect(crypto).toMatchObject({ currency: 'USDT', provider: 'CRYPTO', pricingType: 'ONE_TIME', billingInterval: null });
    const flexible = await createPrice(ctx, product.productId, { amount: 2000, currency: 'GBP', flexibleAmount: true, minAmount: 500, maxAmount: 10_000 });
    expect(flexible).toMatchObject({ flexibleAmount: true, minAmount: 500, maxAmount: 10_000 });
    const openEnded = await createPrice(ctx, product.productId, { amount: 1000, currency: 'USD', flexibleAmount: true });
    expect(openEnded).toMatchObject({ amount: 1000, flexibleAmount: true, minAmount: null, maxAmount: null });
    // The card rail's largest amount (test/checkout/amount-bounds.test.ts has the bounds' edges).
    const biggest = await createPrice(ctx, product.productId, { amount: 99_999_999, currency: 'JPY' });
    expect(biggest.amount).toBe(99_999_999);
    const stored = await ctx.services.catalog.findPrice(ctx.orgA.orgId, biggest.pricingId);
    expect(stored?.price.amount).toBe(99_999_999);
  });

  // Each case: body, the field the message must name.
  const invalid: Array<[string, Record<string, unknown>, string]> = [
    ['missing amount', { currency: 'USD' }, 'amount'],
    ['negative amount', { amount: -1, currency: 'USD' }, 'amount'],
    ['fractional amount', { amount: 1.5, currency: 'USD' }, 'amount'],
    ['amount above a safe integer', { amount: 9007199254740992, currency: 'USD' }, 'amount'],
    ['amount 0 (nothing is free)', { amount: 0, currency: 'USD' }, 'amount'],
    ['amount above the card maximum', { amount: 100_000_000, currency: 'JPY' }, 'amount'],
    ['amount as a word', { amount: 'ten', currency: 'USD' }, 'amount'],
    ['amount as a numeric string', { amount: '100', currency: 'USD' }, 'amount'],
    ['missing currency', { amount: 100 }, 'currency'],
    ['lowercase currency', { amount: 100, currency: 'usd' }, 'currency'],
    ['currency not ISO 4217', { amount: 100, currency: 'XYZ' }, 'currency'],
    ['stablecoin on the card rail', { amount: 100, currency: 'USDC' }, 'currency'],
    ['stablecoin on the explicit card rail', { amount: 100, currency: 'USDT', provider: 'STRIPE' }, 'currency'],
    ['fiat on the crypto rail', { amount: 100, currency: 'USD', provider: 'CRYPTO' }, 'currency'],
    ['crypto subscription', { amount: 100, currency: 'USDC', provider: 'CRYPTO', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' }, 'pricingType'],
    ['unknown provider', { amount: 100, currency: 'USD', provider: 'PAYPAL' }, 'provider'],
    ['subscription without interval', { amount: 100, currency: 'USD', pricingType: 'SUBSCRIPTION' }, 'billingInterval'],
    ['one-time with interval', { amount: 100, currency: 'USD', billingInterval: 'MONTH' }, 'billingInterval'],
    ['explicit one-time with interval count', { amount: 100, currency: 'USD', pricingType: 'ONE_TIME', billingIntervalCount: 1 }, 'billingIntervalCount'],
    ['interval count 0', { amount: 100, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'DAY', billingIntervalCount: 0 }, 'billingIntervalCount'],
    ['interval count 366', { amount: 100, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'DAY', billingIntervalCount: 366 }, 'billingIntervalCount'],
    ['unknown interval', { amount: 100, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'WEEK' }, 'billingInterval'],
    ['unknown pricing type', { amount: 100, currency: 'USD', pricingType: 'USAGE' }, 'pricingType'],
    ['bounds without flexibleAmount', { amount: 100, currency: 'USD', minAmount: 50 }, 'minAmount'],
    ['max bound with flexibleAmount false', { amount: 100, currency: 'USD', flexibleAmount: false, maxAmount: 500 }, 'maxAmount'],
    ['flexible subscription', { amount: 100, currency: 'USD', flexibleAmount: true, pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' }, 'pricingType'],
    ['minAmount above maxAmount', { amount: 100, currency: 'USD', flexibleAmount: true, minAmount: 500, maxAmount: 50 }, 'minAmount'],
    ['suggested amount below minAmount', { amount: 100, currency: 'USD', flexibleAmount: true, minAmount: 500 }, 'minAmount'],
    ['suggested amount above maxAmount', { amount: 900, currency: 'USD', flexibleAmount: true, maxAmount: 500 }, 'maxAmount'],
    ['negative minAmount', { amount: 100, currency: 'USD', flexibleAmount: true, minAmount: -5 }, 'minAmount'],
    ['blank pricingName', { amount: 100, currency: 'USD', pricingName: '  ' }, 'pricingName'],
    ['unknown field', { amount: 100, currency: 'USD', taxBehavior: 'inclusive' }, 'taxBehavior'],
  ];

  it.each(invalid)('refuses %s with 400 naming the field, storing nothing', async (_name, body, field) => {
    const before = (await ctx.admin.get(`/v1/products/${product.productId}/prices`)).body.data.length;
    const res = await ctx.admin.post(`/v1/products/${product.productId}/prices`).send(body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    expect(res.body.error.message).toContain(field);
    expect((await ctx.admin.get(`/v1/products/${product.productId}/prices`)).body.data.length).toBe(before);
  });

  it('refuses prices for unknown (404) and archived (409) products', async () => {
    expect((await ctx.admin.post(`/v1/products/${UNKNOWN_PRODUCT}/prices`).send({ amount: 1, currency: 'USD' })).status).toBe(404);
    const archived = await createProduct(ctx, ctx.orgA.orgId, { name: 'Gone' });
    await ctx.admin.post(`/v1/products/${archived.productId}/archive`);
    const res = await ctx.admin.post(`/v1/products/${archived.productId}/prices`).send({ amount: 1, currency: 'USD' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('CONFLICT');
    expect(res.body.error.message).toContain('archived');
  });

  it("lists a product's prices newest first, inactive ones included", async () => {
    const fresh = await createProduct(ctx, ctx.orgA.orgId, { name: 'Two prices' });
    const first = await createPrice(ctx, fresh.productId, { amount: 100, currency: 'USD' });
    ctx.clock.advance(1000);
    const second = await createPrice(ctx, fresh.productId, { amount: 200, currency: 'USD' });
    await ctx.admin.post(`/v1/prices/${first.pricingId}/deactivate`);
    const res = await ctx.admin.get(`/v1/products/${fresh.productId}/prices`);
    expect(res.status).toBe(200);
    expect(res.body.data.map((p: any) => [p.pricingId, p.active])).toEqual([[second.pricingId, true], [first.pricingId, false]]);
    expect((await ctx.admin.get(`/v1/products/${UNKNOWN_PRODUCT}/prices`)).status).toBe(404);
  });

  it('renames a price (PriceUpdate): only the name changes, sessions already made keep theirs; bad bodies 400, unknown 404, no token 401', async () => {
    const fresh = await createProduct(ctx, ctx.orgA.orgId, { name: 'Nicknamed' });
    const made = await createPrice(ctx, fresh.productId, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' });
    expect(made.pricingName).toBe('Nicknamed');
    const session = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'rename-before').send({ pricingId: made.pricingId });
    expect(session.status, JSON.stringify(session.body)).toBe(201);

    const res = await ctx.admin.patch(`/v1/prices/${made.pricingId}`).send({ pricingName: ' Monthly ' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ success: true, message: 'Price updated' });
    expect(res.body.data).toEqual({ ...made, pricingName: 'Monthly' });
    expect((await ctx.admin.get(`/v1/products/${fresh.productId}/prices`)).body.data[0].pricingName).toBe('Monthly');
    // Not retroactive: the session made before keeps the name it was made with; a new one takes the new name.
    const old = await ctx.merchant.get(`/v1/checkout-sessions/${session.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(old.body.data.pricing.pricingName).toBe('Nicknamed');
    const after = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'rename-after').send({ pricingId: made.pricingId });
    expect(after.body.data.pricing.pricingName).toBe('Monthly');
    expect(after.body.data.amount).toBe(900);

    for (const body of [{}, { pricingName: '' }, { pricingName: ' ' }, { pricingName: 'a'.repeat(256) }, { pricingName: 'Tab\there' }, { pricingName: 'Yearly', amount: 9000 }, { pricingName: 'Yearly', billingInterval: 'YEAR' }]) {
      const bad = await ctx.admin.patch(`/v1/prices/${made.pricingId}`).send(body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.body.error.code).toBe('VALIDATION_ERROR');
    }
    expect((await ctx.admin.get(`/v1/products/${fresh.productId}/prices`)).body.data[0]).toMatchObject({ pricingName: 'Monthly', amount: 900, billingInterval: 'MONTH' });
    expect((await ctx.admin.patch('/v1/prices/PRC_000000000000000000000000').send({ pricingName: 'Nobody' })).status).toBe(404);
    const { default: supertest } = await import('supertest');
    expect((await supertest(ctx.apps.admin).patch(`/v1/prices/${made.pricingId}`).send({ pricingName: 'No token' })).status).toBe(401);
  });
});

describe('admin payment links', () => {
  let product: any;
  let price: any;
  beforeAll(async () => {
    product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Linked product' });
    price = await createPrice(ctx, product.productId, { amount: 1500, currency: 'USD', pricingName: 'Monthly-ish' });
  });

  it('creates a link named after the price, with an unguessable token URL on the public base URL', async () => {
    const res = await ctx.admin.post(`/v1/prices/${price.pricingId}/payment-links`);
    expect(res.status).toBe(201);
    const link = res.body.data;
    expect(link).toEqual({
      paymentLinkId: expect.stringMatching(/^PLK_[0-9A-Za-z]{24}$/),
      paymentLinkUrl: expect.stringMatching(/^http:\/\/merchant\.test\/pay\/[0-9A-Za-z]{32}$/),
      orgId: ctx.orgA.orgId,
      pricingId: price.pricingId,
      productId: product.productId,
      name: 'Monthly-ish',
      isActive: true,
      createdAt: ctx.clock.now().toISOString(),
      updatedAt: ctx.clock.now().toISOString(),
    });
    // The URL carries a token, never the link id.
    expect(link.paymentLinkUrl).not.toContain(link.paymentLinkId.slice(4));

    const named = await createLink(ctx, price.pricingId, { name: ' Spring promo ' });
    expect(named.name).toBe('Spring promo');
    expect(named.paymentLinkUrl).not.toBe(link.paymentLinkUrl);
  });

  it('resolves a link by its token to the link, its price and product (what /pay/:token uses)', async () => {
    const link = await createLink(ctx, price.pricingId);
    const token = link.paymentLinkUrl.split('/pay/')[1];
    const found = await ctx.services.catalog.findPaymentLinkByToken(token);
    expect(found?.link).toMatchObject({ id: link.paymentLinkId, orgId: ctx.orgA.orgId, priceId: price.pricingId, isActive: true, token });
    expect(found?.price).toMatchObject({ id: price.pricingId, amount: 1500, currency: 'USD' });
    expect(found?.product).toMatchObject({ id: product.productId, name: 'Linked product' });
    expect(ctx.services.catalog.paymentLinkUrl(found!.link)).toBe(link.paymentLinkUrl);
    expect(await ctx.services.catalog.findPaymentLinkByToken(token.toLowerCase() === token ? token.toUpperCase() : token.toLowerCase())).toBeUndefined();
    expect(await ctx.services.catalog.findPaymentLinkByToken(link.paymentLinkId)).toBeUndefined();
  });

  it('deactivates a link (idempotently): the token still resolves, inactive', async () => {
    const link = await createLink(ctx, price.pricingId);
    ctx.clock.advance(5000);
    const res = await ctx.admin.post(`/v1/payment-links/${link.paymentLinkId}/deactivate`);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ paymentLinkId: link.paymentLinkId, isActive: false, paymentLinkUrl: link.paymentLinkUrl, updatedAt: ctx.clock.now().toISOString() });
    const deactivatedAt = res.body.data.updatedAt;
    ctx.clock.advance(5000);
    const again = await ctx.admin.post(`/v1/payment-links/${link.paymentLinkId}/deactivate`);
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ isActive: false, updatedAt: deactivatedAt });
    const found = await ctx.services.catalog.findPaymentLinkByToken(link.paymentLinkUrl.split('/pay/')[1]);
    expect(found?.link.isActive).toBe(false);
    expect((await ctx.admin.post('/v1/payment-links/PLK_000000000000000000000000/deactivate')).status).toBe(404);
  });

  it('deactivating a price deactivates its links and refuses new ones (409)', async () => {
    const ownPrice = await createPrice(ctx, product.productId, { amount: 700, currency: 'USD' });
    const link = await createLink(ctx, ownPrice.pricingId);
    const other = await createLink(ctx, price.pricingId);
    const res = await ctx.admin.post(`/v1/prices/${ownPrice.pricingId}/deactivate`);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ pricingId: ownPrice.pricingId, active: false });
    expect((await ctx.services.catalog.findPaymentLinkByToken(link.paymentLinkUrl.split('/pay/')[1]))?.link.isActive).toBe(false);
    expect((await ctx.services.catalog.findPaymentLinkByToken(other.paymentLinkUrl.split('/pay/')[1]))?.link.isActive).toBe(true);
    expect((await ctx.services.catalog.findPrice(ctx.orgA.orgId, ownPrice.pricingId))?.price.active).toBe(false);

    const refused = await ctx.admin.post(`/v1/prices/${ownPrice.pricingId}/payment-links`).send({});
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain('inactive');
    expect((await ctx.admin.post(`/v1/prices/${ownPrice.pricingId}/deactivate`)).body.data.active).toBe(false);
    expect((await ctx.admin.post('/v1/prices/PRC_000000000000000000000000/deactivate')).status).toBe(404);
  });

  it('refuses links for unknown prices (404), archived products (409) and bad bodies (400)', async () => {
    expect((await ctx.admin.post('/v1/prices/PRC_000000000000000000000000/payment-links').send({})).status).toBe(404);
    const archived = await createProduct(ctx, ctx.orgA.orgId, { name: 'To archive' });
    const archivedPrice = await createPrice(ctx, archived.productId, { amount: 1, currency: 'USD' });
    await ctx.admin.post(`/v1/products/${archived.productId}/archive`);
    const res = await ctx.admin.post(`/v1/prices/${archivedPrice.pricingId}/payment-links`).send({});
    expect(res.status).toBe(409);
    expect(res.body.error.message).toContain('archived');
    for (const [body, field] of [[{ name: '' }, 'name'], [{ isActive: false }, 'isActive']] as const) {
      const bad = await ctx.admin.post(`/v1/prices/${price.pricingId}/payment-links`).send(body);
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toContain(field);
    }
  });
});
