/**
 * Exact crypto amounts held by anonymous buyers (sessions opened from a payment link): short
 * (CRYPTO_LINK_PAYMENT_WINDOW_SECONDS, then CRYPTO_LINK_LATE_PAYMENT_WINDOW_SECONDS) and bounded
 * (CRYPTO_LINK_HOLD_LIMIT per price and wallet), so anonymous visits cannot lock a price for the
 * merchant's own API sessions; when no amount is free the page says "try again shortly" (503).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createLink, createPrice, createProduct } from '../catalog/fixtures.js';

const CHAIN = 31337;
const USDC = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const WALLET = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';
const RANGE = 4;

let ctx: TestContext;
let key = 0;

beforeAll(async () => {
  ctx = await createTestContext({
    env: {
      CRYPTO_CHAINS: JSON.stringify([{ chainId: CHAIN, name: 'Local', rpcUrl: 'http://127.0.0.1:9', confirmations: 1, explorerUrl: 'https://x.test', blockRange: 10, initialLookback: 0, tokens: { USDC } }]),
      CRYPTO_AMOUNT_OFFSET_RANGE: String(RANGE),
      // Left at their defaults: CRYPTO_LINK_PAYMENT_WINDOW_SECONDS 900, CRYPTO_LINK_LATE_PAYMENT_WINDOW_SECONDS 3600,
      // CRYPTO_LINK_HOLD_LIMIT half the range (2), CRYPTO_LATE_PAYMENT_WINDOW_SECONDS 86400.
    },
  });
  await ctx.admin.put(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${CHAIN}`).send({ address: WALLET }).expect(200);
});
afterAll(async () => {
  await ctx?.close();
});

const apiCreate = (amount: number) =>
  ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', ctx.orgA.apiKey)
    .set('Idempotency-Key', `hold-${++key}`)
    .send({ provider: 'CRYPTO', pricingData: { amount, currency: 'USDC', productData: { name: 'Ticket' } }, customerEmail: 'merchant-buyer@example.com' });

async function cryptoLink(amount: number): Promise<string> {
  const product = await createProduct(ctx, ctx.orgA.orgId, { name: `Ticket ${amount}` });
  const price = await createPrice(ctx, product.productId, { amount, currency: 'USDC', provider: 'CRYPTO' });
  return new URL((await createLink(ctx, price.pricingId)).paymentLinkUrl).pathname;
}

/** An anonymous visitor: opens the link, then gives an e-mail on the page. */
async function anonymousVisit(linkPath: string, email = 'visitor@example.com') {
  const opened = await ctx.merchant.get(linkPath);
  expect(opened.status).toBe(303);
  const pagePath = opened.headers.location as string;
  const asked = await ctx.merchant.get(pagePath);
  expect(asked.status).toBe(200);
  expect(asked.text).toContain('/crypto-email"');
  const submitted = await ctx.merchant.post(`${pagePath}/crypto-email`).type('form').send({ email });
  return { pagePath, submitted, sessionId: (await ctx.services.checkout.findByPageToken(pagePath.split('/')[2]!))!.id };
}

