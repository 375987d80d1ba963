/**
 * Paying on the hosted page with the sandbox processor: orders, customers, declines, asynchronous
 * cards, duplicates, refunds, payment links — and the order events that go with them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let productId: string;
let priceId: string;
beforeAll(async () => {
  ctx = await createTestContext();
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Ebook' });
  productId = product.id;
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 1200, currency: 'USD' })).id;
});
afterAll(async () => {
  await ctx?.close();
});

let keys = 0;
async function newSession(body: object = {}, apiKey = ctx.orgA.apiKey) {
  const res = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', apiKey)
    .set('Idempotency-Key', `pay-${++keys}`)
    .send({ pricingId: priceId, successUrl: 'https://shop.example/thanks', ...body });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; url: string };
}

const pagePath = (url: string) => new URL(url).pathname;
const pay = (url: string, form: Record<string, string> = {}) =>
  ctx.merchant.post(`${pagePath(url)}/pay`).type('form').send({ cardNumber: '4242 4242 4242 4242', expiry: '12/30', cvc: '123', ...form });
const readSession = async (id: string, apiKey = ctx.orgA.apiKey) =>
  (await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', apiKey)).body.data;
const readOrder = async (id: string, apiKey = ctx.orgA.apiKey) => ctx.merchant.get(`/v1/orders/${id}`).set('X-API-Key', apiKey);
const eventsOf = async (orderId: string) =>
  (await ctx.testDb.database.db('webhook_events').orderBy('created_at')).filter((e: { payload: unknown }) => JSON.stringify(e.payload).includes(orderId)).map((e: { type: string }) => e.type);
/** The `data.order` of the order's webhook events in the outbox (what is signed and sent), oldest first. */
const orderPayloads = async (orderId: string): Promise<Array<Record<string, unknown>>> =>
  (await ctx.testDb.database.db('webhook_events').orderBy('seq'))
    .map((e: { payload: unknown }) => (typeof e.payload === 'string' ? JSON.parse(e.payload) : e.payload).order)
    .filter((o: { orderId?: string } | undefined) => o?.orderId === orderId);

describe('hosted checkout page', () => {
  it('shows the product, quantity and amount, with a strict CSP and no script', async () => {
    const session = await newSession({ quantity: 2 });
    const res = await ctx.merchant.get(pagePath(session.url));
    expect(res.status).toBe(200);
    expect(res.text).toContain('Ebook');
    expect(res.text).toContain('2 × $12.00');
    expect(res.text).toContain('$24.00');
    expect(res.text).not.toMatch(/<script/i);
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.headers['content-security-policy']).toContain("default-src 'none'");
  });

  it('answers 404 for an unknown page token (the session id alone never opens a page)', async () => {
    const session = await newSession();
    expect((await ctx.merchant.get(`/checkout/${session.id}`)).status).toBe(404);
    expect((await ctx.merchant.get('/checkout/nope')).status).toBe(404);
  });
});

