/**
 * The console's catalog: products, prices and payment links managed by members of the
 * organization through the same CatalogService as the admin API — per operation the happy path,
 * the domain errors, the role table (catalog:read for every member, catalog:write for owners and
 * admins), another organization's objects (404), no session (401), no CSRF token (403), and the
 * audit entry of each change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { ORIGIN, as, signUp, type Member } from './helpers.js';

let ctx: TestContext;
let ownerA: Member;
let adminA: Member;
let developerA: Member;
let viewerA: Member;
let ownerB: Member;

beforeAll(async () => {
  ctx = await createTestContext({ env: { TRUST_PROXY: '1' } });
  [ownerA, adminA, developerA, viewerA, ownerB] = await Promise.all([
    signUp(ctx, ctx.orgA.orgId, 'owner'),
    signUp(ctx, ctx.orgA.orgId, 'admin'),
    signUp(ctx, ctx.orgA.orgId, 'developer'),
    signUp(ctx, ctx.orgA.orgId, 'viewer'),
    signUp(ctx, ctx.orgB.orgId, 'owner'),
  ]);
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

const post = (m: Member, path: string, body?: object) => {
  const req = as(m, ctx.merchant.post(path));
  return body === undefined ? req : req.send(body);
};
const patch = (m: Member, path: string, body: object) => as(m, ctx.merchant.patch(path)).send(body);
const get = (m: Member, path: string) => as(m, ctx.merchant.get(path));

async function product(m: Member = ownerA, name = 'Pro plan'): Promise<string> {
  const res = await post(m, '/v1/console/products', { name, description: 'Everything' });
  expect(res.status).toBe(201);
  return res.body.data.productId;
}
async function price(productId: string, m: Member = ownerA, body: object = { amount: 1500, currency: 'USD' }): Promise<string> {
  const res = await post(m, `/v1/console/products/${productId}/prices`, body);
  expect(res.status).toBe(201);
  return res.body.data.pricingId;
}

async function auditActions(m: Member) {
  const log = await get(m, '/v1/console/audit-log?size=100');
  expect(log.status).toBe(200);
  return log.body.data.records as Array<{ action: string; actorType: string; actorId: string | null; targetType: string | null; targetId: string | null; summary: string; clientAddress: string | null }>;
}

describe('products', () => {
  it('an owner creates, edits, archives and republishes a product; the list filters by state and name', async () => {
    const created = await post(ownerA, '/v1/console/products', { name: '  Roast subscription ', description: 'Fresh beans' }).set('X-Forwarded-For', '203.0.113.9');
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ orgId: ctx.orgA.orgId, name: 'Roast subscription', description: 'Fresh beans', status: 'PUBLISHED' });
    const id = created.body.data.productId as string;

    const edited = await patch(adminA, `/v1/console/products/${id}`, { name: 'Roast club', description: null });
    expect(edited.status).toBe(200);
    expect(edited.body.data).toMatchObject({ productId: id, name: 'Roast club', description: null });

    const archived = await post(ownerA, `/v1/console/products/${id}/archive`);
    expect(archived.status).toBe(200);
    expect(archived.body.data.status).toBe('ARCHIVED');

    const archive = await get(viewerA, '/v1/console/products?status=ARCHIVED&search=roast%20club');
    expect(archive.status).toBe(200);
    expect(archive.body.data.records.map((p: { productId: string }) => p.productId)).toEqual([id]);
    const published = await get(viewerA, '/v1/console/products?status=PUBLISHED&size=100');
    expect(published.body.data.records.map((p: { productId: string }) => p.productId)).not.toContain(id);

    const again = await patch(ownerA, `/v1/console/products/${id}`, { status: 'PUBLISHED' });
    expect(again.body.data.status).toBe('PUBLISHED');

    const records = await auditActions(ownerA);
    const create = records.find((r) => r.action === 'product.create' && r.targetId === id);
    expect(create, JSON.stringify(create)).toMatchObject({ actorType: 'user', actorId: ownerA.userId, targetType: 'product', clientAddress: '203.0.113.9' });
    expect(create!.summary).toContain('fields: name, description');
    // Values are never in the summary.
    expect(create!.summary).not.toContain('Roast');
    expect(records.filter((r) => r.action === 'product.update' && r.targetId === id).map((r) => r.actorId).sort()).toEqual([ownerA.userId, adminA.userId].sort());
    expect(records.find((r) => r.action === 'product.archive' && r.targetId === id)).toBeDefined();
  });

  it('bad input is 400 with the envelope', async () => {
    const blank = await post(ownerA, '/v1/console/products', { name: '   ' });
    expect(blank.status).toBe(400);
    expect(blank.body.error.code).toBe('VALIDATION_ERROR');
    const empty = await patch(ownerA, `/v1/console/products/${await product()}`, {});
    expect(empty.status).toBe(400);
  });

  it('a viewer and a developer read the catalog but cannot change it (403); nothing is made', async () => {
    const id = await product();
    expect((await get(viewerA, '/v1/console/products')).status).toBe(200);
    expect((await get(developerA, `/v1/console/products/${id}/prices`)).status).toBe(200);
    for (const m of [viewerA, developerA]) {
      const refused = await post(m, '/v1/console/products', { name: 'Nope' });
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe('FORBIDDEN');
      expect((await patch(m, `/v1/console/products/${id}`, { name: 'Nope' })).status).toBe(403);
      expect((await post(m, `/v1/console/products/${id}/archive`)).status).toBe(403);
      expect((await post(m, `/v1/console/products/${id}/prices`, { amount: 100, currency: 'USD' })).status).toBe(403);
    }
    const list = await get(ownerA, '/v1/console/products?search=Nope');
    expect(list.body.data.total).toBe(0);
  });

  it("another organization's product is 404 for every operation, and their list never shows it", async () => {
    const id = await product(ownerA, 'Only in A');
    expect((await patch(ownerB, `/v1/console/products/${id}`, { name: 'Taken' })).status).toBe(404);
    expect((await post(ownerB, `/v1/console/products/${id}/archive`)).status).toBe(404);
    expect((await get(ownerB, `/v1/console/products/${id}/prices`)).status).toBe(404);
    const priceInB = await post(ownerB, `/v1/console/products/${id}/prices`, { amount: 100, currency: 'USD' });
    expect(priceInB.status).toBe(404);
    expect(priceInB.body.error.code).toBe('NOT_FOUND');
    const listB = await get(ownerB, '/v1/console/products?search=Only%20in%20A');
    expect(listB.body.data.total).toBe(0);
    const still = await get(ownerA, `/v1/console/products?search=Only%20in%20A`);
    expect(still.body.data.records[0]).toMatchObject({ productId: id, name: 'Only in A', status: 'PUBLISHED' });
  });

  it('no session is 401; a write without the CSRF token or from another origin is 403', async () => {
    expect((await ctx.merchant.get('/v1/console/products')).status).toBe(401);
    expect((await ctx.merchant.post('/v1/console/products').send({ name: 'X' })).status).toBe(401);
    const noCsrf = await ctx.merchant.post('/v1/console/products').set('Cookie', ownerA.cookie).set('Origin', ORIGIN).send({ name: 'No CSRF' });
    expect(noCsrf.status).toBe(403);
    const crossSite = await ctx.merchant.post('/v1/console/products').set('Cookie', ownerA.cookie).set('Origin', 'https://evil.example').set('X-CSRF-Token', ownerA.csrf).send({ name: 'Cross' });
    expect(crossSite.status).toBe(403);
    expect((await get(ownerA, '/v1/console/products?search=No%20CSRF')).body.data.total).toBe(0);
  });
});

describe('prices', () => {
  it('an admin adds prices (rules of the admin API), lists them, deactivates one; an archived product takes none (409)', async () => {
    const id = await product();
    const monthly = await post(adminA, `/v1/console/products/${id}/prices`, { amount: 1500, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', pricingName: 'Monthly' });
    expect(monthly.status).toBe(201);
    expect(monthly.body.data).toMatchObject({ productId: id, orgId: ctx.orgA.orgId, amount: 1500, currency: 'USD', pricingType: 'SUBSCRIPTION', active: true });
    const bad = await post(adminA, `/v1/console/products/${id}/prices`, { amount: 1500, currency: 'USDC' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('VALIDATION_ERROR');

    const off = await post(ownerA, `/v1/console/prices/${monthly.body.data.pricingId}/deactivate`);
    expect(off.status).toBe(200);
    expect(off.body.data.active).toBe(false);
    const list = await get(viewerA, `/v1/console/products/${id}/prices`);
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([expect.objectContaining({ pricingId: monthly.body.data.pricingId, active: false })]);

    await post(ownerA, `/v1/console/products/${id}/archive`);
    const late = await post(ownerA, `/v1/console/products/${id}/prices`, { amount: 100, currency: 'USD' });
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('CONFLICT');

    const records = await auditActions(ownerA);
    expect(records.find((r) => r.action === 'price.create' && r.targetId === monthly.body.data.pricingId)).toMatchObject({ targetType: 'price', actorId: adminA.userId });
    expect(records.find((r) => r.action === 'price.deactivate' && r.targetId === monthly.body.data.pricingId)).toBeDefined();
  });

  it("a viewer cannot deactivate a price (403); another organization's price is 404", async () => {
    const priceId = await price(await product());
    expect((await post(viewerA, `/v1/console/prices/${priceId}/deactivate`)).status).toBe(403);
    expect((await post(ownerB, `/v1/console/prices/${priceId}/deactivate`)).status).toBe(404);
    const still = await get(ownerA, `/v1/console/payment-links?pricingId=${priceId}`);
    expect(still.status).toBe(200);
  });

  // The walk-through's finding: two prices of one product could not be told apart in the console
  // (the form had no name field, so both were named after the product). The name is their label,
  // the one field of a price that may change (PriceUpdate).
  it('an admin renames a price (only the name changes; audited); bad names are 400, a viewer 403, another organization 404', async () => {
    const id = await product(ownerA, 'Renamed plan');
    const made = await post(adminA, `/v1/console/products/${id}/prices`, { amount: 900, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' });
    expect(made.body.data.pricingName).toBe('Renamed plan');
    const link = await post(ownerA, `/v1/console/prices/${made.body.data.pricingId}/payment-links`, {});
    expect(link.body.data.name).toBe('Renamed plan');

    const renamed = await patch(adminA, `/v1/console/prices/${made.body.data.pricingId}`, { pricingName: '  Monthly ' });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    const { pricingName, ...rest } = renamed.body.data;
    expect(pricingName).toBe('Monthly');
    const { pricingName: before, ...unchanged } = made.body.data;
    expect(before).toBe('Renamed plan');
    expect(rest).toEqual(unchanged);
    // The list shows it; the payment link keeps its own name and shows the price's name and terms.
    expect((await get(viewerA, `/v1/console/products/${id}/prices`)).body.data).toEqual([expect.objectContaining({ pricingId: made.body.data.pricingId, pricingName: 'Monthly' })]);
    const links = await get(viewerA, `/v1/console/payment-links?pricingId=${made.body.data.pricingId}`);
    expect(links.body.data.records).toEqual([expect.objectContaining({ name: 'Renamed plan', pricingName: 'Monthly', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 })]);

    for (const body of [{ pricingName: '' }, { pricingName: '   ' }, { pricingName: 'x'.repeat(256) }, { pricingName: 'Two\nlines' }, {}, { pricingName: 'Yearly', amount: 100 }]) {
      const bad = await patch(ownerA, `/v1/console/prices/${made.body.data.pricingId}`, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.body.error.code).toBe('VALIDATION_ERROR');
    }
    expect((await patch(viewerA, `/v1/console/prices/${made.body.data.pricingId}`, { pricingName: 'Viewer' })).status).toBe(403);
    expect((await patch(ownerB, `/v1/console/prices/${made.body.data.pricingId}`, { pricingName: 'Theirs' })).status).toBe(404);
    expect((await patch(ownerA, '/v1/console/prices/PRC_000000000000000000000000', { pricingName: 'Nobody' })).status).toBe(404);
    // An inactive price may still be renamed (its name labels it in lists).
    await post(ownerA, `/v1/console/prices/${made.body.data.pricingId}/deactivate`);
    expect((await patch(ownerA, `/v1/console/prices/${made.body.data.pricingId}`, { pricingName: 'Monthly (old)' })).body.data).toMatchObject({ pricingName: 'Monthly (old)', active: false });
    const records = await auditActions(ownerA);
    // The admin's rename and the owner's of the inactive price (the test clock stands still: in any order); refused ones are not recorded.
    const renames = records.filter((r) => r.action === 'price.update' && r.targetId === made.body.data.pricingId);
    expect(renames.map((r) => r.targetType)).toEqual(['price', 'price']);
    expect(renames.map((r) => r.actorId).sort()).toEqual([ownerA.userId, adminA.userId].sort());
  });
});

describe('payment links', () => {
  it('an owner creates links with their URL, lists them with what they sell, filters, deactivates', async () => {
    const productId = await product(ownerA, 'Linked product');
    const priceId = await price(productId);
    const created = await post(ownerA, `/v1/console/prices/${priceId}/payment-links`, { name: 'Spring sale' });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({
      orgId: ctx.orgA.orgId,
      pricingId: priceId,
      productId,
      name: 'Spring sale',
      isActive: true,
      productName: 'Linked product',
      amount: 1500,
      currency: 'USD',
      pricingType: 'ONE_TIME',
    });
    expect(created.body.data.paymentLinkUrl).toMatch(/^http:\/\/merchant\.test\/pay\/[A-Za-z0-9]{32}$/);
    const second = await post(ownerA, `/v1/console/prices/${priceId}/payment-links`);
    expect(second.status).toBe(201);
    expect(second.body.data.name).toBe('Linked product');

    // The URL sells: the hosted page answers.
    const page = await ctx.merchant.get(new URL(created.body.data.paymentLinkUrl).pathname);
    expect(page.status).toBeLessThan(400);

    const listed = await get(viewerA, `/v1/console/payment-links?productId=${productId}`);
    expect(listed.status).toBe(200);
    expect(listed.body.data.total).toBe(2);
    // Newest first (both made in the same instant of the test clock: ties by id, descending).
    const ids = [created.body.data.paymentLinkId as string, second.body.data.paymentLinkId as string].sort().reverse();
    expect(listed.body.data.records.map((l: { paymentLinkId: string }) => l.paymentLinkId)).toEqual(ids);

    const off = await post(ownerA, `/v1/console/payment-links/${created.body.data.paymentLinkId}/deactivate`);
    expect(off.status).toBe(200);
    expect(off.body.data).toMatchObject({ paymentLinkId: created.body.data.paymentLinkId, isActive: false, productName: 'Linked product' });
    const active = await get(ownerA, `/v1/console/payment-links?productId=${productId}&active=true`);
    expect(active.body.data.records.map((l: { paymentLinkId: string }) => l.paymentLinkId)).toEqual([second.body.data.paymentLinkId]);
    const inactive = await get(ownerA, `/v1/console/payment-links?pricingId=${priceId}&active=false`);
    expect(inactive.body.data.records.map((l: { paymentLinkId: string }) => l.paymentLinkId)).toEqual([created.body.data.paymentLinkId]);

    const records = await auditActions(ownerA);
    expect(records.find((r) => r.action === 'payment_link.create' && r.targetId === created.body.data.paymentLinkId)).toMatchObject({ targetType: 'payment_link' });
    expect(records.find((r) => r.action === 'payment_link.deactivate' && r.targetId === created.body.data.paymentLinkId)).toBeDefined();
  });

  it('an inactive price takes no link (409); a bad filter is 400', async () => {
    const priceId = await price(await product());
    await post(ownerA, `/v1/console/prices/${priceId}/deactivate`);
    const refused = await post(ownerA, `/v1/console/prices/${priceId}/payment-links`, {});
    expect(refused.status).toBe(409);
    expect((await get(ownerA, '/v1/console/payment-links?productId=nope')).status).toBe(400);
  });

  it("roles and organizations: a viewer cannot make or stop links (403); another organization's price and link are 404 and absent from its list", async () => {
    const productId = await product(ownerA, 'Guarded');
    const priceId = await price(productId);
    const link = await post(ownerA, `/v1/console/prices/${priceId}/payment-links`);
    const linkId = link.body.data.paymentLinkId as string;
    expect((await post(viewerA, `/v1/console/prices/${priceId}/payment-links`)).status).toBe(403);
    expect((await post(viewerA, `/v1/console/payment-links/${linkId}/deactivate`)).status).toBe(403);
    expect((await post(ownerB, `/v1/console/prices/${priceId}/payment-links`)).status).toBe(404);
    const stop = await post(ownerB, `/v1/console/payment-links/${linkId}/deactivate`);
    expect(stop.status).toBe(404);
    const listB = await get(ownerB, `/v1/console/payment-links?productId=${productId}`);
    expect(listB.body.data.total).toBe(0);
    const still = await get(ownerA, `/v1/console/payment-links?productId=${productId}`);
    expect(still.body.data.records[0].isActive).toBe(true);
    expect((await ctx.merchant.get('/v1/console/payment-links')).status).toBe(401);
  });
});