const readSession = async (id: string) => (await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;

function expectTryAgainPage(res: { status: number; headers: Record<string, string>; text: string }) {
  expect(res.status).toBe(503);
  expect(res.headers['content-type']).toMatch(/^text\/html/);
  expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  expect(res.text).toMatch(/Try again (shortly|later)/);
  expect(res.text).not.toContain('Something went wrong');
}

describe('anonymous holds of exact crypto amounts', () => {
  it('a link visit holds no amount until the buyer gives an e-mail', async () => {
    const link = await cryptoLink(3_000_000);
    const opened = await ctx.merchant.get(link);
    const session = (await ctx.services.checkout.findByPageToken((opened.headers.location as string).split('/')[2]!))!;
    expect((await readSession(session.id)).crypto.amountUnits).toBeNull();
    expect(await ctx.testDb.database.db('crypto_amount_reservations').where({ checkout_session_id: session.id }).first()).toBeUndefined();
  });

  it('many anonymous visits do not lock the price: the merchant API still gets exact amounts', async () => {
    const link = await cryptoLink(5_000_000);
    const visits = [];
    for (let i = 0; i < 3 * RANGE; i++) visits.push(await anonymousVisit(link, `visitor-${i}@example.com`));
    const held = visits.filter((v) => v.submitted.status === 303);
    const refused = visits.filter((v) => v.submitted.status !== 303);
    // Half the range (CRYPTO_LINK_HOLD_LIMIT's default) at most goes to anonymous buyers …
    expect(held).toHaveLength(RANGE / 2);
    for (const v of refused) {
      expectTryAgainPage(v.submitted);
      // Retry-After: when the first anonymous hold ends (15 min + the 1-hour late window from now).
      expect(v.submitted.headers['retry-after']).toBe(String(900 + 3600));
      expect(v.submitted.text).toContain('Try again later');
      expect(v.submitted.text).toContain('about 75 minutes');
      // … and a refused e-mail step stores nothing: no e-mail, no amount.
      expect(await readSession(v.sessionId)).toMatchObject({ customerEmail: null, crypto: { amountUnits: null } });
    }
    for (const v of held) expect((await ctx.merchant.get(v.pagePath)).text).toContain('data-testid="instructions"');
    // … and the rest stays for the merchant's own checkouts.
    const api = await Promise.all(Array.from({ length: RANGE / 2 }, () => apiCreate(5_000_000)));
    expect(api.map((r) => r.status)).toEqual(Array(RANGE / 2).fill(201));
    expect(api.map((r) => r.body.data.crypto.amountUnits).sort()).toEqual(['5000002', '5000003']);
  });

  it('holds an anonymous amount 15 minutes plus a 1-hour late window, not the session hour plus a day', async () => {
    const link = await cryptoLink(6_000_000);
    const openedAt = ctx.clock.now().getTime();
    ctx.clock.advance(5 * 60_000); // the visitor reads the page for five minutes
    const first = await anonymousVisit(link);
    expect(first.submitted.status).toBe(303);
    const emailAt = ctx.clock.now().getTime();
    const session = await readSession(first.sessionId);
    // The payment window runs from the e-mail step, and only ever gets shorter.
    expect(Date.parse(session.expiresAt)).toBe(emailAt + 900_000);
    expect(Date.parse(session.expiresAt)).toBeLessThan(openedAt + 3_600_000);
    const reservation = await ctx.testDb.database.db('crypto_amount_reservations').where({ checkout_session_id: first.sessionId }).first();
    expect(new Date(reservation.reserved_until).getTime()).toBe(emailAt + (900 + 3600) * 1000);
    expect((await ctx.merchant.get(first.pagePath)).text).toContain('before ' + new Date(emailAt + 900_000).toISOString().replace('T', ' ').slice(0, 16) + ' UTC');

    const second = await anonymousVisit(link);
    expect(second.submitted.status).toBe(303);
    expectTryAgainPage((await anonymousVisit(link)).submitted);
    // Past the window and the late window the anonymous amounts are free again.
    ctx.clock.set(emailAt + (900 + 3600) * 1000 + 1000);
    expect(await readSession(first.sessionId)).toMatchObject({ status: 'EXPIRED' });
    const later = await anonymousVisit(link);
    expect(later.submitted.status).toBe(303);
    expect((await readSession(later.sessionId)).crypto.amountUnits).toBe('6000000');
  });

  it('renders "try again shortly" with 503 and Retry-After, never a 500, when no exact amount is free', async () => {
    const link = await cryptoLink(7_000_000);
    // The merchant's own checkouts hold every amount of the range.
    for (let i = 0; i < RANGE; i++) expect((await apiCreate(7_000_000)).status).toBe(201);
    expect((await apiCreate(7_000_000)).status).toBe(503);
    const visit = await anonymousVisit(link);
    expectTryAgainPage(visit.submitted);
    expect(visit.submitted.headers['retry-after']).toBe('60');
    expect(visit.submitted.text).toContain('Try again shortly');
    expect(visit.submitted.text).toContain('60 seconds');
    expect(await readSession(visit.sessionId)).toMatchObject({ customerEmail: null, crypto: { amountUnits: null } });
  });

  it('bounds concurrent anonymous e-mail steps exactly (PostgreSQL: they race for the last anonymous slot)', async () => {
    const rounds = ctx.testDb.kind === 'postgres' ? 25 : 3;
    for (let round = 0; round < rounds; round++) {
      const link = await cryptoLink(10_000_000 + round * 1000);
      const pages: string[] = [];
      for (let i = 0; i < 6; i++) pages.push((await ctx.merchant.get(link)).headers.location as string);
      const results = await Promise.all(pages.map((p, i) => ctx.merchant.post(`${p}/crypto-email`).type('form').send({ email: `racer-${i}@example.com` })));
      expect(results.filter((r) => r.status === 303), `round ${round}`).toHaveLength(RANGE / 2);
      expect(results.filter((r) => r.status === 503), `round ${round}`).toHaveLength(6 - RANGE / 2);
    }
  });
});
