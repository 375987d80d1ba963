/**
 * The admin API's order reads (issue 27 item 11): `GET /v1/orgs/{id}/orders` answers what the
 * merchant API's `GET /v1/orders` answers to that organization for the same query (filters, page
 * numbers, keyset cursors), `GET /v1/orgs/{id}/orders/{orderId}` what `GET /v1/orders/{id}` answers;
 * an unknown organization and another organization's order are 404 envelopes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { listOperations, loadDocument } from '../../src/http/spec.js';

let ctx: TestContext;
const ordersA: string[] = [];
let orderB: string;
let productId: string;
let sessions = 0;

async function paidOrder(apiKey: string, pricingId: string, reference: string): Promise<string> {
  const created = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', apiKey)
    .set('Idempotency-Key', `admin-orders-${++sessions}`)
    .send({ pricingId, customerEmail: `buyer${sessions}@example.com`, merchantReference: reference });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const session = await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', apiKey);
  return session.body.data.orderId as string;
}

async function priceOf(orgId: string, name: string): Promise<{ productId: string; pricingId: string }> {
  const product = await ctx.admin.post(`/v1/orgs/${orgId}/products`).send({ name });
  expect(product.status).toBe(201);
  const price = await ctx.admin.post(`/v1/products/${product.body.data.productId}/prices`).send({ amount: 2500, currency: 'USD' });
  expect(price.status, JSON.stringify(price.body)).toBe(201);
  return { productId: product.body.data.productId, pricingId: price.body.data.pricingId };
}

beforeAll(async () => {
  ctx = await createTestContext();
  const a = await priceOf(ctx.orgA.orgId, 'Admin orders plan');
  const other = await priceOf(ctx.orgA.orgId, 'Another plan');
  productId = a.productId;
  for (let i = 0; i < 5; i++) {
    ctx.clock.advance(1000);
    ordersA.push(await paidOrder(ctx.orgA.apiKey, i === 4 ? other.pricingId : a.pricingId, `inv-${100 + i}`));
  }
  // One refunded, so a status filter has something to tell apart.
  expect((await ctx.admin.post(`/v1/orders/${ordersA[1]}/refund`).send({})).status).toBe(200);
  orderB = await paidOrder(ctx.orgB.apiKey, (await priceOf(ctx.orgB.orgId, 'B plan')).pricingId, 'inv-100');
}, 120_000);

afterAll(async () => {
  await ctx?.close();
});

const merchantList = async (query: string) => {
  const res = await ctx.merchant.get(`/v1/orders${query}`).set('X-API-Key', ctx.orgA.apiKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
};
const adminList = async (query: string) => {
  const res = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/orders${query}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
};

describe('GET /v1/orgs/{id}/orders (admin)', () => {
  it('answers what the merchant list answers to the organization, for every filter, page and cursor', async () => {
    const first = await adminList('?size=2');
    expect(first.data.records).toHaveLength(2);
    expect(first.data.records.every((o: { orgId: string }) => o.orgId === ctx.orgA.orgId)).toBe(true);
    expect(first.data.nextCursor).toBe(first.data.records[1].orderId);
    const queries = [
      '',
      '?size=2',
      '?size=2&page=2',
      `?size=2&starting_after=${first.data.nextCursor}`,
      `?size=2&ending_before=${ordersA[0]}`,
      '?status=refunded',
      '?status=Paid&size=100',
      `?product_id=${productId}`,
      '?merchant_reference=inv-10',
      '?provider=STRIPE',
      `?customer_id=${first.data.records[0].customerId}`,
      `?date_from=${Math.floor(ctx.clock.now().getTime() / 1000) - 3600}&date_to=${Math.floor(ctx.clock.now().getTime() / 1000) + 3600}`,
    ];
    for (const query of queries) {
      expect((await adminList(query)).data, query).toEqual((await merchantList(query)).data);
    }
    // The cursor page really is the rest of the list: every order of A exactly once, B's never.
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { data: { records: Array<{ orderId: string }>; nextCursor: string | null } } = await adminList(`?size=2${cursor ? `&starting_after=${cursor}` : ''}`);
      seen.push(...page.data.records.map((o) => o.orderId));
      cursor = page.data.nextCursor;
    } while (cursor);
    expect([...seen].sort()).toEqual([...ordersA].sort());
    expect(seen).not.toContain(orderB);
  });

  it('404 envelope for an unknown organization (not an empty page)', async () => {
    const res = await ctx.admin.get('/v1/orgs/ORG_000000000000000000000000/orders');
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
  });

  it('400 for a cursor that is another organization\'s order, a malformed filter, or both cursors', async () => {
    for (const query of [`?starting_after=${orderB}`, '?status=paidish', '?from_address=0x12', `?starting_after=${ordersA[0]}&ending_before=${ordersA[1]}`, '?surprise=1']) {
      const res = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/orders${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    }
  });

  it('401 without the admin token; a merchant API key is not one', async () => {
    expect((await ctx.merchant.get('/v1/orders').set('X-API-Key', ctx.orgA.apiKey)).status).toBe(200);
    const { default: supertest } = await import('supertest');
    expect((await supertest(ctx.apps.admin).get(`/v1/orgs/${ctx.orgA.orgId}/orders`)).status).toBe(401);
    expect((await supertest(ctx.apps.admin).get(`/v1/orgs/${ctx.orgA.orgId}/orders`).set('X-API-Key', ctx.orgA.apiKey)).status).toBe(401);
  });
});

describe('GET /v1/orgs/{id}/orders/{orderId} (admin)', () => {
  it('answers what the merchant API answers to the organization', async () => {
    for (const orderId of [ordersA[0]!, ordersA[1]!]) {
      const admin = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/orders/${orderId}`);
      expect(admin.status).toBe(200);
      const merchant = await ctx.merchant.get(`/v1/orders/${orderId}`).set('X-API-Key', ctx.orgA.apiKey);
      expect(admin.body.data).toEqual(merchant.body.data);
    }
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/orders/${ordersA[1]}`)).body.data).toMatchObject({ status: 'REFUNDED', refunded: true });
  });

  it("404 for another organization's order, an unknown order and an unknown organization", async () => {
    for (const path of [`/v1/orgs/${ctx.orgA.orgId}/orders/${orderB}`, `/v1/orgs/${ctx.orgA.orgId}/orders/ORD_000000000000000000000000`, `/v1/orgs/ORG_000000000000000000000000/orders/${ordersA[0]}`]) {
      const res = await ctx.admin.get(path);
      expect(res.status, path).toBe(404);
      expect(res.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
    }
    // The order is there, under its own organization.
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgB.orgId}/orders/${orderB}`)).status).toBe(200);
  });
});

describe('the admin list and the merchant list take the same query', () => {
  it('every query parameter of listOrders is a parameter of listOrgOrders with the same schema, and no other', async () => {
    const query = async (doc: 'merchant' | 'admin', operationId: string) => {
      const op = listOperations(await loadDocument(doc)).find((o) => o.operationId === operationId)!;
      const params = (op.operation.parameters as Array<{ name: string; in: string; schema: unknown }>).filter((p) => p.in === 'query');
      return Object.fromEntries(params.map((p) => [p.name, p.schema]));
    };
    expect(await query('admin', 'listOrgOrders')).toEqual(await query('merchant', 'listOrders'));
  });
});
