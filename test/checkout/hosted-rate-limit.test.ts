/**
 * Per-client rate limits of the hosted pages (checkout, payment links, crypto e-mail step,
 * subscription management): keyed on the client's address — the peer's, or with TRUST_PROXY the
 * one the load balancer appended to X-Forwarded-For — answered with a human 429 page.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { clientAddressKey } from '../../src/http/rate-limit.js';

const PAGE_LIMIT = 10;
const WRITE_LIMIT = 3;
const limits = { HOSTED_RATE_LIMIT_PER_MINUTE: String(PAGE_LIMIT), HOSTED_WRITE_RATE_LIMIT_PER_MINUTE: String(WRITE_LIMIT) };

let direct: TestContext;
let proxied: TestContext;
beforeAll(async () => {
  [direct, proxied] = await Promise.all([createTestContext({ env: limits }), createTestContext({ env: { ...limits, TRUST_PROXY: 'true' } })]);
});
afterAll(async () => {
  await Promise.all([direct?.close(), proxied?.close()]);
});

/** Every test starts in a fresh fixed window (aligned on the clock minute). */
const nextMinute = (ctx: TestContext) => ctx.clock.set(Math.floor(ctx.clock.now().getTime() / 60_000) * 60_000 + 60_000);

let keys = 0;
async function sessionPage(ctx: TestContext): Promise<string> {
  const res = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', ctx.orgA.apiKey)
    .set('Idempotency-Key', `rl-${++keys}`)
    .send({ pricingData: { amount: 1500, currency: 'USD', productData: { name: 'Mug' } } });
  expect(res.status).toBe(201);
  return new URL(res.body.data.url).pathname;
}

async function paymentLinkPath(ctx: TestContext): Promise<{ path: string; linkId: string }> {
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Poster' });
  const price = await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD' });
  const { link } = await ctx.services.catalog.createPaymentLink(price.id, {});
  return { path: new URL(ctx.services.catalog.paymentLinkUrl(link)).pathname, linkId: link.id };
}

const sessionsOfLink = async (ctx: TestContext, linkId: string) =>
  Number((await ctx.testDb.database.db('checkout_sessions').where({ payment_link_id: linkId }).count({ n: '*' }))[0]!.n);

function expectRateLimitedPage(res: { status: number; headers: Record<string, string>; text: string }, retryAfter: number) {
  expect(res.status).toBe(429);
  expect(res.headers['content-type']).toMatch(/^text\/html/);
  expect(res.headers['retry-after']).toBe(String(retryAfter));
  expect(res.headers['content-security-policy']).toContain("default-src 'none'");
  expect(res.text).toContain('Too many requests');
  expect(res.text).not.toMatch(/"success"|<script/);
}

describe('hosted pages without a trusted proxy', () => {
  it('limits page requests per client address per minute with a human 429 page and Retry-After', async () => {
    const page = await sessionPage(direct);
    nextMinute(direct);
    for (let i = 0; i < PAGE_LIMIT; i++) expect((await direct.merchant.get(page)).status).toBe(200);
    direct.clock.advance(15_000);
    const limited = await direct.merchant.get(page);
    expectRateLimitedPage(limited, 45);
    // The limit is the client's, across every hosted route, not one page's.
    expect((await direct.merchant.get(await sessionPage(direct))).status).toBe(429);
    expect((await direct.merchant.get('/subscriptions/manage/unknown-token')).status).toBe(429);
    // The merchant API has its own per-key limit: a hosted-page flood does not block it.
    expect((await direct.merchant.get('/v1/me').set('X-API-Key', direct.orgA.apiKey)).status).toBe(200);
    // The next window starts afresh.
    nextMinute(direct);
    expect((await direct.merchant.get(page)).status).toBe(200);
  });

  it('ignores X-Forwarded-For: a client cannot pick its own address', async () => {
    const page = await sessionPage(direct);
    nextMinute(direct);
    for (let i = 0; i < PAGE_LIMIT; i++) expect((await direct.merchant.get(page).set('X-Forwarded-For', `198.51.100.${i}`)).status).toBe(200);
    expect((await direct.merchant.get(page).set('X-Forwarded-For', '198.51.100.99')).status).toBe(429);
  });

  it('limits checkout openings from a payment link more tightly: no session is created past the limit', async () => {
    const { path, linkId } = await paymentLinkPath(direct);
    nextMinute(direct);
    for (let i = 0; i < WRITE_LIMIT; i++) expect((await direct.merchant.get(path)).status).toBe(303);
    const limited = await direct.merchant.get(path);
    expectRateLimitedPage(limited, 60);
    for (let i = 0; i < 5; i++) expect((await direct.merchant.get(path)).status).toBe(429);
    expect(await sessionsOfLink(direct, linkId)).toBe(WRITE_LIMIT);
  });

  it('counts card payment attempts, the crypto e-mail step and cancellations as writes', async () => {
    const page = await sessionPage(direct);
    nextMinute(direct);
    const attempt = () => direct.merchant.post(`${page}/pay`).type('form').send({ email: 'a@example.com', cardNumber: '4000000000000002', expiry: '12/30', cvc: '123' });
    for (let i = 0; i < WRITE_LIMIT; i++) expect((await attempt()).status).toBe(402);
    expectRateLimitedPage(await attempt(), 60);
    expect((await direct.merchant.post(`${page}/crypto-email`).type('form').send({ email: 'a@example.com' })).status).toBe(429);
    expect((await direct.merchant.post('/subscriptions/manage/unknown-token/cancel')).status).toBe(429);
    // Reading the page is not a write: it still has room under the page limit.
    expect((await direct.merchant.get(page)).status).toBe(200);
    const session = await direct.services.checkout.findByPageToken(page.split('/')[2]!);
    expect(session?.lastError?.code).toBe('card_declined');
  });
});

