/**
 * The customer portal (issue 28 §1): the merchant API's short-lived, single-use link, its exchange
 * for a session cookie bound to one customer of one organization, the portal's lists, receipts and
 * subscription actions, and the ways a buyer gets there without the merchant.
 */
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let subPrice: string;
let oneTimePrice: string;
let productId: string;
let n = 0;
const ORIGIN = 'http://merchant.test';

beforeAll(async () => {
  ctx = await createTestContext();
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  productId = product.id;
  subPrice = (await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 })).id;
  const ebook = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Ebook' });
  oneTimePrice = (await ctx.services.catalog.createPrice(ebook.id, { amount: 1250, currency: 'USD' })).id;
});
afterAll(async () => {
  await ctx?.close();
});

const http = () => supertest(ctx.apps.merchant);

async function buy(email: string, pricingId: string, apiKey = ctx.orgA.apiKey, extra: object = {}) {
  const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', apiKey).set('Idempotency-Key', `portal-${++n}`).send({ pricingId, customerEmail: email, merchantReference: `ref-${n}`, ...extra });
  expect(created.status).toBe(201);
  const path = new URL(created.body.data.url).pathname;
  const paid = await http().post(`${path}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', apiKey)).body.data;
  const order = (await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', apiKey)).body.data;
  return { path, order, customerId: order.customerId as string, subscriptionId: order.subscriptionId as string | null };
}

const createPortal = (body: object, apiKey = ctx.orgA.apiKey) => ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', apiKey).send(body);

/** Follows a portal link as a browser would: the continue page, then its POST; returns the session cookie. */
async function enter(url: string): Promise<string> {
  const path = new URL(url).pathname;
  const page = await http().get(path);
  expect(page.status).toBe(200);
  expect(page.text).toContain(`action="${path}"`);
  const entered = await http().post(path).set('Origin', ORIGIN).type('form').send({});
  expect(entered.status).toBe(303);
  expect(entered.headers.location).toBe('/portal');
  const cookie = [entered.headers['set-cookie']].flat().find((c) => c?.startsWith('__Host-kassa_portal='))!;
  expect(cookie).toMatch(/HttpOnly/);
  expect(cookie).toMatch(/SameSite=Lax/);
  // __Host-: Secure, Path=/, no Domain (issue 37 §15), or the browser drops it.
  expect(cookie).toMatch(/Path=\/;/);
  expect(cookie).toMatch(/; Secure/);
  expect(cookie).not.toMatch(/Domain=/i);
  return cookie.split(';')[0]!;
}

const csrfOf = (html: string) => /name="csrf" value="([0-9a-f]{64})"/.exec(html)?.[1];

describe('POST /v1/customer-portal-sessions', () => {
  it('creates a 10-minute link by customer id or e-mail; unknown, cross-organization and ambiguous requests are refused', async () => {
    const { customerId } = await buy('ada@example.com', oneTimePrice);
    const byId = await createPortal({ customerId, returnUrl: 'https://shop.example.com/account' });
    expect(byId.status).toBe(201);
    expect(byId.body.data).toMatchObject({ customerId, returnUrl: 'https://shop.example.com/account', expiresAt: '2026-11-22T09:10:00.000Z' });
    expect(byId.body.data.url).toMatch(/^http:\/\/merchant\.test\/portal\/enter\/[0-9A-Za-z]{32}$/);
    expect(byId.body.data.id).toMatch(/^CPS_/);
    const byEmail = await createPortal({ customerEmail: 'ADA@example.com' });
    expect(byEmail.status).toBe(201);
    expect(byEmail.body.data).toMatchObject({ customerId, returnUrl: null });

    // Only a hash of the link's token is stored.
    const token = byId.body.data.url.split('/').pop();
    const rows = JSON.stringify(await ctx.testDb.database.db('customer_portal_sessions').select());
    expect(rows).not.toContain(token);

    expect((await createPortal({ customerEmail: 'nobody@example.com' })).status).toBe(404);
    expect((await createPortal({ customerId }, ctx.orgB.apiKey)).status).toBe(404);
    const both = await createPortal({ customerId, customerEmail: 'ada@example.com' });
    expect(both.status).toBe(400);
    expect(both.body.error.code).toBe('VALIDATION_ERROR');
    expect((await createPortal({})).status).toBe(400);
    expect((await createPortal({ customerId, returnUrl: 'javascript:alert(1)' })).status).toBe(400);
    expect((await ctx.merchant.post('/v1/customer-portal-sessions').send({ customerId })).status).toBe(401);
  });

  it('is refused to a key without checkout:write', async () => {
    const key = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'read-only', permissions: ['orders:read'] });
    const res = await createPortal({ customerEmail: 'ada@example.com' }, key.key);
    expect(res.status).toBe(403);
  });
});

describe('entering the portal', () => {
  it('a GET never uses the link; the POST uses it once; a used or expired link is a 410 page', async () => {
    const { customerId } = await buy('once@example.com', oneTimePrice);
    const link = (await createPortal({ customerId })).body.data.url as string;
    await http().get(new URL(link).pathname); // a mail scanner's preview
    const cookie = await enter(link);
    expect(cookie).toMatch(/^__Host-kassa_portal=[0-9A-Za-z]{32}$/);
    const again = await http().post(new URL(link).pathname).set('Origin', ORIGIN).type('form').send({});
    expect(again.status).toBe(410);
    expect((await http().get(new URL(link).pathname)).status).toBe(410);

    const late = (await createPortal({ customerId })).body.data.url as string;
    ctx.clock.advance(10 * 60_000 + 1);
    expect((await http().post(new URL(late).pathname).type('form').send({})).status).toBe(410);
    // The session cookie itself is not stored either.
    const rows = JSON.stringify(await ctx.testDb.database.db('customer_portal_sessions').select());
    expect(rows).not.toContain(cookie.split('=')[1]);
  });

  it('two concurrent uses of one link open exactly one session (20 rounds)', async () => {
    const { customerId } = await buy('race@example.com', oneTimePrice);
    for (let round = 0; round < 20; round++) {
      const path = new URL((await createPortal({ customerId })).body.data.url).pathname;
      const answers = await Promise.all([1, 2, 3].map(() => http().post(path).type('form').send({})));
      expect(answers.map((a) => a.status).sort(), `round ${round}`).toEqual([303, 410, 410]);
    }
  });

  it('a session lasts an hour and ends on sign-out', async () => {
    const { customerId } = await buy('hour@example.com', oneTimePrice);
    const cookie = await enter((await createPortal({ customerId })).body.data.url);
    const home = await http().get('/portal').set('Cookie', cookie);
    expect(home.status).toBe(200);
    ctx.clock.advance(59 * 60_000);
    expect((await http().get('/portal').set('Cookie', cookie)).status).toBe(200);
    ctx.clock.advance(60_001);
    const ended = await http().get('/portal').set('Cookie', cookie);
    expect(ended.status).toBe(401);
    expect(ended.text).toContain('Your session has ended');

    const fresh = await enter((await createPortal({ customerId })).body.data.url);
    const page = await http().get('/portal').set('Cookie', fresh);
    const out = await http().post('/portal/sign-out').set('Cookie', fresh).type('form').send({ csrf: csrfOf(page.text)! });
    expect(out.status).toBe(200);
    expect((await http().get('/portal').set('Cookie', fresh)).status).toBe(401);
    expect((await http().get('/portal')).status).toBe(401);
    expect((await http().get('/portal').set('Cookie', '__Host-kassa_portal=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).status).toBe(401);
  });
});

describe('the portal', () => {
  it("lists the customer's orders with receipts, subscriptions and products; another customer's order is not there", async () => {
    const email = 'lists@example.com';
    const ebook = await buy(email, oneTimePrice);
    const sub = await buy(email, subPrice);
    const other = await buy('someone-else@example.com', oneTimePrice);
    const cookie = await enter((await createPortal({ customerEmail: email, returnUrl: 'https://shop.example.com/account' })).body.data.url);
    const home = await http().get('/portal').set('Cookie', cookie);
    expect(home.status).toBe(200);
    expect(home.headers['content-security-policy']).toContain("default-src 'none'");
    expect(home.headers['cache-control']).toBe('no-store');
    expect(home.text).toContain('Signed in as lists@example.com');
    expect(home.text).toContain(`/portal/orders/${ebook.order.orderId}`);
    expect(home.text).toContain(`/portal/orders/${sub.order.orderId}`);
    expect(home.text).not.toContain(other.order.orderId);
    expect(home.text).toContain('Active: renews on');
    expect(home.text).toContain('$9.00 every month');
    expect(home.text).toContain('href="https://shop.example.com/account"');
    expect(home.text).toMatch(/data-testid="product">Ebook/);
    expect(home.text).toMatch(/data-testid="product">Pro plan/);

    const receipt = await http().get(`/portal/orders/${ebook.order.orderId}`).set('Cookie', cookie);
    expect(receipt.status).toBe(200);
    for (const shown of ['Org A', 'Ebook', '$12.50', 'None charged', '22 November 2026', 'Card ending in 4242', ebook.order.orderId, ebook.order.merchantReference]) expect(receipt.text).toContain(shown);
    expect((await http().get(`/portal/orders/${other.order.orderId}`).set('Cookie', cookie)).status).toBe(404);
    expect((await http().get('/portal/orders/ORD_nope').set('Cookie', cookie)).status).toBe(404);
    expect((await http().get(`/portal/orders/${ebook.order.orderId}`)).status).toBe(401);
  });

  it('cancels at period end after a confirmation, with the form token and from our own site only; then keeps it', async () => {
    const email = 'cancel@example.com';
    const { subscriptionId } = await buy(email, subPrice);
    const cookie = await enter((await createPortal({ customerEmail: email })).body.data.url);
    const home = await http().get('/portal').set('Cookie', cookie);
    expect(home.text).toContain(`href="/portal/subscriptions/${subscriptionId}/cancel"`);
    expect(home.text).not.toContain('Cancel now');
    const confirm = await http().get(`/portal/subscriptions/${subscriptionId}/cancel`).set('Cookie', cookie);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain('You keep access until');
    const csrf = csrfOf(confirm.text)!;
    const row = () => ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first();

    expect((await http().post(`/portal/subscriptions/${subscriptionId}/cancel`).set('Cookie', cookie).type('form').send({ confirm: 'yes' })).status).toBe(403);
    expect((await http().post(`/portal/subscriptions/${subscriptionId}/cancel`).set('Cookie', cookie).type('form').send({ confirm: 'yes', csrf: 'f'.repeat(64) })).status).toBe(403);
    expect((await http().post(`/portal/subscriptions/${subscriptionId}/cancel`).set('Cookie', cookie).set('Origin', 'https://evil.example').type('form').send({ confirm: 'yes', csrf })).status).toBe(403);
    const unconfirmed = await http().post(`/portal/subscriptions/${subscriptionId}/cancel`).set('Cookie', cookie).type('form').send({ csrf });
    expect(unconfirmed.status).toBe(303);
    expect((await row()).cancel_at_period_end).toBe(false);

    const done = await http().post(`/portal/subscriptions/${subscriptionId}/cancel`).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send({ confirm: 'yes', csrf });
    expect(done.status).toBe(200);
    expect(done.text).toContain('you will not be charged again');
    expect(done.text).toContain('Canceled: access ends on');
    expect((await row()).cancel_at_period_end).toBe(true);

    const kept = await http().post(`/portal/subscriptions/${subscriptionId}/resume`).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send({ csrf });
    expect(kept.status).toBe(200);
    expect(kept.text).toContain('continues and renews');
    expect((await row()).cancel_at_period_end).toBe(false);
  });

  it("cannot touch another customer's subscription, and cancels now only where the merchant allowed it", async () => {
    const mine = await buy('mine@example.com', subPrice);
    const theirs = await buy('theirs@example.com', subPrice);
    const cookie = await enter((await createPortal({ customerEmail: 'mine@example.com' })).body.data.url);
    const csrf = csrfOf((await http().get('/portal').set('Cookie', cookie)).text)!;
    const foreign = await http().post(`/portal/subscriptions/${theirs.subscriptionId}/cancel`).set('Cookie', cookie).type('form').send({ confirm: 'yes', csrf });
    expect(foreign.status).toBe(404);
    expect((await ctx.testDb.database.db('subscriptions').where({ id: theirs.subscriptionId }).first()).cancel_at_period_end).toBe(false);
    const notAllowed = await http().post(`/portal/subscriptions/${mine.subscriptionId}/cancel`).set('Cookie', cookie).type('form').send({ confirm: 'yes', csrf, when: 'now' });
    expect(notAllowed.status).toBe(400);
    expect((await ctx.testDb.database.db('subscriptions').where({ id: mine.subscriptionId }).first()).status).toBe('ACTIVE');

    const allowed = await enter((await createPortal({ customerEmail: 'mine@example.com', allowCancelNow: true })).body.data.url);
    const home = await http().get('/portal').set('Cookie', allowed);
    expect(home.text).toContain(`href="/portal/subscriptions/${mine.subscriptionId}/cancel?now=1"`);
    const confirm = await http().get(`/portal/subscriptions/${mine.subscriptionId}/cancel?now=1`).set('Cookie', allowed);
    expect(confirm.text).toContain('ends immediately');
    const now = await http().post(`/portal/subscriptions/${mine.subscriptionId}/cancel`).set('Cookie', allowed).type('form').send({ confirm: 'yes', csrf: csrfOf(confirm.text)!, when: 'now' });
    expect(now.status).toBe(200);
    expect((await ctx.testDb.database.db('subscriptions').where({ id: mine.subscriptionId }).first()).status).toBe('CANCELED');
  });
});

describe('a renewal waiting for the buyer (3-D Secure)', () => {
  it('the portal and the manage page show "Confirm your payment" to the processor\'s page while it waits, and nothing once it is settled; only an http(s) page is linked', async () => {
    const { customerId, subscriptionId } = await buy('sca-pages@example.com', subPrice);
    const db = () => ctx.testDb.database.db('subscriptions').where({ id: subscriptionId });
    const token = (await db().first()).manage_token as string;
    const cookie = await enter((await createPortal({ customerId })).body.data.url);
    const url = 'https://invoice.stripe.com/i/acct_1/test_YWNjdF8x?s=ap';
    await db().update({ action_invoice_id: 'in_sca', action_url: url, action_required_at: ctx.clock.now() });
    const portal = await http().get('/portal').set('Cookie', cookie);
    expect(portal.text).toContain('Active: the renewal payment needs your confirmation.');
    expect(portal.text).toContain(`href="https://invoice.stripe.com/i/acct_1/test_YWNjdF8x?s=ap" rel="noreferrer" data-testid="confirm-payment-${subscriptionId}">Confirm your payment`);
    expect(portal.text).toContain('Your bank asks you to confirm the renewal payment of $9.00.');
    const manage = await http().get(`/subscriptions/manage/${token}`);
    expect(manage.text).toContain('data-testid="confirm-payment">Confirm your payment');
    // Whatever the processor said, the page never links a script URL.
    await db().update({ action_url: 'javascript:alert(1)' });
    expect((await http().get('/portal').set('Cookie', cookie)).text).not.toContain('Confirm your payment');
    await db().update({ action_invoice_id: null, action_url: null, action_required_at: null });
    for (const page of [await http().get('/portal').set('Cookie', cookie), await http().get(`/subscriptions/manage/${token}`)]) {
      expect(page.text).not.toContain('Confirm your payment');
      expect(page.text).toContain('Active: renews on');
    }
  });
});

describe('reaching the portal without the merchant', () => {
  it('the paid checkout page opens it for an hour after paying (a POST from that page)', async () => {
    const { path, order } = await buy('success@example.com', oneTimePrice);
    const complete = await http().get(`${path}/complete`);
    expect(complete.text).toContain(`action="${path}/portal"`);
    const opened = await http().post(`${path}/portal`).set('Origin', ORIGIN).type('form').send({});
    expect(opened.status).toBe(303);
    expect(opened.headers.location).toBe('/portal');
    const cookie = [opened.headers['set-cookie']].flat().find((c) => c?.startsWith('__Host-kassa_portal='))!.split(';')[0]!;
    const home = await http().get('/portal').set('Cookie', cookie);
    expect(home.text).toContain(order.orderId);
    expect((await http().post(`${path}/portal`).set('Origin', 'https://evil.example').type('form').send({})).status).toBe(403);

    ctx.clock.advance(60 * 60_000 + 1);
    expect((await http().get(`${path}/complete`)).text).not.toContain(`${path}/portal`);
    const late = await http().post(`${path}/portal`).type('form').send({});
    expect(late.status).toBe(303);
    expect(late.headers.location).toBe(`${path}/complete`);
    expect(late.headers['set-cookie']).toBeUndefined();
  });

  it("the manage page links to the merchant's portal sign-in page, which without SMTP says to ask the merchant", async () => {
    const { subscriptionId } = await buy('manage-link@example.com', subPrice);
    const token = (await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first()).manage_token;
    const manage = await http().get(`/subscriptions/manage/${token}`);
    expect(manage.text).toContain(`href="http://merchant.test/portal/o/${ctx.orgA.orgId}"`);
    const signIn = await http().get(`/portal/o/${ctx.orgA.orgId}`);
    expect(signIn.status).toBe(200);
    expect(signIn.text).toContain('Ask Org A for a link');
    expect(signIn.text).not.toContain('<form');
    expect((await http().get('/portal/o/ORG_unknown')).status).toBe(404);
  });

  it('without SMTP_URL nothing is queued for e-mail, whatever happened', async () => {
    expect(ctx.config.smtp).toBeUndefined();
    expect(ctx.services.modules.buyerEmails).toBeUndefined();
    expect(await ctx.testDb.database.db('buyer_emails').count<{ count: number }[]>({ count: '*' }).first()).toMatchObject({ count: expect.anything() });
    expect(Number((await ctx.testDb.database.db('buyer_emails').count<{ count: number }[]>({ count: '*' }).first())?.count)).toBe(0);
  });
});

describe("another buyer's portal for the price of a sticker (issue 37 §2)", () => {
  async function buyThroughLink(email: string, pricingId: string) {
    const { link } = await ctx.services.catalog.createPaymentLink(pricingId, {});
    const open = await http().get(new URL(ctx.services.catalog.paymentLinkUrl(link)).pathname);
    expect(open.status).toBe(303);
    const page = open.headers.location as string;
    const paid = await http().post(`${page}/pay`).type('form').send({ email, cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
    expect(paid.status).toBe(303);
    return page;
  }
  const openFromPaidPage = async (page: string) => {
    const opened = await http().post(`${page}/portal`).set('Origin', ORIGIN).type('form').send({});
    expect(opened.status).toBe(303);
    expect(opened.headers.location).toBe('/portal');
    return [opened.headers['set-cookie']].flat().find((c) => c?.startsWith('__Host-kassa_portal='))!.split(';')[0]!;
  };

  it("a payment link bought with the victim's address (other letter case) opens that purchase only: not the victim's orders, receipts or subscription, and no cancelling it", async () => {
    const victimEbook = await buy('victim@example.com', oneTimePrice);
    const victimSub = await buy('victim@example.com', subPrice);
    const page = await buyThroughLink('VICTIM@Example.COM', oneTimePrice);
    const cookie = await openFromPaidPage(page);
    const home = await http().get('/portal').set('Cookie', cookie);
    expect(home.status).toBe(200);
    const own = /\/portal\/orders\/(ORD_[0-9A-Za-z]+)/.exec(home.text)![1]!;
    expect([victimEbook.order.orderId, victimSub.order.orderId]).not.toContain(own);
    expect(home.text.match(/data-testid="order"/g)).toHaveLength(1);
    expect(home.text).not.toContain(victimEbook.order.orderId);
    expect(home.text).not.toContain(victimSub.order.orderId);
    expect(home.text).not.toContain(victimSub.subscriptionId!);
    expect(home.text).not.toMatch(/data-testid="product">Pro plan/);
    expect(home.text).toContain('This shows the purchase you just made.');
    expect((await http().get(`/portal/orders/${victimEbook.order.orderId}`).set('Cookie', cookie)).status).toBe(404);
    expect((await http().get(`/portal/subscriptions/${victimSub.subscriptionId}/cancel`).set('Cookie', cookie)).status).toBe(404);
    const csrf = csrfOf(home.text)!;
    const cancel = await http().post(`/portal/subscriptions/${victimSub.subscriptionId}/cancel`).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send({ confirm: 'yes', csrf });
    expect(cancel.status).toBe(404);
    expect((await ctx.testDb.database.db('subscriptions').where({ id: victimSub.subscriptionId }).first()).cancel_at_period_end).toBe(false);
    expect((await http().get(`/portal/orders/${own}`).set('Cookie', cookie)).status).toBe(200);
  });

  it('a subscription bought with a typed address: its own subscription can be canceled and kept, nothing else of that customer is shown', async () => {
    const earlier = await buy('sub-typed@example.com', oneTimePrice);
    const page = await buyThroughLink('Sub-Typed@example.com', subPrice);
    const cookie = await openFromPaidPage(page);
    const home = await http().get('/portal').set('Cookie', cookie);
    expect(home.text).not.toContain(earlier.order.orderId);
    expect(home.text).not.toMatch(/data-testid="product">Ebook/);
    const subscriptionId = /\/portal\/subscriptions\/(SUB_[0-9A-Za-z]+)\/cancel/.exec(home.text)![1]!;
    const done = await http().post(`/portal/subscriptions/${subscriptionId}/cancel`).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send({ confirm: 'yes', csrf: csrfOf(home.text)! });
    expect(done.status).toBe(200);
    expect((await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first()).cancel_at_period_end).toBe(true);
  });

  it('a checkout whose customer the merchant named (customerId) opens that customer\'s whole portal from the paid page', async () => {
    const first = await buy('named@example.com', oneTimePrice);
    const second = await buy('ignored@example.com', oneTimePrice, ctx.orgA.apiKey, { customerEmail: undefined, customerId: first.customerId });
    const cookie = await openFromPaidPage(second.path);
    const home = await http().get('/portal').set('Cookie', cookie);
    expect(home.text).toContain(first.order.orderId);
    expect(home.text).toContain(second.order.orderId);
    expect(home.text).not.toContain('This shows the purchase you just made.');
  });
});

describe('a subscription in its free trial (issue 39)', () => {
  it('shows "Free trial until …" and the first charge', async () => {
    const { customerId } = await buy('trialist@example.com', subPrice, ctx.orgA.apiKey, { trialDays: 14 });
    const cookie = await enter((await createPortal({ customerId })).body.data.url);
    const home = await http().get('/portal').set('Cookie', cookie);
    expect(home.text).toMatch(/data-testid="trial">Free trial until \d{1,2} \w+ \d{4} · first charge \$9\.00</);
  });

  it('says the first charge the renewal will make: the seats, the checkout’s coupon (it covers period 1 after a trial)', async () => {
    // Before: "first charge $18.00" (the stored amount: 2 × 9.00, no coupon) where the renewal charges 14.40.
    const coupon = await ctx.merchant.post('/v1/coupons').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Launch', percentOff: '20', duration: 'ONCE' });
    expect(coupon.status, JSON.stringify(coupon.body)).toBe(201);
    const { customerId } = await buy('trial-coupon@example.com', subPrice, ctx.orgA.apiKey, { trialDays: 14, quantity: 2, discounts: [{ coupon: coupon.body.data.id }] });
    const cookie = await enter((await createPortal({ customerId })).body.data.url);
    const home = await http().get('/portal').set('Cookie', cookie);
    expect(home.text).toMatch(/data-testid="trial">Free trial until \d{1,2} \w+ \d{4} · first charge \$14\.40</);
  });
});

describe('plan changes in the portal (issue 39)', () => {
  it('offers only the listed prices and seats, previews the proration and charges exactly the preview', async () => {
    const bigger = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Team plan' });
    const team = (await ctx.services.catalog.createPrice(bigger.id, { amount: 2000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
    const yearly = (await ctx.services.catalog.createPrice(bigger.id, { amount: 20000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'YEAR' })).id;
    ctx.clock.set('2026-11-22T09:00:00.000Z');
    const { customerId, subscriptionId } = await buy('planner@example.com', subPrice);
    // Without subscriptions:manage the key cannot offer plan changes.
    const weak = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'checkout-only', permissions: ['checkout:write'] });
    expect((await createPortal({ customerId, planChangePriceIds: [team] }, weak.key)).status).toBe(403);
    // A portal without the setting offers no change.
    const plain = await enter((await createPortal({ customerId })).body.data.url);
    expect((await http().get('/portal').set('Cookie', plain)).text).not.toContain(`change-${subscriptionId}`);

    const cookie = await enter((await createPortal({ customerId, planChangePriceIds: [team, yearly], allowQuantityChange: true })).body.data.url);
    const home = await http().get('/portal').set('Cookie', cookie);
    expect(home.text).toContain(`data-testid="change-${subscriptionId}"`);
    const page = await http().get(`/portal/subscriptions/${subscriptionId}/change`).set('Cookie', cookie);
    expect(page.status).toBe(200);
    expect(page.text).toContain(`value="${team}"`);
    expect(page.text).not.toContain(`value="${yearly}"`); // another interval: not offered
    const csrf = csrfOf(page.text)!;
    ctx.clock.set('2026-11-22T09:20:00.000Z');
    const preview = await http().post(`/portal/subscriptions/${subscriptionId}/change`).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send({ csrf, priceId: team, quantity: '2', step: 'preview' });
    expect(preview.status).toBe(200);
    const quote = await ctx.services.subscriptions.previewChange(subscriptionId!, { priceId: team, quantity: 2 }, { orgId: ctx.orgA.orgId });
    expect(preview.text).toContain(`data-testid="preview-total">${new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' }).format(quote.amountDue / 100)}`);
    const hiddenOf = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(preview.text)![1]!;
    ctx.clock.set('2026-11-22T09:20:05.000Z');
    const confirmed = await http().post(`/portal/subscriptions/${subscriptionId}/change`).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send({ csrf: csrfOf(preview.text), priceId: team, quantity: '2', prorationDate: hiddenOf('prorationDate'), expected: hiddenOf('expected'), step: 'confirm' });
    expect(confirmed.status).toBe(200);
    expect(confirmed.text).toContain('2 × Team plan');
    const charged = await ctx.testDb.database.db('orders').where({ subscription_id: subscriptionId }).whereNull('billing_period');
    expect(charged).toHaveLength(1);
    expect(Number(charged[0].amount_cents)).toBe(quote.amountDue);
    const s = (await ctx.merchant.get(`/v1/subscriptions/${subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(s).toMatchObject({ priceId: team, quantity: 2, amountCents: 4000 });
  });

  it('a downgrade now, with credit for the unused time: the preview shows the credit, a stale credit is refused, the balance is shown', async () => {
    const smaller = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Mini plan' });
    const mini = (await ctx.services.catalog.createPrice(smaller.id, { amount: 300, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
    ctx.clock.set('2026-11-22T09:00:00.000Z');
    const { customerId, subscriptionId } = await buy('downsizer@example.com', subPrice);
    const cookie = await enter((await createPortal({ customerId, planChangePriceIds: [mini] })).body.data.url);
    const page = await http().get(`/portal/subscriptions/${subscriptionId}/change`).set('Cookie', cookie);
    expect(page.text).toContain('name="when" value="period_end" checked');
    expect(page.text).toContain('name="when" value="now"');
    ctx.clock.set('2026-11-22T09:20:00.000Z');
    const send = (form: Record<string, string>) => http().post(`/portal/subscriptions/${subscriptionId}/change`).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send(form);
    // Without "now" the downgrade is scheduled: nothing credited.
    const later = await send({ csrf: csrfOf(page.text)!, priceId: mini, when: 'period_end', step: 'preview' });
    expect(later.status).toBe(200);
    expect(later.text).toContain('data-testid="preview-when"');
    expect(later.text).not.toContain('preview-credit');
    const preview = await send({ csrf: csrfOf(page.text)!, priceId: mini, when: 'now', step: 'preview' });
    expect(preview.status).toBe(200);
    const quote = await ctx.services.subscriptions.previewChange(subscriptionId!, { priceId: mini, effective: 'IMMEDIATE' }, { orgId: ctx.orgA.orgId });
    const credit = quote.balanceCredit!;
    const usd = (minor: number) => new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' }).format(minor / 100);
    expect(preview.text).toContain(`data-testid="preview-credit">${usd(credit)} is added to your credit balance`);
    const hiddenOf = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(preview.text)![1]!;
    expect(hiddenOf('expectedCredit')).toBe(String(credit));
    const confirm = { csrf: csrfOf(preview.text)!, priceId: mini, prorationDate: hiddenOf('prorationDate'), expected: hiddenOf('expected'), when: 'now', effective: 'IMMEDIATE', step: 'confirm' };
    // A credit other than the one previewed (a tampered or stale form) changes nothing.
    const stale = await send({ ...confirm, expectedCredit: String(credit + 1) });
    // The portal's refusal page (its status as for every refused change) names what changed.
    expect(stale.status).toBeGreaterThanOrEqual(400);
    expect(stale.text).toContain(`this change now credits ${credit} (not ${credit + 1}) to the balance; nothing was changed`);
    expect((await ctx.merchant.get(`/v1/subscriptions/${subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.priceId).toBe(subPrice);
    const done = await send({ ...confirm, expectedCredit: String(credit) });
    expect(done.status).toBe(200);
    expect(done.text).toContain(`${usd(credit)} was added to your credit balance`);
    expect(done.text).toContain(`data-testid="credit-balance">${usd(credit)} <span class="muted">taken off your next renewals in USD`);
    const s = (await ctx.merchant.get(`/v1/subscriptions/${subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(s).toMatchObject({ priceId: mini, customerBalanceCents: credit, scheduledChange: null });
  });
});