describe('a successful card payment', () => {
  it('completes the session, creates a PAID order with the session details, and redirects to successUrl', async () => {
    const session = await newSession({ customerEmail: 'Buyer@Example.com', merchantReference: 'inv-77', metadata: { cart: 'c-9' } });
    const res = await pay(session.url);
    expect(res.status).toBe(303);
    expect(res.headers.location).toBe('https://shop.example/thanks');

    const read = await readSession(session.id);
    expect(read).toMatchObject({ status: 'COMPLETE', url: null, orderStatus: 'PAID', customerEmail: 'Buyer@Example.com' });
    expect(read.orderId).toMatch(/^ORD_/);
    expect(read.customerId).toMatch(/^CUS_/);

    const order = (await readOrder(read.orderId)).body.data;
    expect(order).toMatchObject({
      orderId: read.orderId,
      id: read.orderId,
      orgId: ctx.orgA.orgId,
      status: 'PAID',
      displayStatus: 'Paid',
      amount: 12,
      amountCents: 1200,
      amountRefunded: 0,
      currency: 'USD',
      refunded: false,
      disputed: false,
      fundsSettled: false,
      settledAvailableOn: '2026-11-24T09:00:00.000Z',
      customerId: read.customerId,
      customerEmail: 'Buyer@Example.com',
      provider: 'STRIPE',
      productId,
      productName: 'Ebook',
      checkoutSessionId: session.id,
      merchantReference: 'inv-77',
      merchantMetadata: { cart: 'c-9' },
    });
    expect(order).not.toHaveProperty('subscriptionId');
    expect(order).not.toHaveProperty('originalOrderId');
    // The sandbox's own payment, its status in Stripe's words (documented on the Order schema).
    expect(order.providerPaymentId).toMatch(/^sbx_pay_[0-9A-Za-z_-]+$/);
    expect(order.providerStatus).toBe('succeeded');
    expect(await eventsOf(read.orderId)).toEqual(['order.paid']);
    expect(await orderPayloads(read.orderId)).toEqual([expect.objectContaining({ providerPaymentId: order.providerPaymentId, providerStatus: 'succeeded' })]);
  });

  it('takes the e-mail on the page when the session has none, and reuses the customer by e-mail (any case)', async () => {
    const first = await newSession();
    await pay(first.url, { email: 'repeat@example.com' });
    const second = await newSession();
    await pay(second.url, { email: 'REPEAT@example.com' });
    const [a, b] = [await readSession(first.id), await readSession(second.id)];
    expect(a.customerId).toBe(b.customerId);
    const customers = await ctx.merchant.get('/v1/customers?email=repeat@example.com').set('X-API-Key', ctx.orgA.apiKey);
    expect(customers.body.data.records).toEqual([{ customerId: a.customerId, email: 'repeat@example.com', externalId: null }]);
  });

  it('requires an e-mail when the session has none', async () => {
    const session = await newSession();
    const res = await pay(session.url);
    expect(res.status).toBe(402);
    expect(res.text).toContain('valid e-mail');
    expect((await readSession(session.id)).status).toBe('CREATED');
  });

  it('fills fundsSettled once the settlement date passes (card orders only)', async () => {
    const session = await newSession({ customerEmail: 'settle@example.com' });
    await pay(session.url);
    const { orderId } = await readSession(session.id);
    ctx.clock.advance(2 * 24 * 3600 * 1000);
    expect((await readOrder(orderId)).body.data.fundsSettled).toBe(true);
  });
});

describe('declines, duplicates and late results', () => {
  it('records a decline as lastError and keeps the session payable; another card then pays', async () => {
    const session = await newSession({ customerEmail: 'decline@example.com' });
    const declined = await pay(session.url, { cardNumber: '4000000000000002' });
    expect(declined.status).toBe(402);
    expect(declined.text).toContain('declined');
    const after = await readSession(session.id);
    expect(after).toMatchObject({ status: 'CREATED', orderId: null, lastError: { code: 'card_declined', operation: 'charge', occurredAt: expect.any(String), requestId: expect.stringMatching(/^sbx_req_/) } });
    expect(after.url).toBe(session.url);
    const ok = await pay(session.url);
    expect(ok.status).toBe(303);
    const done = await readSession(session.id);
    expect(done).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID' });
    expect(done.lastError.code).toBe('card_declined'); // presence alone does not mean FAILED
  });

  it.each([
    ['an invalid card number', { cardNumber: '4242424242424241' }, 'incorrect'],
    ['an expired card', { expiry: '01/20' }, 'expired'],
  ])('refuses %s without charging', async (_label, form, text) => {
    const session = await newSession({ customerEmail: 'x@example.com' });
    const res = await pay(session.url, form);
    expect(res.status).toBe(402);
    expect(res.text).toContain(text);
    expect((await readSession(session.id)).orderId).toBeNull();
  });

  it('never creates a second order or regresses a PAID order', async () => {
    const session = await newSession({ customerEmail: 'dup@example.com' });
    const both = await Promise.all([pay(session.url), pay(session.url)]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 303]);
    const orders = await ctx.testDb.database.db('orders').where({ checkout_session_id: session.id });
    expect(orders).toHaveLength(1);
    const orderId = orders[0].id;
    // Duplicate and late results through the processor-webhook path change nothing.
    const paidBy = orders[0].processor_payment_id as string;
    const apply = (outcome: 'succeeded' | 'pending' | 'failed', processorPaymentId: string) =>
      ctx.services.payments.applyPaymentResult({ checkoutSessionId: session.id, outcome, processorPaymentId });
    expect((await apply('succeeded', paidBy)).outcome).toBe('unchanged');
    // A second, different payment of a paid session is reported, so its processor can refund it.
    expect((await apply('succeeded', 'dup')).outcome).toBe('duplicate_payment');
    expect((await apply('pending', 'late')).outcome).toBe('unchanged');
    expect((await apply('failed', 'late')).outcome).toBe('unchanged');
    expect((await readOrder(orderId)).body.data.status).toBe('PAID');
    expect(await eventsOf(orderId)).toEqual(['order.paid']);
    // Paying again on the page shows the status instead of charging.
    const again = await pay(session.url);
    expect(again.status).toBe(200);
    expect(again.text).toContain('Payment received');
  });
});