describe('hosted pages behind a trusted proxy (TRUST_PROXY=true)', () => {
  it('keys on the address the load balancer appended to X-Forwarded-For', async () => {
    const page = await sessionPage(proxied);
    nextMinute(proxied);
    for (let i = 0; i < PAGE_LIMIT; i++) expect((await proxied.merchant.get(page).set('X-Forwarded-For', '203.0.113.7')).status).toBe(200);
    expect((await proxied.merchant.get(page).set('X-Forwarded-For', '203.0.113.7')).status).toBe(429);
    // Another client behind the same load balancer has its own budget.
    expect((await proxied.merchant.get(page).set('X-Forwarded-For', '203.0.113.8')).status).toBe(200);
    // Entries the client wrote itself (left of the load balancer's) change nothing.
    expect((await proxied.merchant.get(page).set('X-Forwarded-For', '192.0.2.1, 203.0.113.7')).status).toBe(429);
    expect((await proxied.merchant.get(page).set('X-Forwarded-For', '192.0.2.2,203.0.113.7')).status).toBe(429);
  });

  it('counts an IPv6 client per /64 (a host picks any address in its prefix)', async () => {
    const page = await sessionPage(proxied);
    nextMinute(proxied);
    for (let i = 0; i < PAGE_LIMIT; i++) expect((await proxied.merchant.get(page).set('X-Forwarded-For', `2001:db8:1:2::${(i + 1).toString(16)}`)).status).toBe(200);
    expect((await proxied.merchant.get(page).set('X-Forwarded-For', '2001:db8:1:2:ffff:ffff:ffff:ffff')).status).toBe(429);
    expect((await proxied.merchant.get(page).set('X-Forwarded-For', '2001:db8:1:3::1')).status).toBe(200);
  });
});

describe('client address keys', () => {
  it('IPv4 as is, IPv4-mapped IPv6 as its IPv4 address, IPv6 by /64 prefix', () => {
    expect(clientAddressKey('203.0.113.7')).toBe('203.0.113.7');
    expect(clientAddressKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(clientAddressKey('2001:db8:1:2::1')).toBe(clientAddressKey('2001:0db8:0001:0002:ffff:0:0:1'));
    expect(clientAddressKey('2001:db8:1:2::1')).not.toBe(clientAddressKey('2001:db8:1:3::1'));
    expect(clientAddressKey(undefined)).toBe('unknown');
    expect(clientAddressKey('not an address')).toBe('unknown');
  });
});

describe('x402 paywall URLs', () => {
  it('are limited like the pages; a request carrying a payment (PAYMENT-SIGNATURE) counts as a write', async () => {
    nextMinute(direct);
    const path = '/x402/prices/PRC_000000000000000000000000';
    for (let i = 0; i < WRITE_LIMIT; i++) expect((await direct.merchant.get(path).set('PAYMENT-SIGNATURE', 'e30=')).status).toBe(404);
    expectRateLimitedPage(await direct.merchant.get(path).set('PAYMENT-SIGNATURE', 'e30='), 60);
    for (let i = WRITE_LIMIT + 1; i < PAGE_LIMIT; i++) expect((await direct.merchant.get(path)).status).toBe(404);
    expectRateLimitedPage(await direct.merchant.get(path), 60);
  });
});
