/**
 * Issue 27 item 10: every state-changing hosted form refuses a cross-site POST (Origin, or
 * Sec-Fetch-Site when a browser sends no Origin), and the manage page's cancel needs a
 * confirmation step. Requests without either header (server-side clients, curl) are not browsers
 * carrying a buyer's ambient authority and still work.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let priceId: string;
let n = 0;
const logLines: string[] = [];

beforeAll(async () => {
  ctx = await createTestContext({ env: { LOG_LEVEL: 'info' }, logDestination: { write: (line) => void logLines.push(line) } });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 })).id;
});
afterAll(async () => {
  await ctx?.close();
});

async function newSession(): Promise<{ id: string; path: string }> {
  const res = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `xsite-${++n}`).send({ pricingId: priceId, customerEmail: `xsite${n}@example.com` });
  expect(res.status).toBe(201);
  return { id: res.body.data.id, path: new URL(res.body.data.url).pathname };
}

async function subscribe(): Promise<{ subscriptionId: string; manage: string }> {
  const { id, path } = await newSession();
  const paid = await ctx.merchant.post(`${path}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const sub = await ctx.testDb.database.db('subscriptions').where({ checkout_session_id: id }).first();
  return { subscriptionId: sub.id, manage: `/subscriptions/manage/${sub.manage_token}` };
}

const subscriptionRow = (id: string) => ctx.testDb.database.db('subscriptions').where({ id }).first();

describe('the manage page refuses a cross-site cancellation', () => {
  it('a cross-site POST (Origin of another site) that cancels today is refused and changes nothing', async () => {
    const { subscriptionId, manage } = await subscribe();
    const res = await ctx.merchant.post(`${manage}/cancel`).set('Origin', 'https://evil.example').type('form').send({ confirm: 'yes' });
    expect(res.status).toBe(403);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.text).toContain('another site');
    expect((await subscriptionRow(subscriptionId)).cancel_at_period_end).toBe(false);
  });

  it('a browser POST without Origin but marked cross-site (Sec-Fetch-Site) is refused too', async () => {
    const { subscriptionId, manage } = await subscribe();
    const res = await ctx.merchant.post(`${manage}/cancel`).set('Sec-Fetch-Site', 'cross-site').type('form').send({ confirm: 'yes' });
    expect(res.status).toBe(403);
    const opaque = await ctx.merchant.post(`${manage}/cancel`).set('Origin', 'null').type('form').send({ confirm: 'yes' });
    expect(opaque.status).toBe(403);
    expect((await subscriptionRow(subscriptionId)).cancel_at_period_end).toBe(false);
  });

  it('cancel needs a confirmation: the first POST (or GET) shows it, only the confirmed form cancels', async () => {
    const { subscriptionId, manage } = await subscribe();
    const page = await ctx.merchant.get(manage);
    expect(page.text).toContain(`href="${manage}/cancel"`);
    const confirmPage = await ctx.merchant.get(`${manage}/cancel`);
    expect(confirmPage.status).toBe(200);
    expect(confirmPage.text).toContain('name="confirm"');
    const unconfirmed = await ctx.merchant.post(`${manage}/cancel`).set('Origin', 'http://merchant.test').type('form').send({});
    expect(unconfirmed.status).toBe(200);
    expect(unconfirmed.text).toContain('name="confirm"');
    expect((await subscriptionRow(subscriptionId)).cancel_at_period_end).toBe(false);
    const confirmed = await ctx.merchant.post(`${manage}/cancel`).set('Origin', 'http://merchant.test').set('Sec-Fetch-Site', 'same-origin').type('form').send({ confirm: 'yes' });
    expect(confirmed.status).toBe(200);
    expect(confirmed.text).toContain('access ends on');
    expect((await subscriptionRow(subscriptionId)).cancel_at_period_end).toBe(true);
  });

  it('the buyer can undo a scheduled cancellation from the manage page', async () => {
    const { subscriptionId, manage } = await subscribe();
    await ctx.merchant.post(`${manage}/cancel`).type('form').send({ confirm: 'yes' });
    const page = await ctx.merchant.get(manage);
    expect(page.text).toContain(`action="${manage}/resume"`);
    const resumed = await ctx.merchant.post(`${manage}/resume`).set('Origin', 'http://merchant.test').type('form').send({});
    expect(resumed.status).toBe(200);
    expect(resumed.text).toContain('Active: renews on');
    expect((await subscriptionRow(subscriptionId)).cancel_at_period_end).toBe(false);
    const crossSite = await ctx.merchant.post(`${manage}/cancel`).set('Origin', 'https://evil.example').type('form').send({ confirm: 'yes' });
    expect(crossSite.status).toBe(403);
  });
});

describe('every other hosted form refuses a cross-site POST', () => {
  it('checkout pay: refused from another origin, accepted from our own (Host or PUBLIC_BASE_URL)', async () => {
    const { id, path } = await newSession();
    const card = { cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' };
    const refused = await ctx.merchant.post(`${path}/pay`).set('Origin', 'https://evil.example').type('form').send(card);
    expect(refused.status).toBe(403);
    expect((await ctx.testDb.database.db('orders').where({ checkout_session_id: id })).length).toBe(0);
    const sameSite = await ctx.merchant.post(`${path}/pay`).set('Sec-Fetch-Site', 'same-site').type('form').send(card);
    expect(sameSite.status).toBe(403);
    const ours = await ctx.merchant.post(`${path}/pay`).set('Origin', 'http://merchant.test').set('Sec-Fetch-Site', 'same-origin').type('form').send(card);
    expect(ours.status).toBe(303);
  });

  it('the crypto e-mail step is refused from another origin before it reads the session', async () => {
    const { path } = await newSession();
    const res = await ctx.merchant.post(`${path}/crypto-email`).set('Origin', 'https://evil.example').type('form').send({ email: 'a@example.com' });
    expect(res.status).toBe(403);
  });
});

describe('a refused cross-site form is logged by its route, never its token (issue 37 §12)', () => {
  it('portal entry, checkout page and manage page: the log line names the route pattern', async () => {
    const { path } = await newSession();
    const { manage } = await subscribe();
    const portalToken = 'Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4F';
    const checkoutToken = path.split('/')[2]!;
    const manageToken = manage.split('/')[3]!;
    logLines.length = 0;
    for (const target of [`/portal/enter/${portalToken}`, `${path}/pay`, `${manage}/cancel`, `/portal/o/${ctx.orgA.orgId}`]) {
      expect((await ctx.merchant.post(target).set('Origin', 'https://evil.example').type('form').send({ confirm: 'yes' })).status).toBe(403);
    }
    const refusals = logLines.filter((line) => line.includes('hosted form refused'));
    expect(refusals).toHaveLength(4);
    const logged = refusals.join('\n');
    for (const secret of [portalToken, checkoutToken, manageToken, ctx.orgA.orgId]) expect(logged).not.toContain(secret);
    expect(refusals.map((line) => JSON.parse(line).route)).toEqual(['/portal/enter/:token', '/checkout/:token/pay', '/subscriptions/manage/:token/cancel', '/portal/o/:token']);
  });
});
