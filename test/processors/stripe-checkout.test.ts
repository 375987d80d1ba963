/**
 * Card checkout on the Stripe card processor, end to end over HTTP: Kassa's merchant API and
 * pages in-process, its Stripe SDK client talking to a local Stripe-shaped server
 * (./stripe-server.ts), and Stripe's signed events posted to Kassa's event endpoint.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';
import { receiveOrderWebhooks, type OrderWebhooks } from './order-webhooks.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';

let ctx: TestContext;
let stripe: FakeStripe;
let priceId: string;
let webhooks: OrderWebhooks;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = await stripe.start();
  ctx = await createTestContext({
    env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '500', WEBHOOK_ALLOW_LOOPBACK: 'true' },
  });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Ebook', description: 'A good read' });
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 1200, currency: 'EUR' })).id;
  webhooks = await receiveOrderWebhooks(ctx);
});
afterAll(async () => {
  await webhooks?.close();
  await stripe?.stop();
  await ctx?.close();
});

let keys = 0;
const create = (body: object = {}, key = `stripe-${++keys}`) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', key).send({ pricingId: priceId, ...body });
async function newSession(body: object = {}) {
  const res = await create(body);
  expect(res.status).toBe(201);
  return res.body.data as { id: string; url: string; expiresAt: string };
}
const pagePath = (url: string) => new URL(url).pathname;
const readSession = async (id: string) => (await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
const sessionRow = (id: string) => ctx.testDb.database.db('checkout_sessions').where({ id }).first();
const orderEvents = async (orderId: string) =>
  (await ctx.testDb.database.db('webhook_events').orderBy('created_at')).filter((e: { payload: unknown }) => JSON.stringify(e.payload).includes(orderId)).map((e: { type: string }) => e.type);
const deliver = (signed: { payload: string; signature: string }) =>
  ctx.merchant.post(EVENTS).set('Content-Type', 'application/json').set('Stripe-Signature', signed.signature).send(signed.payload);
const readOrder = async (orderId: string) => (await ctx.merchant.get(`/v1/orders/${orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
const stripeIdOf = async (kassaId: string) => (await sessionRow(kassaId)).processor_session_id as string;

describe('creating a card session on Stripe', () => {
  it('opens a Stripe Checkout Session from the purchase snapshot, keyed by Kassa ids; Kassa url stays its own', async () => {
    const before = stripe.requests.length;
    const session = await newSession({ quantity: 2, customerEmail: 'buyer@example.com', expiresIn: 7200 });
    expect(session.url).toMatch(/^http:\/\/merchant\.test\/checkout\/[A-Za-z0-9]+$/);
    const row = await sessionRow(session.id);
    const stripeSession = stripe.sessions.get(row.processor_session_id)!;
    expect(stripeSession).toMatchObject({
      mode: 'payment',
      client_reference_id: session.id,
      metadata: { kassa_checkout_session_id: session.id, kassa_org_id: ctx.orgA.orgId },
      customer_email: 'buyer@example.com',
      amount_total: 2400,
      currency: 'eur',
      expires_at: Date.parse(session.expiresAt) / 1000,
      success_url: `${session.url}/complete`,
      cancel_url: `${session.url}/canceled`,
    });
    const [request] = stripe.requests.slice(before);
    expect(request).toMatchObject({ method: 'POST', path: '/v1/checkout/sessions', idempotencyKey: `kassa_checkout_${ctx.orgA.orgId}_${session.id}` });
    expect(request!.body).toMatchObject({ line_items: [{ quantity: '2', price_data: { currency: 'eur', unit_amount: '1200', product_data: { name: 'Ebook', description: 'A good read' } } }] });
    expect(row.processor_url).toBe(stripeSession.url);
  });

  it('replays a retried create without opening a second Stripe session', async () => {
    const first = await create({}, 'same-key');
    const count = stripe.sessions.size;
    const again = await create({}, 'same-key');
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data.id).toBe(first.body.data.id);
    expect(stripe.sessions.size).toBe(count);
  });

  it('retries a Stripe 500 with the same idempotency key (one Stripe session)', async () => {
    const before = stripe.requests.length;
    const count = stripe.sessions.size;
    stripe.failNext('error500');
    const res = await create();
    expect(res.status).toBe(201);
    const attempts = stripe.requests.slice(before);
    expect(attempts).toHaveLength(2);
    expect(attempts[0]!.idempotencyKey).toBe(attempts[1]!.idempotencyKey);
    expect(stripe.sessions.size).toBe(count + 1);
  });

  it.each([
    ['answers 500 on every attempt', 'error500' as const],
    ['does not answer (timeout)', 'hang' as const],
  ])('answers 503 and stores nothing when Stripe %s; the same key then succeeds', async (_name, failure) => {
    const sessionsBefore = Number((await ctx.testDb.database.db('checkout_sessions').count('* as n'))[0]!.n);
    stripe.failNext(failure, 3); // the first attempt and the SDK's two retries
    const res = await create({}, `down-${failure}`);
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ success: false, error: { code: 'SERVICE_UNAVAILABLE' } });
    expect(Number((await ctx.testDb.database.db('checkout_sessions').count('* as n'))[0]!.n)).toBe(sessionsBefore);
    expect(await ctx.testDb.database.db('idempotency_keys').where({ key: `down-${failure}` }).first()).toBeUndefined();
    expect((await create({}, `down-${failure}`)).status).toBe(201);
  });
});

describe('the hosted page on Stripe', () => {
  it('redirects (303) to Stripe while payable, refuses a card posted to Kassa, and shows processing on return before the event', async () => {
    const session = await newSession();
    const page = await ctx.merchant.get(pagePath(session.url));
    expect(page.status).toBe(303);
    expect(page.headers.location).toBe((await sessionRow(session.id)).processor_url);
    const posted = await ctx.merchant.post(`${pagePath(session.url)}/pay`).type('form').send({ cardNumber: '4242 4242 4242 4242', expiry: '12/30', cvc: '123' });
    expect(posted.status).toBe(400);
    expect(posted.text).not.toContain('4242');
    expect(await ctx.testDb.database.db('sandbox_payments').where({ checkout_session_id: session.id }).first()).toBeUndefined();
    const back = await ctx.merchant.get(`${pagePath(session.url)}/complete`);
    expect(back.status).toBe(200);
    expect(back.text).toContain('processing');
    const canceled = await ctx.merchant.get(`${pagePath(session.url)}/canceled`);
    expect(canceled.status).toBe(200);
    expect(canceled.text).toContain('Return to payment');
  });
});

describe("the paid page's portal after Stripe Checkout (issue 37 §2)", () => {
  it("an address typed on Stripe's page (the victim's, other letter case) opens that purchase only, never the victim's history", async () => {
    const pay = async (email: string) => {
      const session = await newSession();
      expect((await ctx.merchant.get(pagePath(session.url))).status).toBe(303);
      const paid = stripe.complete(await stripeIdOf(session.id), { email });
      expect((await deliver(stripe.signed(stripe.event('checkout.session.completed', paid)))).status).toBe(200);
      return { page: pagePath(session.url), orderId: (await readSession(session.id)).orderId as string };
    };
    const victim = await pay('victim.stripe@example.com');
    const attacker = await pay('Victim.Stripe@EXAMPLE.com');
    const returned = await ctx.merchant.get(`${attacker.page}/complete`);
    expect(returned.text).toContain(`action="${attacker.page}/portal"`);
    const opened = await ctx.merchant.post(`${attacker.page}/portal`).type('form').send({});
    expect(opened.status).toBe(303);
    const cookie = [opened.headers['set-cookie']].flat().find((c) => c?.startsWith('__Host-kassa_portal='))!.split(';')[0]!;
    const home = await ctx.merchant.get('/portal').set('Cookie', cookie);
    expect(home.text).toContain(attacker.orderId);
    expect(home.text).not.toContain(victim.orderId);
    expect((await ctx.merchant.get(`/portal/orders/${victim.orderId}`).set('Cookie', cookie)).status).toBe(404);
  });
});

describe('payment links on Stripe', () => {
  it("opening a link creates the session with its Stripe checkout, and Kassa's page sends the buyer on to Stripe", async () => {
    const { link } = await ctx.services.catalog.createPaymentLink(priceId, {});
    const open = await ctx.merchant.get(`${pagePath(ctx.services.catalog.paymentLinkUrl(link))}?merchant_reference=link-1`);
    expect(open.status).toBe(303);
    const page = await ctx.merchant.get(open.headers.location as string);
    expect(page.status).toBe(303);
    const stripeSession = [...stripe.sessions.values()].find((s) => s.url === page.headers.location)!;
    expect(stripeSession).toMatchObject({ status: 'open', amount_total: 1200, currency: 'eur' });
    const row = await ctx.testDb.database.db('checkout_sessions').where({ id: stripeSession.client_reference_id }).first();
    expect(row).toMatchObject({ payment_link_id: link.id, merchant_reference: 'link-1', processor_session_id: stripeSession.id });
  });

  it('a link opened while Stripe is unreachable shows a temporary-failure page and stores no session', async () => {
    const { link } = await ctx.services.catalog.createPaymentLink(priceId, {});
    stripe.failNext('error500', 3);
    const open = await ctx.merchant.get(pagePath(ctx.services.catalog.paymentLinkUrl(link)));
    expect(open.status).toBe(503);
    expect(open.headers['content-type']).toMatch(/text\/html/);
    expect(await ctx.testDb.database.db('checkout_sessions').where({ payment_link_id: link.id }).first()).toBeUndefined();
  });
});

describe("Stripe's events", () => {
  it('one-time happy path: create → redirect → buyer pays on Stripe → checkout.session.completed → order PAID with order.paid', async () => {
    const session = await newSession();
    expect((await ctx.merchant.get(pagePath(session.url))).status).toBe(303);
    const paid = stripe.complete(await stripeIdOf(session.id), { email: 'Payer@Example.com' });
    const res = await deliver(stripe.signed(stripe.event('checkout.session.completed', paid)));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true, outcome: 'applied' });

    const read = await readSession(session.id);
    expect(read).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID', customerEmail: 'Payer@Example.com' });
    const order = (await ctx.merchant.get(`/v1/orders/${read.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(order).toMatchObject({ status: 'PAID', provider: 'STRIPE', amountCents: 1200, currency: 'EUR' });
    // The PaymentIntent and its status as Stripe reports it, in the API (GET and list) and in the signed order.paid.
    expect(paid.payment_intent).toMatch(/^pi_/);
    expect(order).toMatchObject({ providerPaymentId: paid.payment_intent, providerStatus: 'succeeded' });
    const listed = (await ctx.merchant.get('/v1/orders?size=100').set('X-API-Key', ctx.orgA.apiKey)).body.data.records.find((o: { orderId: string }) => o.orderId === read.orderId);
    expect(listed).toMatchObject({ providerPaymentId: paid.payment_intent, providerStatus: 'succeeded' });
    expect(await webhooks.received(read.orderId)).toEqual([
      { type: 'order.paid', order: expect.objectContaining({ status: 'PAID', providerPaymentId: paid.payment_intent, providerStatus: 'succeeded', providerSubscriptionId: null }) },
    ]);
    expect(await orderEvents(read.orderId)).toEqual(['order.paid']);
    const page = await ctx.merchant.get(pagePath(session.url));
    expect(page.status).toBe(200);
    expect(page.text).toContain('Payment received');
  });

  it('a duplicate event is acknowledged and not applied again; a replay under another event id changes nothing', async () => {
    const session = await newSession();
    const paid = stripe.complete(await stripeIdOf(session.id), { email: 'dup@example.com' });
    const signed = stripe.signed(stripe.event('checkout.session.completed', paid));
    expect((await deliver(signed)).body.outcome).toBe('applied');
    expect((await deliver(signed)).body).toEqual({ received: true, outcome: 'duplicate' });
    expect((await deliver(stripe.signed(stripe.event('checkout.session.completed', paid)))).status).toBe(200);
    expect((await deliver(stripe.signed(stripe.event('checkout.session.async_payment_succeeded', paid)))).status).toBe(200);
    const { orderId } = await readSession(session.id);
    expect(await orderEvents(orderId)).toEqual(['order.paid']);
  });

  it('a badly signed event is refused with 400 and nothing is applied; the genuine delivery then is', async () => {
    const session = await newSession();
    const paid = stripe.complete(await stripeIdOf(session.id), { email: 'sig@example.com' });
    const event = stripe.event('checkout.session.completed', paid);
    const forged = stripe.signed(event, 'whsec_someoneelse');
    const res = await deliver(forged);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    expect((await ctx.merchant.post(EVENTS).set('Content-Type', 'application/json').send(forged.payload)).status).toBe(400);
    const tampered = stripe.signed(event);
    expect((await deliver({ ...tampered, payload: tampered.payload.replace('sig@example.com', 'evil@example.com') })).status).toBe(400);
    expect((await readSession(session.id)).status).toBe('CREATED');
    expect(await ctx.testDb.database.db('stripe_events').where({ id: event.id }).first()).toBeUndefined();
    expect((await deliver(stripe.signed(event))).body.outcome).toBe('applied');
    expect((await readSession(session.id)).orderStatus).toBe('PAID');
  });

  it('out of order: a stale checkout.session.expired after completed leaves the paid session alone', async () => {
    const session = await newSession();
    const stripeId = await stripeIdOf(session.id);
    const stale = stripe.event('checkout.session.expired', { ...stripe.sessions.get(stripeId)!, status: 'expired' });
    const paid = stripe.complete(stripeId, { email: 'late@example.com' });
    await deliver(stripe.signed(stripe.event('checkout.session.completed', paid)));
    expect((await deliver(stripe.signed(stale))).status).toBe(200);
    expect(await readSession(session.id)).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID' });
  });

  it('out of order: a stale event copy that still shows the session open applies what Stripe has now (paid)', async () => {
    const session = await newSession();
    const stripeId = await stripeIdOf(session.id);
    const openCopy = stripe.sessions.get(stripeId)!;
    stripe.complete(stripeId, { email: 'copy@example.com' });
    expect((await deliver(stripe.signed(stripe.event('checkout.session.completed', openCopy)))).body.outcome).toBe('applied');
    expect((await readSession(session.id)).orderStatus).toBe('PAID');
  });

  it('checkout.session.expired expires the Kassa session; its page then shows the closed page', async () => {
    const session = await newSession();
    const expired = stripe.expireNow(await stripeIdOf(session.id));
    expect((await deliver(stripe.signed(stripe.event('checkout.session.expired', expired)))).body.outcome).toBe('applied');
    expect((await readSession(session.id)).status).toBe('EXPIRED');
    expect((await ctx.merchant.get(pagePath(session.url))).status).toBe(410);
  });

  it('asynchronous payments: completed (processing) → order PENDING; async_payment_succeeded → PAID; async_payment_failed → FAILED', async () => {
    const good = await newSession();
    const goodId = await stripeIdOf(good.id);
    await deliver(stripe.signed(stripe.event('checkout.session.completed', stripe.complete(goodId, { email: 'a@example.com', outcome: 'processing' }))));
    expect((await readSession(good.id)).orderStatus).toBe('PENDING');
    await deliver(stripe.signed(stripe.event('checkout.session.async_payment_succeeded', stripe.settleAsync(goodId, 'succeeded'))));
    const goodRead = await readSession(good.id);
    expect(goodRead.orderStatus).toBe('PAID');
    expect(await orderEvents(goodRead.orderId)).toEqual(['order.pending', 'order.paid']);

    const bad = await newSession();
    const badId = await stripeIdOf(bad.id);
    stripe.complete(badId, { email: 'b@example.com', outcome: 'processing' });
    // The failure is the first event Kassa hears of this payment (the completed one is late).
    await deliver(stripe.signed(stripe.event('checkout.session.async_payment_failed', stripe.settleAsync(badId, 'failed'))));
    const badRead = await readSession(bad.id);
    expect(badRead).toMatchObject({ status: 'FAILED', orderStatus: 'FAILED' });
    expect(await orderEvents(badRead.orderId)).toEqual(['order.pending', 'order.failed']);
  });

  it('providerStatus follows the PaymentIntent of an asynchronous payment (processing → succeeded, or requires_payment_method) in the API and the signed webhooks', async () => {
    const good = await newSession();
    const goodId = await stripeIdOf(good.id);
    const intentId = stripe.complete(goodId, { email: 'async-status@example.com', outcome: 'processing' }).payment_intent as string;
    await deliver(stripe.signed(stripe.lastEvent('checkout.session.completed', goodId)));
    const { orderId } = await readSession(good.id);
    expect(await readOrder(orderId)).toMatchObject({ status: 'PENDING', providerPaymentId: intentId, providerStatus: 'processing' });
    await deliver(stripe.signed(stripe.event('checkout.session.async_payment_succeeded', stripe.settleAsync(goodId, 'succeeded'))));
    expect(await readOrder(orderId)).toMatchObject({ status: 'PAID', providerPaymentId: intentId, providerStatus: 'succeeded' });
    expect((await webhooks.received(orderId)).map((w) => [w.type, w.order.providerPaymentId, w.order.providerStatus])).toEqual([
      ['order.pending', intentId, 'processing'],
      ['order.paid', intentId, 'succeeded'],
    ]);
    // A late result from before (a stale read of the PaymentIntent) changes no status, so it writes no providerStatus either.
    const late = await ctx.services.payments.applyPaymentResult({ checkoutSessionId: good.id, outcome: 'pending', processorPaymentId: intentId, processorStatus: 'processing' });
    expect(late.outcome).toBe('unchanged');
    expect(await readOrder(orderId)).toMatchObject({ status: 'PAID', providerStatus: 'succeeded' });

    const bad = await newSession();
    const badId = await stripeIdOf(bad.id);
    const badIntent = stripe.complete(badId, { email: 'async-status@example.com', outcome: 'processing' }).payment_intent as string;
    await deliver(stripe.signed(stripe.lastEvent('checkout.session.completed', badId)));
    await deliver(stripe.signed(stripe.event('checkout.session.async_payment_failed', stripe.settleAsync(badId, 'failed'))));
    const badOrder = (await readSession(bad.id)).orderId;
    expect(await readOrder(badOrder)).toMatchObject({ status: 'FAILED', providerPaymentId: badIntent, providerStatus: 'requires_payment_method' });
    expect((await webhooks.received(badOrder)).map((w) => [w.type, w.order.providerStatus])).toEqual([
      ['order.pending', 'processing'],
      ['order.failed', 'requires_payment_method'],
    ]);
  });

  it('answers 503 when Stripe cannot be read back, without remembering the event (Stripe redelivers it)', async () => {
    const session = await newSession();
    const event = stripe.event('checkout.session.completed', stripe.complete(await stripeIdOf(session.id), { email: 'retry@example.com' }));
    stripe.failNext('error500', 3);
    expect((await deliver(stripe.signed(event))).status).toBe(503);
    expect((await readSession(session.id)).status).toBe('CREATED');
    expect((await deliver(stripe.signed(event))).body.outcome).toBe('applied');
  });

  it("ignores events of Checkout Sessions Kassa did not create (another integration's on the same account)", async () => {
    const foreign = await newSession();
    const stripeId = await stripeIdOf(foreign.id);
    const other = { ...stripe.sessions.get(stripeId)!, client_reference_id: 'someone-else', metadata: {} };
    stripe.sessions.set(stripeId, other);
    expect((await deliver(stripe.signed(stripe.event('checkout.session.completed', other)))).body.outcome).toBe('ignored');
  });
});

describe('races (meaningful on PostgreSQL: TEST_DATABASE_URL)', () => {
  it('concurrent creates with one Idempotency-Key give one Kassa session and leave one Stripe session open', async () => {
    for (let round = 0; round < 10; round++) {
      const before = new Set(stripe.sessions.keys());
      const key = `race-${round}`;
      const answers = await Promise.all(Array.from({ length: 5 }, () => create({}, key)));
      expect(answers.map((a) => a.status).every((status) => status === 201 || status === 200)).toBe(true);
      const ids = new Set(answers.map((a) => a.body.data.id));
      expect(ids.size).toBe(1);
      const opened = [...stripe.sessions.values()].filter((s) => !before.has(s.id));
      const stillOpen = opened.filter((s) => s.status === 'open');
      expect(stillOpen.map((s) => s.id)).toEqual([await stripeIdOf([...ids][0] as string)]);
    }
  });

  it('concurrent deliveries of one event (and of its siblings) pay the order once', async () => {
    for (let round = 0; round < 10; round++) {
      const session = await newSession();
      const paid = stripe.complete(await stripeIdOf(session.id), { email: `race${round}@example.com` });
      const signed = stripe.signed(stripe.event('checkout.session.completed', paid));
      const sibling = stripe.signed(stripe.event('checkout.session.async_payment_succeeded', paid));
      const answers = await Promise.all([deliver(signed), deliver(signed), deliver(sibling), deliver(signed), deliver(sibling)]);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
      const { orderId, orderStatus } = await readSession(session.id);
      expect(orderStatus).toBe('PAID');
      expect(await orderEvents(orderId)).toEqual(['order.paid']);
    }
  });
});

describe('expiring a Stripe-backed session from the API', () => {
  it('expires the Stripe Checkout Session first, so it can no longer be paid there', async () => {
    const session = await newSession();
    const stripeId = await stripeIdOf(session.id);
    const res = await ctx.merchant.post(`/v1/checkout-sessions/${session.id}/expire`).set('X-API-Key', ctx.orgA.apiKey);
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('EXPIRED');
    expect(stripe.sessions.get(stripeId)!.status).toBe('expired');
  });

  it('answers 409 when the buyer has just paid on Stripe (the event has not arrived yet)', async () => {
    const session = await newSession();
    stripe.complete(await stripeIdOf(session.id), { email: 'quick@example.com' });
    const res = await ctx.merchant.post(`/v1/checkout-sessions/${session.id}/expire`).set('X-API-Key', ctx.orgA.apiKey);
    expect(res.status).toBe(409);
    expect((await readSession(session.id)).status).toBe('CREATED');
  });
});

describe('refunds of orders paid through Stripe (admin API)', () => {
  async function paidOrder() {
    const session = await newSession();
    const paid = stripe.complete(await stripeIdOf(session.id), { email: 'refund@example.com' });
    await deliver(stripe.signed(stripe.event('checkout.session.completed', paid)));
    return { orderId: (await readSession(session.id)).orderId as string, intentId: paid.payment_intent as string };
  }
  const refund = (orderId: string, body?: object) => ctx.admin.post(`/v1/orders/${orderId}/refund`).send(body ?? {});
  const refundsOf = (intentId: string) => [...stripe.refunds.values()].filter((r) => r.payment_intent === intentId).map((r) => r.amount);

  it('refunds partly then fully through Stripe, each refund keyed by the refunded total it starts from', async () => {
    const { orderId, intentId } = await paidOrder();
    const before = stripe.requests.length;
    const partial = await refund(orderId, { amount: 200 });
    expect(partial.status).toBe(200);
    expect(partial.body.data).toMatchObject({ status: 'PAID', amountRefundedCents: 200 });
    const full = await refund(orderId);
    // The PaymentIntent the refunds were made on; refunds leave its status succeeded, as Stripe does.
    expect(full.body.data).toMatchObject({ status: 'REFUNDED', amountRefundedCents: 1200, providerPaymentId: intentId, providerStatus: 'succeeded' });
    expect(await readOrder(orderId)).toMatchObject({ status: 'REFUNDED', refunded: true, providerPaymentId: intentId, providerStatus: 'succeeded' });
    expect(refundsOf(intentId)).toEqual([200, 1000]);
    expect(stripe.requests.slice(before).map((r) => r.idempotencyKey)).toEqual([`kassa_refund_${orderId}_0`, `kassa_refund_${orderId}_200`]);
  });

  it('answers 503 and refunds nothing in Kassa when Stripe cannot be reached; the retry refunds once', async () => {
    const { orderId, intentId } = await paidOrder();
    stripe.failNext('error500', 3);
    const res = await refund(orderId, { amount: 300 });
    expect(res.status).toBe(503);
    expect((await ctx.merchant.get(`/v1/orders/${orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.amountRefundedCents).toBe(0);
    expect((await refund(orderId, { amount: 300 })).status).toBe(200);
    expect(refundsOf(intentId)).toEqual([300]);
  });

  it('answers 409 when Stripe refuses the refund, leaving the order as it was', async () => {
    const { orderId, intentId } = await paidOrder();
    // Refunded in the Stripe Dashboard meanwhile, its charge.refunded event not yet arrived.
    stripe.refundInDashboard(intentId, 1200);
    const res = await refund(orderId, { amount: 100 });
    expect(res.status).toBe(409);
    expect(res.body.error.message).toMatch(/Stripe refused the refund/);
    expect((await ctx.merchant.get(`/v1/orders/${orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data).toMatchObject({ status: 'PAID', amountRefundedCents: 0 });
  });

  it('concurrent refunds of one order never refund more in Stripe than Kassa records (meaningful on PostgreSQL)', async () => {
    for (let round = 0; round < 5; round++) {
      const { orderId, intentId } = await paidOrder();
      const answers = await Promise.all([refund(orderId, { amount: 500 }), refund(orderId, { amount: 400 }), refund(orderId, { amount: 500 }), refund(orderId, { amount: 300 })]);
      expect(answers.every((a) => a.status === 200 || a.status === 400 || a.status === 409)).toBe(true);
      const recorded = (await ctx.merchant.get(`/v1/orders/${orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.amountRefundedCents;
      expect(refundsOf(intentId).reduce((a, b) => a + b, 0)).toBe(recorded);
    }
  });
});

describe('Stripe unreachable', () => {
  it('a create while the Stripe server is down answers 503 and stores nothing', async () => {
    await stripe.stop();
    const res = await create({}, 'server-down');
    expect(res.status).toBe(503);
    expect(await ctx.testDb.database.db('idempotency_keys').where({ key: 'server-down' }).first()).toBeUndefined();
  });
});
