/**
 * Order lines (issue 38, item 1): every order carries its lines, written with it, in the API and
 * the `order.*` webhooks; renewals repeat the first order's price lines; migration 0240 backfills
 * one line per existing order, and an order without stored lines reads as that line. Every
 * `order.*` and `subscription.*` payload names the customer (README step 6, docs/customer-portal.md).
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as m0240 from '../../src/db/migrations/0240_order_lines.js';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let priceId: string;
let productId: string;
beforeAll(async () => {
  ctx = await createTestContext();
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Seat plan' });
  productId = product.id;
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 })).id;
});
afterAll(async () => {
  await ctx?.close();
});

let n = 0;
async function pay(body: object): Promise<Record<string, any>> {
  const created = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', ctx.orgA.apiKey)
    .set('Idempotency-Key', `lines-${++n}`)
    .send({ customerEmail: `lines${n}@example.com`, ...body });
  expect(created.status).toBe(201);
  const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  return getOrder(session.orderId);
}
const getOrder = async (id: string) => {
  const res = await ctx.merchant.get(`/v1/orders/${id}`).set('X-API-Key', ctx.orgA.apiKey);
  expect(res.status).toBe(200);
  return res.body.data as Record<string, any>;
};
const eventsAbout = async (id: string) =>
  (await ctx.testDb.database.db('webhook_events').orderBy('seq'))
    .map((e: { type: string; payload: unknown }) => ({ type: e.type, payload: (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload) as Record<string, any> }))
    .filter((e) => JSON.stringify(e.payload).includes(id));

describe('order lines', () => {
  it('a checkout of 3 × 9.00 is one PRICE line of quantity 3, in the API and in order.paid, and renewals repeat it', async () => {
    ctx.clock.set('2026-01-10T10:00:00.000Z');
    const first = await pay({ pricingId: priceId, quantity: 3 });
    const line = { kind: 'PRICE', description: 'Seat plan', productId, priceId, quantity: '3', unitAmountDecimal: '900', exactAmountDecimal: '2700', amountCents: 2700 };
    expect(first).toMatchObject({ status: 'PAID', amountCents: 2700, lines: [line] });

    const [paid] = (await eventsAbout(first.orderId)).filter((e) => e.type === 'order.paid');
    expect(paid!.payload.order).toMatchObject({ orderId: first.orderId, customerId: first.customerId, amountCents: 2700, lines: [line] });
    const [created] = (await eventsAbout(first.subscriptionId)).filter((e) => e.type === 'subscription.created');
    expect(created!.payload.subscription).toMatchObject({ customerId: first.customerId });

    ctx.clock.set('2026-02-10T10:00:00.000Z');
    expect(await ctx.services.subscriptions.processDue()).toBe(1);
    const orders = (await ctx.merchant.get(`/v1/orders?subscription_id=${first.subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.records as Record<string, any>[];
    const renewal = orders.find((o) => o.orderId !== first.orderId)!;
    expect(renewal).toMatchObject({ amountCents: 2700, lines: [line] });
    const renewalEvents = await eventsAbout(renewal.orderId);
    expect(renewalEvents.find((e) => e.type === 'order.paid')!.payload.order).toMatchObject({ customerId: first.customerId, lines: [line] });
    const updated = (await eventsAbout(first.subscriptionId)).filter((e) => e.type === 'subscription.updated');
    expect(updated.length).toBeGreaterThan(0);
    for (const e of updated) expect(e.payload.subscription).toMatchObject({ customerId: first.customerId });
  });

  it('lines are stored with the order (one row per line, amounts adding up to amountCents)', async () => {
    const order = await pay({ pricingData: { amount: 1250, currency: 'USD', productData: { name: 'Mug' } }, quantity: 2 });
    const rows = await ctx.testDb.database.db('order_lines').where({ order_id: order.orderId }).orderBy('position');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ org_id: ctx.orgA.orgId, kind: 'PRICE', description: 'Mug', position: 0 });
    expect(Number(rows[0].amount_cents)).toBe(2500);
  });

  it('an order written without lines (an earlier release, during a rolling deploy) reads as one line of its amount', async () => {
    const order = await pay({ pricingData: { amount: 700, currency: 'USD', productData: { name: 'Cap' } }, quantity: 2 });
    await ctx.testDb.database.db('order_lines').where({ order_id: order.orderId }).delete();
    const line = { kind: 'PRICE', description: 'Cap', quantity: '1', unitAmountDecimal: '1400', exactAmountDecimal: '1400', amountCents: 1400 };
    expect((await getOrder(order.orderId)).lines).toEqual([line]);
    const listed = (await ctx.merchant.get('/v1/orders?size=100').set('X-API-Key', ctx.orgA.apiKey)).body.data.records as Record<string, any>[];
    expect(listed.find((o) => o.orderId === order.orderId)!.lines).toEqual([line]);
  });

  it('migration 0240 backfills one PRICE line per order: the session quantity when it charged the order amount, else 1 × the amount', async () => {
    const db = ctx.testDb.database.db;
    const sessionQuantity = await pay({ pricingData: { amount: 300, currency: 'USD', productData: { name: 'Sticker' } }, quantity: 4 });
    const changedAmount = await pay({ pricingData: { amount: 300, currency: 'USD', productData: { name: 'Pin' } }, quantity: 3 });
    await db('orders').where({ id: changedAmount.orderId }).update({ amount_cents: 1000 });
    const renewal = (await ctx.merchant.get('/v1/orders?size=100').set('X-API-Key', ctx.orgA.apiKey)).body.data.records.find((o: Record<string, any>) => o.originalOrderId);

    await m0240.down(db);
    await m0240.up(db);
    // 0240 recreates order_lines as it made it; the column a later migration added (0360: tax) comes back.
    await db.raw('ALTER TABLE order_lines ADD COLUMN IF NOT EXISTS tax jsonb');
    expect((await getOrder(sessionQuantity.orderId)).lines).toEqual([
      { kind: 'PRICE', description: 'Sticker', quantity: '4', unitAmountDecimal: '300', exactAmountDecimal: '1200', amountCents: 1200 },
    ]);
    expect((await getOrder(changedAmount.orderId)).lines).toEqual([
      { kind: 'PRICE', description: 'Pin', quantity: '1', unitAmountDecimal: '1000', exactAmountDecimal: '1000', amountCents: 1000 },
    ]);
    // A renewal has no session: the quantity of its subscription's first session.
    expect((await getOrder(renewal.orderId)).lines).toEqual([
      { kind: 'PRICE', description: 'Seat plan', productId, priceId, quantity: '3', unitAmountDecimal: '900', exactAmountDecimal: '2700', amountCents: 2700 },
    ]);
    const [{ orders, lines }] = (await db.raw('SELECT (SELECT count(*) FROM orders)::int AS orders, (SELECT count(DISTINCT order_id) FROM order_lines)::int AS lines')).rows;
    expect(lines).toBe(orders);
  });

  it("every documented order.* and subscription.* example names the customer, as README step 6 and docs/customer-portal.md say", () => {
    const spec = parse(readFileSync('openapi/merchant.yaml', 'utf8')) as { webhooks: Record<string, any> };
    const types = Object.keys(spec.webhooks).filter((t) => t.startsWith('order.') || t.startsWith('subscription.'));
    expect(types.length).toBeGreaterThanOrEqual(8);
    for (const type of types) {
      const example = spec.webhooks[type].post.requestBody.content['application/json'].example;
      const subject = example.data.order ?? example.data.subscription;
      expect(subject.customerId, type).toMatch(/^CUS_/);
      if (example.data.order) expect(example.data.order.lines.reduce((s: number, l: { amountCents: number }) => s + l.amountCents, 0), type).toBe(example.data.order.amountCents);
    }
    expect(readFileSync('README.md', 'utf8').replace(/\s+/g, ' ')).toContain('`customerId` from any `order.*`/`subscription.*` webhook');
    expect(readFileSync('docs/customer-portal.md', 'utf8').replace(/\s+/g, ' ')).toContain('The customer id is in every `order.*` and `subscription.*` webhook (`customerId`');
  });
});
