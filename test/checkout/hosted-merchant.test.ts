/**
 * Whom the buyer pays, and what they keep: the organization's display name (admin API field,
 * defaulting to its name) heads every hosted page, HTML-escaped, above "Secured by Kassa" (with the
 * checkout's rail: "sandbox" only on the sandbox's pages); the
 * page after paying shows the order id, the merchant's reference and the way back to its site,
 * whichever path led there (no successUrl, an asynchronous payment, the checkout link reopened).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createLink, createPrice, createProduct } from '../catalog/fixtures.js';

let ctx: TestContext;
const DISPLAY = 'Ada\'s <Café> & "Books"';
const ESCAPED = 'Ada&#39;s &lt;Café&gt; &amp; &quot;Books&quot;';
const CHAIN = 31337;

beforeAll(async () => {
  ctx = await createTestContext({
    env: {
      CRYPTO_CHAINS: JSON.stringify([{ chainId: CHAIN, name: 'Local', rpcUrl: 'http://127.0.0.1:9', confirmations: 1, explorerUrl: 'https://x.test', blockRange: 10, initialLookback: 0, tokens: { USDC: '0x5FbDB2315678afecb367f032d93F642f64180aa3' } }]),
    },
  });
  await ctx.admin.patch(`/v1/orgs/${ctx.orgA.orgId}`).send({ displayName: DISPLAY }).expect(200);
  await ctx.admin.put(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${CHAIN}`).send({ address: '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed' }).expect(200);
});
afterAll(async () => {
  await ctx?.close();
});

const pagePath = (url: string) => new URL(url).pathname;
let keys = 0;

async function newSession(body: Record<string, unknown> = {}) {
  const res = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', ctx.orgA.apiKey)
    .set('Idempotency-Key', `merchant-page-${++keys}`)
    .send({ pricingData: { amount: 2500, currency: 'USD', productData: { name: 'Novel' } }, customerEmail: 'reader@example.com', ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as { id: string; url: string };
}

const pay = (url: string, cardNumber = '4242 4242 4242 4242') =>
  ctx.merchant.post(`${pagePath(url)}/pay`).type('form').send({ cardNumber, expiry: '12/30', cvc: '123' });

const orderIdOf = async (sessionId: string): Promise<string> =>
  (await ctx.merchant.get(`/v1/checkout-sessions/${sessionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.orderId;

/** The display name heads the page (escaped) and Kassa stays in the footer only. */
function expectMerchantHeading(html: string): void {
  expect(html).toContain(`<div class="brand" data-testid="merchant">${ESCAPED}</div>`);
  expect(html).not.toContain(DISPLAY);
  expect(html).toContain('<footer>Secured by Kassa');
}