describe('asynchronous cards', () => {
  it('leaves the order PENDING, then PAID when the processor settles it', async () => {
    const session = await newSession({ customerEmail: 'async@example.com' });
    const res = await pay(session.url, { cardNumber: '4000000000000077' });
    expect(res.status).toBe(303);
    expect(res.headers.location).toBe(`${pagePath(session.url)}/complete`);
    const pending = await readSession(session.id);
    expect(pending).toMatchObject({ status: 'COMPLETE', orderStatus: 'PENDING', url: null });
    expect((await ctx.merchant.get(`${pagePath(session.url)}/complete`)).text).toContain('processing');
    expect(await ctx.services.sandboxProcessor.settleDue(ctx.services.payments)).toBe(0); // not due yet
    ctx.clock.advance(5000);
    expect(await ctx.services.sandboxProcessor.settleDue(ctx.services.payments)).toBe(1);
    const paid = (await readOrder(pending.orderId)).body.data;
    expect(paid).toMatchObject({ status: 'PAID', displayStatus: 'Paid', providerStatus: 'succeeded' });
    expect(paid.providerPaymentId).toMatch(/^sbx_pay_/);
    expect(await eventsOf(pending.orderId)).toEqual(['order.pending', 'order.paid']);
    expect((await orderPayloads(pending.orderId)).map((o) => [o.providerPaymentId, o.providerStatus])).toEqual([
      [paid.providerPaymentId, 'processing'],
      [paid.providerPaymentId, 'succeeded'],
    ]);
    expect((await ctx.merchant.get(`${pagePath(session.url)}/complete`)).text).toContain('Payment received');
  });

  it('moves order and session to FAILED when the asynchronous payment fails', async () => {
    const session = await newSession({ customerEmail: 'async-fail@example.com' });
    await pay(session.url, { cardNumber: '4000000000000085' });
    ctx.clock.advance(5000);
    await ctx.services.sandboxProcessor.settleDue(ctx.services.payments);
    const read = await readSession(session.id);
    expect(read).toMatchObject({ status: 'FAILED', orderStatus: 'FAILED', url: null });
    expect((await readOrder(read.orderId)).body.data).toMatchObject({ status: 'FAILED', displayStatus: 'Failed', providerStatus: 'requires_payment_method' });
    expect(await eventsOf(read.orderId)).toEqual(['order.pending', 'order.failed']);
    expect((await orderPayloads(read.orderId)).map((o) => o.providerStatus)).toEqual(['processing', 'requires_payment_method']);
    const expire = await ctx.merchant.post(`/v1/checkout-sessions/${session.id}/expire`).set('X-API-Key', ctx.orgA.apiKey);
    expect(expire.status).toBe(409);
  });
});

