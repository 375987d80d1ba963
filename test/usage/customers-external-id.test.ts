/**
 * Customers by the merchant's own id (issue 38 §2): `externalId` set by updateCustomer and at
 * checkout, returned on customers, unique in the organization, and usable in the customer list,
 * the entitlement check and customer portal sessions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { buy, monthlyPrice, oneTimePrice, setExternalId } from './helpers.js';

let ctx: TestContext;
let priceA: string;
let plan: { priceId: string; productId: string };
beforeAll(async () => {
  ctx = await createTestContext();
  priceA = await oneTimePrice(ctx, ctx.orgA.orgId);
  plan = await monthlyPrice(ctx, ctx.orgA.orgId);
});
afterAll(async () => {
  await ctx?.close();
});

const key = () => ctx.orgA.apiKey;

describe('updateCustomer and the customer reads', () => {
  it('sets, shows, filters by, refuses a taken one (409) and removes the externalId', async () => {
    const ada = await buy(ctx, 'ada@example.com', priceA, key());
    const bob = await buy(ctx, 'bob@example.com', priceA, key());
    const set = await setExternalId(ctx, ada.customerId, 'user_1', key());
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.data).toEqual({ customerId: ada.customerId, email: 'ada@example.com', externalId: 'user_1' });
    expect((await ctx.merchant.get(`/v1/customers/${ada.customerId}`).set('X-API-Key', key())).body.data.externalId).toBe('user_1');
    const listed = await ctx.merchant.get('/v1/customers').query({ external_id: 'user_1' }).set('X-API-Key', key());
    expect(listed.body.data.records).toEqual([{ customerId: ada.customerId, email: 'ada@example.com', externalId: 'user_1' }]);
    expect((await ctx.merchant.get('/v1/customers').query({ email: 'bob@example.com' }).set('X-API-Key', key())).body.data.records[0].externalId).toBeNull();

    const taken = await setExternalId(ctx, bob.customerId, 'user_1', key());
    expect(taken.status).toBe(409);
    expect(taken.body.error.code).toBe('CONFLICT');
    // Setting the same value again is no conflict with itself.
    expect((await setExternalId(ctx, ada.customerId, 'user_1', key())).status).toBe(200);
    expect((await setExternalId(ctx, ada.customerId, null, key())).body.data.externalId).toBeNull();
    expect((await setExternalId(ctx, bob.customerId, 'user_1', key())).status).toBe(200);
  });

  it('is tenant-scoped: another organization may use the same externalId, and cannot see or change ours', async () => {
    const carl = await buy(ctx, 'carl@example.com', priceA, key());
    expect((await setExternalId(ctx, carl.customerId, 'shared', key())).status).toBe(200);
    const priceB = await oneTimePrice(ctx, ctx.orgB.orgId);
    const dora = await buy(ctx, 'dora@example.com', priceB, ctx.orgB.apiKey);
    expect((await setExternalId(ctx, dora.customerId, 'shared', ctx.orgB.apiKey)).status).toBe(200);
    expect((await setExternalId(ctx, carl.customerId, 'x', ctx.orgB.apiKey)).status).toBe(404);
    expect((await setExternalId(ctx, 'CUS_000000000000000000000000', 'x', key())).status).toBe(404);
    expect((await ctx.merchant.get('/v1/customers').query({ external_id: 'shared' }).set('X-API-Key', ctx.orgB.apiKey)).body.data.records.map((c: { customerId: string }) => c.customerId)).toEqual([dora.customerId]);
  });

  it('refuses bad values (400) and keys without customers:write (403)', async () => {
    const eve = await buy(ctx, 'eve@example.com', priceA, key());
    for (const externalId of ['', 'has space', 'x'.repeat(256), 12]) {
      expect((await setExternalId(ctx, eve.customerId, externalId as string, key())).status).toBe(400);
    }
    expect((await ctx.merchant.patch(`/v1/customers/${eve.customerId}`).set('X-API-Key', key()).send({})).status).toBe(400);
    const readOnly = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'read', permissions: ['customers:read'] });
    const refused = await setExternalId(ctx, eve.customerId, 'user_e', readOnly.key);
    expect(refused.status).toBe(403);
  });
});

describe('customerExternalId at checkout', () => {
  it('gives the paying customer the externalId, and later sessions with it are that customer\'s', async () => {
    const first = await buy(ctx, 'fay@example.com', priceA, key(), { customerExternalId: 'user_fay' });
    expect((await ctx.merchant.get(`/v1/customers/${first.customerId}`).set('X-API-Key', key())).body.data.externalId).toBe('user_fay');
    // A later checkout naming the externalId (another e-mail typed) is the same customer's.
    const again = await buy(ctx, 'fay.other@example.com', priceA, key(), { customerExternalId: 'user_fay' });
    expect(again.customerId).toBe(first.customerId);
  });

  it('does not overwrite a customer\'s externalId, and refuses one held by another customer than customerId (400)', async () => {
    const gus = await buy(ctx, 'gus@example.com', priceA, key(), { customerExternalId: 'user_gus' });
    // Same e-mail, another externalId: the payment completes, the customer keeps its first one.
    const again = await buy(ctx, 'gus@example.com', priceA, key(), { customerExternalId: 'user_gus_2' });
    expect(again.customerId).toBe(gus.customerId);
    expect((await ctx.merchant.get(`/v1/customers/${gus.customerId}`).set('X-API-Key', key())).body.data.externalId).toBe('user_gus');
    const hal = await buy(ctx, 'hal@example.com', priceA, key());
    const mismatch = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', key())
      .set('Idempotency-Key', 'mismatch-1')
      .send({ pricingId: priceA, customerId: hal.customerId, customerExternalId: 'user_gus' });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error.message).toContain('customerExternalId');
  });
});

describe('the customer named by externalId elsewhere', () => {
  it('checkEntitlement takes external_id; an unknown one is an unknown subject', async () => {
    const ivy = await buy(ctx, 'ivy@example.com', plan.priceId, key(), { customerExternalId: 'user_ivy' });
    const check = await ctx.merchant.get('/v1/entitlements/check').query({ external_id: 'user_ivy', product_id: plan.productId }).set('X-API-Key', key());
    expect(check.status).toBe(200);
    expect(check.body.data).toMatchObject({ entitled: true, customerId: ivy.customerId, type: 'SUBSCRIPTION' });
    const unknown = await ctx.merchant.get('/v1/entitlements/check').query({ external_id: 'nobody', product_id: plan.productId }).set('X-API-Key', key());
    expect(unknown.body.data).toMatchObject({ entitled: false, customerId: null, email: null, productId: plan.productId, reason: 'UNKNOWN_CUSTOMER' });
    // Two names for two different customers: nobody.
    const other = await buy(ctx, 'jon@example.com', priceA, key());
    const mixed = await ctx.merchant.get('/v1/entitlements/check').query({ external_id: 'user_ivy', customer_id: other.customerId }).set('X-API-Key', key());
    expect(mixed.body.data).toMatchObject({ entitled: false, customerId: null, reason: 'UNKNOWN_CUSTOMER' });
    const foreign = await ctx.merchant.get('/v1/entitlements/check').query({ external_id: 'user_ivy' }).set('X-API-Key', ctx.orgB.apiKey);
    expect(foreign.body.data).toMatchObject({ entitled: false, customerId: null, reason: 'UNKNOWN_CUSTOMER' });
  });

  it('createCustomerPortalSession takes externalId (exactly one way of naming the customer)', async () => {
    const kim = await buy(ctx, 'kim@example.com', priceA, key(), { customerExternalId: 'user_kim' });
    const portal = await ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', key()).send({ externalId: 'user_kim' });
    expect(portal.status).toBe(201);
    expect(portal.body.data.customerId).toBe(kim.customerId);
    expect((await ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', key()).send({ externalId: 'nobody' })).status).toBe(404);
    expect((await ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', ctx.orgB.apiKey).send({ externalId: 'user_kim' })).status).toBe(404);
    expect((await ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', key()).send({ externalId: 'user_kim', customerId: kim.customerId })).status).toBe(400);
  });
});