describe('display name (admin API)', () => {
  it('defaults to the name, is set, trimmed, and reset to the name with null', async () => {
    const created = await ctx.admin.post('/v1/orgs').send({ name: 'Legal Name Ltd' });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ name: 'Legal Name Ltd', displayName: 'Legal Name Ltd' });
    const id = created.body.data.orgId;
    const named = await ctx.admin.post('/v1/orgs').send({ name: 'Legal Name 2 Ltd', displayName: '  Shop Two  ' });
    expect(named.body.data.displayName).toBe('Shop Two');

    const set = await ctx.admin.patch(`/v1/orgs/${id}`).send({ displayName: ' Corner Shop ' });
    expect(set.body.data).toMatchObject({ name: 'Legal Name Ltd', displayName: 'Corner Shop' });
    // The display name does not follow a rename once set...
    await ctx.admin.patch(`/v1/orgs/${id}`).send({ name: 'Renamed Ltd' }).expect(200);
    expect((await ctx.admin.get(`/v1/orgs/${id}`)).body.data.displayName).toBe('Corner Shop');
    // ...and null makes the pages show the name again.
    const reset = await ctx.admin.patch(`/v1/orgs/${id}`).send({ displayName: null });
    expect(reset.body.data).toMatchObject({ name: 'Renamed Ltd', displayName: 'Renamed Ltd' });
    expect((await ctx.admin.get('/v1/orgs?size=100')).body.data.records.find((o: { orgId: string }) => o.orgId === id).displayName).toBe('Renamed Ltd');
  });

  it.each([
    ['empty', ''],
    ['blank', '   '],
    ['over 100 characters', 'x'.repeat(101)],
    ['not a string', 42],
  ])('refuses a display name that is %s (400) and changes nothing', async (_label, displayName) => {
    const created = await ctx.admin.post('/v1/orgs').send({ name: 'Unchanged', displayName });
    expect(created.status).toBe(400);
    expect(created.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    const update = await ctx.admin.patch(`/v1/orgs/${ctx.orgA.orgId}`).send({ displayName });
    expect(update.status).toBe(400);
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}`)).body.data.displayName).toBe(DISPLAY);
  });

  it('refuses null at creation (omit it to use the name)', async () => {
    expect((await ctx.admin.post('/v1/orgs').send({ name: 'X', displayName: null })).status).toBe(400);
  });
});

describe('the display name on every hosted page', () => {
  it('card checkout page, and its cancel link names the merchant', async () => {
    const session = await newSession({ cancelUrl: 'https://shop.example/cart' });
    const page = await ctx.merchant.get(pagePath(session.url));
    expect(page.status).toBe(200);
    expectMerchantHeading(page.text);
    expect(page.text).toContain(`Cancel and return to ${ESCAPED}</a>`);
  });

  it('declined card page', async () => {
    const session = await newSession();
    const declined = await pay(session.url, '4000 0000 0000 0002');
    expect(declined.status).toBe(402);
    expectMerchantHeading(declined.text);
  });

  it('expired checkout page', async () => {
    const session = await newSession();
    ctx.clock.advance(3601_000);
    const closed = await ctx.merchant.get(pagePath(session.url));
    expect(closed.status).toBe(410);
    expectMerchantHeading(closed.text);
  });

  it('crypto checkout page', async () => {
    const res = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', `merchant-page-${++keys}`)
      .send({ provider: 'CRYPTO', pricingData: { amount: 5_000_000, currency: 'USDC', productData: { name: 'Ebook' } } });
    expect(res.status).toBe(201);
    const page = await ctx.merchant.get(pagePath(res.body.data.url));
    expect(page.status).toBe(200);
    expect(page.text).toContain('id="email"');
    expectMerchantHeading(page.text);
    // The footer names the rail: crypto, never "sandbox".
    expect(page.text).toContain('<footer>Secured by Kassa · crypto payment</footer>');
  });

  it('the footer names the rail: "sandbox" on the sandbox card processor’s pages, none on pages that take no payment', async () => {
    const session = await newSession();
    expect((await ctx.merchant.get(pagePath(session.url))).text).toContain('<footer>Secured by Kassa · sandbox</footer>');
    expect((await pay(session.url)).status).toBe(303);
    expect((await ctx.merchant.get(`${pagePath(session.url)}/complete`)).text).toContain('<footer>Secured by Kassa · sandbox</footer>');
    const unknown = await ctx.merchant.get(`/checkout/${'A'.repeat(32)}`);
    expect(unknown.status).toBe(404);
    expect(unknown.text).toContain('<footer>Secured by Kassa</footer>');
    // (The Stripe rail's pages: test/processors/stripe-location-promotion-code.test.ts.)
  });

  it('payment link errors: an inactive link and a refused query say whose link it is', async () => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Poster' });
    const price = await createPrice(ctx, product.productId, { amount: 900, currency: 'USD' });
    const link = await createLink(ctx, price.pricingId);
    const path = pagePath(link.paymentLinkUrl);
    const refused = await ctx.merchant.get(`${path}?${'k'.repeat(41)}=v`);
    expect(refused.status).toBe(400);
    expectMerchantHeading(refused.text);
    await ctx.admin.post(`/v1/payment-links/${link.paymentLinkId}/deactivate`).expect(200);
    const inactive = await ctx.merchant.get(path);
    expect(inactive.status).toBe(404);
    expect(inactive.text).toContain('no longer active');
    expectMerchantHeading(inactive.text);
    // An unknown link belongs to no one: the page says Kassa.
    const unknown = await ctx.merchant.get(`/pay/${'A'.repeat(32)}`);
    expect(unknown.status).toBe(404);
    expect(unknown.text).toContain('<div class="brand">Kassa</div>');
  });

  it('subscription manage page, linked from the paid page', async () => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Magazine' });
    const price = await createPrice(ctx, product.productId, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 });
    const res = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', `merchant-page-${++keys}`)
      .send({ pricingId: price.pricingId, customerEmail: 'sub@example.com' });
    expect(res.status).toBe(201);
    expect((await pay(res.body.data.url)).status).toBe(303);
    const complete = await ctx.merchant.get(`${pagePath(res.body.data.url)}/complete`);
    const manage = /href="(\/subscriptions\/manage\/[0-9A-Za-z]{32})"/.exec(complete.text)?.[1];
    expect(manage).toBeDefined();
    const page = await ctx.merchant.get(manage!);
    expect(page.status).toBe(200);
    expectMerchantHeading(page.text);
    const canceled = await ctx.merchant.post(`${manage}/cancel`);
    expectMerchantHeading(canceled.text);
  });
});

describe('the page after paying', () => {
  it('with successUrl: the payment redirects there; reopening the checkout link shows the receipt and the way back', async () => {
    const session = await newSession({ successUrl: 'https://shop.example/thanks?o=1&r=2', merchantReference: 'inv-<1001>' });
    const paid = await pay(session.url);
    expect(paid.status).toBe(303);
    expect(paid.headers.location).toBe('https://shop.example/thanks?o=1&r=2');
    const orderId = await orderIdOf(session.id);
    for (const path of [pagePath(session.url), `${pagePath(session.url)}/complete`]) {
      const page = await ctx.merchant.get(path);
      expect(page.status).toBe(200);
      expect(page.text).toContain('Payment received. Thank you!');
      expectMerchantHeading(page.text);
      expect(page.text).toContain(`<dt>Paid to</dt><dd>${ESCAPED}</dd>`);
      expect(page.text).toContain(`<code data-testid="order-id">${orderId}</code>`);
      expect(page.text).toContain('<dd data-testid="merchant-reference">inv-&lt;1001&gt;</dd>');
      expect(page.text).toContain(`<a data-testid="return" href="https://shop.example/thanks?o=1&amp;r=2">Return to ${ESCAPED}</a>`);
    }
  });

  it('without successUrl: the payment lands on the receipt, with no reference row or return link it does not have', async () => {
    const session = await newSession();
    const paid = await pay(session.url);
    expect(paid.status).toBe(303);
    expect(paid.headers.location).toBe(`${pagePath(session.url)}/complete`);
    const page = await ctx.merchant.get(paid.headers.location!);
    expect(page.text).toContain('Payment received. Thank you!');
    expect(page.text).toContain(`<code data-testid="order-id">${await orderIdOf(session.id)}</code>`);
    expect(page.text).not.toContain('data-testid="merchant-reference"');
    expect(page.text).not.toContain('data-testid="return"');
  });

  it('an asynchronous payment: processing, then the same receipt and way back once it settles', async () => {
    const session = await newSession({ successUrl: 'https://shop.example/thanks', merchantReference: 'inv-async' });
    const res = await pay(session.url, '4000 0000 0000 0077');
    expect(res.headers.location).toBe(`${pagePath(session.url)}/complete`);
    const processing = await ctx.merchant.get(res.headers.location!);
    expect(processing.text).toContain('Your payment is processing');
    expectMerchantHeading(processing.text);
    ctx.clock.advance(5000);
    expect(await ctx.services.sandboxProcessor.settleDue(ctx.services.payments)).toBe(1);
    const page = await ctx.merchant.get(res.headers.location!);
    expect(page.text).toContain('Payment received. Thank you!');
    expect(page.text).toContain(`<code data-testid="order-id">${await orderIdOf(session.id)}</code>`);
    expect(page.text).toContain('<dd data-testid="merchant-reference">inv-async</dd>');
    expect(page.text).toContain(`<a data-testid="return" href="https://shop.example/thanks">Return to ${ESCAPED}</a>`);
  });
});
