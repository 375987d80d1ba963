/**
 * `GET /v1/product`, `GET /v1/product/{id}` and their deprecated `/v1/products…` aliases: the
 * organization's catalog with payment links, filters, pagination, isolation between organizations.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createLink, createPrice, createProduct } from './fixtures.js';

let ctx: TestContext;
const get = (path: string, key = ctx.orgA.apiKey) => ctx.merchant.get(path).set('X-API-Key', key);

// Org A's catalog, oldest first.
let pro: any; // PUBLISHED, description, two prices with three links (one inactive)
let basic: any; // PUBLISHED, no description, no links
let draft: any; // DRAFT
let archived: any; // ARCHIVED
let percent: any; // PUBLISHED, name with LIKE wildcards
let monthly: any;
let usdc: any;
let links: any[];
let foreign: any; // org B's published product

beforeAll(async () => {
  ctx = await createTestContext();
  const step = () => ctx.clock.advance(60_000);
  pro = await createProduct(ctx, ctx.orgA.orgId, { name: 'Pro plan', description: 'Everything in Basic, plus priority support.' });
  monthly = await createPrice(ctx, pro.productId, { amount: 1500, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', pricingName: 'Pro monthly' });
  usdc = await createPrice(ctx, pro.productId, { amount: 29_000_000, currency: 'USDC', provider: 'CRYPTO', flexibleAmount: true, pricingName: 'Pro lifetime (USDC)' });
  step();
  links = [await createLink(ctx, monthly.pricingId)];
  step();
  links.push(await createLink(ctx, usdc.pricingId));
  step();
  links.push(await createLink(ctx, monthly.pricingId, { name: 'Retired promo' }));
  await ctx.admin.post(`/v1/payment-links/${links[2].paymentLinkId}/deactivate`);
  step();
  basic = await createProduct(ctx, ctx.orgA.orgId, { name: 'Basic plan' });
  step();
  draft = await createProduct(ctx, ctx.orgA.orgId, { name: 'Pro plan v2 (draft)', status: 'DRAFT' });
  step();
  archived = await createProduct(ctx, ctx.orgA.orgId, { name: 'Legacy pro plan' });
  await createLink(ctx, (await createPrice(ctx, archived.productId, { amount: 100, currency: 'USD' })).pricingId);
  await ctx.admin.post(`/v1/products/${archived.productId}/archive`);
  step();
  percent = await createProduct(ctx, ctx.orgA.orgId, { name: '100% off_sale' });
  step();
  foreign = await createProduct(ctx, ctx.orgB.orgId, { name: 'Pro plan of B' });
  await createLink(ctx, (await createPrice(ctx, foreign.productId, { amount: 100, currency: 'USD' })).pricingId);
});
afterAll(async () => {
  await ctx?.close();
});

const ids = (res: { body: any }) => res.body.data.records.map((p: any) => p.productId);

describe('GET /v1/product', () => {
  it("lists the organization's published products, newest first, with the paging fields", async () => {
    const res = await get('/v1/product');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, message: 'Products retrieved' });
    expect(ids(res)).toEqual([percent.productId, basic.productId, pro.productId]);
    expect(res.body.data).toMatchObject({ total: 3, page: 1, size: 20, pages: 1, current: 1 });
  });

  it('presents each product with every link of every price, oldest first, inactive ones included', async () => {
    const res = await get('/v1/product?search=pro%20plan');
    const listed = res.body.data.records.find((p: any) => p.productId === pro.productId);
    expect(listed).toEqual({
      id: pro.productId,
      productId: pro.productId,
      name: 'Pro plan',
      description: 'Everything in Basic, plus priority support.',
      status: 'PUBLISHED',
      orgId: ctx.orgA.orgId,
      createdAt: pro.createdAt,
      updatedAt: pro.updatedAt,
      paymentLinks: [
        {
          paymentLinkId: links[0].paymentLinkId,
          amount: 1500,
          createdAt: links[0].createdAt,
          currency: 'USD',
          flexibleAmount: false,
          isActive: true,
          name: 'Pro monthly',
          paymentLinkUrl: links[0].paymentLinkUrl,
          pricingId: monthly.pricingId,
          pricingType: 'SUBSCRIPTION',
          provider: 'STRIPE',
        },
        {
          paymentLinkId: links[1].paymentLinkId,
          amount: 29_000_000,
          createdAt: links[1].createdAt,
          currency: 'USDC',
          flexibleAmount: true,
          isActive: true,
          name: 'Pro lifetime (USDC)',
          paymentLinkUrl: links[1].paymentLinkUrl,
          pricingId: usdc.pricingId,
          pricingType: 'ONE_TIME',
          provider: 'CRYPTO',
        },
        expect.objectContaining({ paymentLinkId: links[2].paymentLinkId, isActive: false, name: 'Retired promo', pricingId: monthly.pricingId }),
      ],
    });
    expect(links[0].paymentLinkUrl).toMatch(/^http:\/\/merchant\.test\/pay\/[0-9A-Za-z]{32}$/);
  });

  it('omits description when unset and gives an empty paymentLinks array for a product without links', async () => {
    const res = await get('/v1/product');
    const listed = res.body.data.records.find((p: any) => p.productId === basic.productId);
    expect(listed).not.toHaveProperty('description');
    expect(listed.paymentLinks).toEqual([]);
  });

  it('filters by status', async () => {
    expect(ids(await get('/v1/product?status=DRAFT'))).toEqual([draft.productId]);
    const archivedList = await get('/v1/product?status=ARCHIVED');
    expect(ids(archivedList)).toEqual([archived.productId]);
    expect(archivedList.body.data.records[0].paymentLinks).toHaveLength(1);
    expect(ids(await get('/v1/product?status=PUBLISHED'))).toEqual([percent.productId, basic.productId, pro.productId]);
  });

  it('searches a case-insensitive substring of the name, within the status filter', async () => {
    expect(ids(await get('/v1/product?search=PRO'))).toEqual([pro.productId]);
    expect(ids(await get('/v1/product?search=plan'))).toEqual([basic.productId, pro.productId]);
    expect(ids(await get('/v1/product?search=pro&status=DRAFT'))).toEqual([draft.productId]);
    expect(ids(await get('/v1/product?search=LEGACY&status=ARCHIVED'))).toEqual([archived.productId]);
    expect(ids(await get('/v1/product?search=nothing-like-this'))).toEqual([]);
  });

  it('treats % and _ in the search text literally', async () => {
    expect(ids(await get('/v1/product?search=%25'))).toEqual([percent.productId]);
    expect(ids(await get('/v1/product?search=0%25%20off_'))).toEqual([percent.productId]);
    expect(ids(await get('/v1/product?search=_'))).toEqual([percent.productId]);
    // Unescaped, "P_o" would match "Pro"; as a literal it matches nothing.
    expect(ids(await get('/v1/product?search=P_o'))).toEqual([]);
    expect(ids(await get('/v1/product?search=%5C'))).toEqual([]);
  });

  it('pages with page and size', async () => {
    const first = await get('/v1/product?size=2');
    expect(ids(first)).toEqual([percent.productId, basic.productId]);
    expect(first.body.data).toMatchObject({ total: 3, page: 1, size: 2, pages: 2, current: 1 });
    const second = await get('/v1/product?size=2&page=2');
    expect(ids(second)).toEqual([pro.productId]);
    expect(second.body.data).toMatchObject({ total: 3, page: 2, size: 2, pages: 2, current: 2 });
    const beyond = await get('/v1/product?size=2&page=3');
    expect(beyond.body.data).toMatchObject({ records: [], total: 3, page: 3 });
    expect((await get('/v1/product?size=100')).status).toBe(200);
  });

  it('refuses out-of-range paging, unknown statuses and unknown query parameters with 400', async () => {
    for (const query of ['size=101', 'size=0', 'page=0', 'status=DELETED', 'search=', 'sort=name', 'size=abc']) {
      const res = await get(`/v1/product?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    }
  });

  it("shows only the caller's organization", async () => {
    const res = await get('/v1/product', ctx.orgB.apiKey);
    expect(ids(res)).toEqual([foreign.productId]);
    expect(res.body.data.records[0].paymentLinks).toHaveLength(1);
    expect(ids(await get('/v1/product?search=pro', ctx.orgB.apiKey))).toEqual([foreign.productId]);
  });
});

describe('GET /v1/product/{id}', () => {
  it('reads a product with its payment links', async () => {
    const res = await get(`/v1/product/${pro.productId}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, message: 'Product retrieved' });
    const listed = (await get('/v1/product')).body.data.records.find((p: any) => p.productId === pro.productId);
    expect(res.body.data).toEqual(listed);
    expect(res.body.data.paymentLinks.map((l: any) => l.paymentLinkId)).toEqual(links.map((l) => l.paymentLinkId));
  });

  it('reads draft and archived products too, description omitted when unset', async () => {
    expect((await get(`/v1/product/${draft.productId}`)).body.data).toMatchObject({ status: 'DRAFT', paymentLinks: [] });
    expect((await get(`/v1/product/${archived.productId}`)).body.data.status).toBe('ARCHIVED');
    expect((await get(`/v1/product/${basic.productId}`)).body.data).not.toHaveProperty('description');
  });

  it("answers 404 for another organization's, unknown and malformed ids alike", async () => {
    for (const [id, key] of [
      [foreign.productId, ctx.orgA.apiKey],
      [pro.productId, ctx.orgB.apiKey],
      ['PRD_000000000000000000000000', ctx.orgA.apiKey],
      ['not-a-product', ctx.orgA.apiKey],
      [monthly.pricingId, ctx.orgA.apiKey],
    ] as const) {
      const res = await get(`/v1/product/${id}`, key);
      expect(res.status, id).toBe(404);
      expect(res.body).toEqual({ success: false, message: 'Product not found', error: { code: 'NOT_FOUND', message: 'Product not found' } });
    }
  });

  it('reflects catalog edits and link deactivation', async () => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Editable', description: 'Before' });
    const price = await createPrice(ctx, product.productId, { amount: 500, currency: 'EUR' });
    const link = await createLink(ctx, price.pricingId);
    await ctx.admin.patch(`/v1/products/${product.productId}`).send({ name: 'Edited', description: null });
    await ctx.admin.post(`/v1/payment-links/${link.paymentLinkId}/deactivate`);
    const res = await get(`/v1/product/${product.productId}`);
    expect(res.body.data).toMatchObject({ name: 'Edited', paymentLinks: [expect.objectContaining({ isActive: false, currency: 'EUR', amount: 500 })] });
    expect(res.body.data).not.toHaveProperty('description');
  });
});

describe('deprecated /v1/products aliases', () => {
  it('answer the list identically, with the same query', async () => {
    for (const query of ['', '?size=2&page=2', '?status=ARCHIVED', '?search=PLAN']) {
      const singular = await get(`/v1/product${query}`);
      const plural = await get(`/v1/products${query}`);
      expect(plural.status, query).toBe(200);
      expect(plural.body, query).toEqual(singular.body);
    }
  });

  it('answer the detail and its 404 identically', async () => {
    const singular = await get(`/v1/product/${pro.productId}`);
    const plural = await get(`/v1/products/${pro.productId}`);
    expect(plural.status).toBe(200);
    expect(plural.body).toEqual(singular.body);
    const missing = await get(`/v1/products/${foreign.productId}`);
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual((await get(`/v1/product/${foreign.productId}`)).body);
  });

  it('validate the same way', async () => {
    const res = await get('/v1/products?size=101');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
  });
});

describe('authentication and permission', () => {
  it('needs an API key', async () => {
    for (const path of ['/v1/product', `/v1/product/${pro.productId}`, '/v1/products', `/v1/products/${pro.productId}`]) {
      const res = await ctx.merchant.get(path);
      expect(res.status, path).toBe(401);
      expect(res.body.error.code).toBe('UNAUTHORIZED');
    }
  });

  it('needs the catalog:read permission', async () => {
    const key = (await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'orders only', permissions: ['orders:read'] })).key;
    for (const path of ['/v1/product', `/v1/product/${pro.productId}`, '/v1/products', `/v1/products/${pro.productId}`]) {
      const res = await get(path, key);
      expect(res.status, path).toBe(403);
      expect(res.body.error.code).toBe('FORBIDDEN');
      expect(res.body.error.message).toContain('catalog:read');
    }
    const reader = (await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'catalog', permissions: ['catalog:read'] })).key;
    expect((await get('/v1/product', reader)).status).toBe(200);
  });
});