describe('expiry and the page', () => {
  it('refuses payment on an expired session, and expiring a COMPLETE session is 409', async () => {
    const session = await newSession({ customerEmail: 'late@example.com' });
    await ctx.merchant.post(`/v1/checkout-sessions/${session.id}/expire`).set('X-API-Key', ctx.orgA.apiKey);
    expect((await ctx.merchant.get(pagePath(session.url))).status).toBe(410);
    const res = await pay(session.url);
    expect(res.status).toBe(410);
    expect((await readSession(session.id)).orderId).toBeNull();

    const paid = await newSession({ customerEmail: 'late@example.com' });
    await pay(paid.url);
    const conflict = await ctx.merchant.post(`/v1/checkout-sessions/${paid.id}/expire`).set('X-API-Key', ctx.orgA.apiKey);
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('CONFLICT');
    expect((await readSession(paid.id)).status).toBe('COMPLETE');
  });
});

describe('refunds (admin)', () => {
  it('partially refunds (stays PAID), then fully refunds (REFUNDED; the session stays COMPLETE)', async () => {
    const session = await newSession({ customerEmail: 'refund@example.com' });
    await pay(session.url);
    const { orderId } = await readSession(session.id);
    const partial = await ctx.admin.post(`/v1/orders/${orderId}/refund`).send({ amount: 200 });
    expect(partial.status).toBe(200);
    expect(partial.body.data).toMatchObject({ status: 'PAID', amountRefundedCents: 200 });
    expect((await readOrder(orderId)).body.data).toMatchObject({ status: 'PAID', amountRefunded: 2, amountRefundedCents: 200, refunded: false });
    expect((await ctx.admin.post(`/v1/orders/${orderId}/refund`).send({ amount: 1001 })).status).toBe(400);
    const full = await ctx.admin.post(`/v1/orders/${orderId}/refund`).send({});
    expect(full.body.data).toMatchObject({ status: 'REFUNDED', amountRefundedCents: 1200 });
    expect((await readOrder(orderId)).body.data).toMatchObject({ status: 'REFUNDED', displayStatus: 'Refunded', refunded: true, amountRefunded: 12 });
    expect(await readSession(session.id)).toMatchObject({ status: 'COMPLETE', orderStatus: 'REFUNDED', url: null });
    const again = await ctx.admin.post(`/v1/orders/${orderId}/refund`).send({});
    expect(again.status).toBe(409);
    expect((await ctx.admin.post('/v1/orders/ORD_000000000000000000000000/refund').send({})).status).toBe(404);
  });
});

describe('payment links', () => {
  it('opens a checkout whose query parameters become metadata, promoting merchant_reference', async () => {
    const { link } = await ctx.services.catalog.createPaymentLink(priceId, {});
    const url = ctx.services.catalog.paymentLinkUrl(link);
    const open = await ctx.merchant.get(`${pagePath(url)}?merchant_reference=ref-55&utm_source=mail`);
    expect(open.status).toBe(303);
    const page = open.headers.location as string;
    expect(page).toMatch(/^\/checkout\/[0-9A-Za-z]{32}$/);
    const paid = await ctx.merchant.post(`${page}/pay`).type('form').send({ email: 'link@example.com', cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
    expect(paid.status).toBe(303);
    const orders = await ctx.merchant.get('/v1/orders?merchant_reference=ref-55').set('X-API-Key', ctx.orgA.apiKey);
    expect(orders.body.data.total).toBe(1);
    expect(orders.body.data.records[0]).toMatchObject({
      merchantReference: 'ref-55',
      merchantMetadata: { merchant_reference: 'ref-55', utm_source: 'mail' },
      paymentLinkId: link.id,
      productId,
    });
  });

  it('refuses an inactive link and over-long parameters', async () => {
    const { link } = await ctx.services.catalog.createPaymentLink(priceId, {});
    const url = pagePath(ctx.services.catalog.paymentLinkUrl(link));
    expect((await ctx.merchant.get(`${url}?note=${'x'.repeat(501)}`)).status).toBe(400);
    await ctx.services.catalog.deactivatePaymentLink(link.id);
    const res = await ctx.merchant.get(url);
    expect(res.status).toBe(404);
    expect(res.text).toContain('no longer active');
  });

  it('refuses a link whose product was archived', async () => {
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Retired' });
    const price = await ctx.services.catalog.createPrice(product.id, { amount: 100, currency: 'USD' });
    const { link } = await ctx.services.catalog.createPaymentLink(price.id, {});
    await ctx.services.catalog.archiveProduct(product.id);
    const res = await ctx.merchant.get(pagePath(ctx.services.catalog.paymentLinkUrl(link)));
    expect(res.status).toBe(404);
  });
});

describe('orders and customers lists', () => {
  it('filters orders by status (any spelling), customer, product, provider and dates, scoped to the organization', async () => {
    const session = await newSession({ customerEmail: 'filters@example.com', merchantReference: 'FILTER-1' });
    await pay(session.url);
    const { orderId, customerId } = await readSession(session.id);
    const get = (q: string, apiKey = ctx.orgA.apiKey) => ctx.merchant.get(`/v1/orders?${q}`).set('X-API-Key', apiKey);
    for (const status of ['Paid', 'PAID', 'paid']) {
      const ids = (await get(`status=${status}&size=100`)).body.data.records.map((o: { orderId: string }) => o.orderId);
      expect(ids).toContain(orderId);
    }
    expect((await get('status=Refunded&size=100')).body.data.records.map((o: { orderId: string }) => o.orderId)).not.toContain(orderId);
    expect((await get(`customer_id=${customerId}`)).body.data.records.map((o: { orderId: string }) => o.orderId)).toEqual([orderId]);
    expect((await get('merchant_reference=filter')).body.data.records[0].orderId).toBe(orderId);
    expect((await get(`product_id=${productId}&provider=STRIPE&size=1`)).body.data).toMatchObject({ size: 1, page: 1 });
    expect((await get('provider=CRYPTO')).body.data.total).toBe(0);
    const now = Math.floor(ctx.clock.now().getTime() / 1000);
    expect((await get(`date_from=${now + 1}`)).body.data.total).toBe(0);
    expect((await get(`date_to=${now + 1}&customer_id=${customerId}`)).body.data.total).toBe(1);
    expect((await get('status=bogus')).status).toBe(400);
    // Another organization sees none of it.
    expect((await get(`customer_id=${customerId}`, ctx.orgB.apiKey)).body.data.total).toBe(0);
    expect((await readOrder(orderId, ctx.orgB.apiKey)).status).toBe(404);
    expect((await ctx.merchant.get(`/v1/customers/${customerId}`).set('X-API-Key', ctx.orgB.apiKey)).status).toBe(404);
    expect((await ctx.merchant.get(`/v1/customers/${customerId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data).toEqual({ customerId, email: 'filters@example.com', externalId: null });
  });

  it('paginates with total, pages and current', async () => {
    const res = await ctx.merchant.get('/v1/orders?size=2&page=2').set('X-API-Key', ctx.orgA.apiKey);
    expect(res.body.data).toMatchObject({ page: 2, current: 2, size: 2 });
    expect(res.body.data.pages).toBe(Math.ceil(res.body.data.total / 2));
  });

  it('counts the total the same on every page, past the last one, and with filters', async () => {
    const list = async (q: string) => (await ctx.merchant.get(`/v1/orders?${q}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    const first = await list('size=1');
    expect(first.total).toBeGreaterThan(1);
    expect(first.records).toHaveLength(1);
    expect((await list(`size=1&page=${first.total}`)).total).toBe(first.total);
    const past = await list(`size=1&page=${first.total + 1}`);
    expect(past).toMatchObject({ total: first.total, records: [] });
    const paid = await list('status=paid&size=1');
    expect(paid.total).toBeGreaterThan(0);
    expect((await list(`status=paid&size=1&page=${paid.total + 5}`))).toMatchObject({ total: paid.total, records: [] });
    expect((await list('provider=CRYPTO&size=1'))).toMatchObject({ total: 0, records: [] });
  });
});
