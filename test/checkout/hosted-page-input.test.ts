/**
 * Malformed input on the hosted pages (checkout, crypto checkout, payment links, the subscription
 * manage page) answers a 4xx human page, never a 500 or a JSON body, and stores nothing: tokens
 * PostgreSQL cannot hold (NUL) or that no token can be (too long, outside base64url, undecodable),
 * repeated form fields, too many fields, control characters in fields and in a payment link's query.
 * Run on PostgreSQL too (TEST_DATABASE_URL): PGlite and PostgreSQL refuse NUL differently.
 */
import express, { Router } from 'express';
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { guardHostedPages, hostedPageFallbacks } from '../../src/pages/guard.js';
import { AppError } from '../../src/kernel/errors.js';
import { createLogger } from '../../src/kernel/logger.js';
import { createLink, createPrice, createProduct } from '../catalog/fixtures.js';

let ctx: TestContext;
let priceId: string;
let linkToken: string;
let keys = 0;

beforeAll(async () => {
  ctx = await createTestContext();
  const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Ebook' });
  const price = await createPrice(ctx, product.productId, { amount: 1200, currency: 'USD' });
  priceId = price.pricingId;
  const link = await createLink(ctx, priceId);
  linkToken = new URL(link.paymentLinkUrl).pathname.split('/').pop()!;
});
afterAll(async () => {
  await ctx?.close();
});

async function newSession(): Promise<{ id: string; path: string }> {
  const res = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `input-${++keys}`).send({ pricingId: priceId });
  expect(res.status).toBe(201);
  return { id: res.body.data.id, path: new URL(res.body.data.url).pathname };
}

const counts = async () => {
  const db = ctx.testDb.database.db;
  const [sessions, orders, customers] = await Promise.all(
    ['checkout_sessions', 'orders', 'customers'].map(async (table) => Number((await db(table).count<{ count: number }[]>({ count: '*' }).first())?.count)),
  );
  return { sessions, orders, customers };
};

/** A human page: HTML with the hosted pages' headers, the expected status, no stack trace or JSON. */
function expectHumanPage(res: { status: number; text: string; headers: Record<string, string> }, status: number | number[], shown: string): void {
  expect([status].flat(), `${shown} → ${res.status} ${res.text.slice(0, 300)}`).toContain(res.status);
  expect(res.headers['content-type'], shown).toMatch(/^text\/html/);
  expect(res.headers['content-security-policy'], shown).toContain("default-src 'none'");
  expect(res.text, shown).toMatch(/^<!doctype html>/);
  expect(res.text, shown).not.toMatch(/\bat [\w.<>]+ \(|node_modules|Error:/);
}

const form = (fields: Array<[string, string]>) => fields.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
const CARD: Array<[string, string]> = [['email', 'buyer@example.com'], ['cardNumber', '4242 4242 4242 4242'], ['expiry', '12/30'], ['cvc', '123']];

describe('hosted page tokens', () => {
  const bad = ['%00', 'abc%00def', `${'A'.repeat(200)}`, 'a%20b', '%C3%A9t%C3%A9', '%E0%A4%A', '%ZZ', 'a%2Fb', '..%2F..'];
  const routes = (token: string): Array<[string, string]> => [
    ['GET', `/checkout/${token}`],
    ['GET', `/checkout/${token}/complete`],
    ['POST', `/checkout/${token}/pay`],
    ['POST', `/checkout/${token}/crypto-email`],
    ['GET', `/pay/${token}`],
    ['GET', `/subscriptions/manage/${token}`],
    ['POST', `/subscriptions/manage/${token}/cancel`],
  ];

  it('answers 404 with a human page for a token no page can have (NUL, too long, not base64url, undecodable)', async () => {
    const before = await counts();
    for (const token of bad) {
      for (const [method, path] of routes(token)) {
        const req = method === 'GET' ? ctx.merchant.get(path) : ctx.merchant.post(path).type('form').send(form(CARD));
        expectHumanPage(await req, 404, `${method} ${path}`);
      }
    }
    expect(await counts()).toEqual(before);
  });

  it('answers 404 with a human page for a path under a hosted prefix that is no page', async () => {
    const { path } = await newSession();
    for (const [method, target] of [['GET', `${path}/nope`], ['GET', `${path}/pay`], ['GET', '/subscriptions/manage/abc/cancel'], ['DELETE', path], ['GET', '/pay/abc/def']] as const) {
      expectHumanPage(await ctx.merchant[method === 'GET' ? 'get' : 'delete'](target), 404, `${method} ${target}`);
    }
  });
});

describe('the card form', () => {
  it('refuses a repeated field with 400 naming it, and pays nothing', async () => {
    for (const field of ['cardNumber', 'cvc', 'email', 'expiry']) {
      const { id, path } = await newSession();
      const before = await counts();
      const fields: Array<[string, string]> = [...CARD, [field, field === 'cardNumber' ? '4000000000000002' : 'x']];
      const res = await ctx.merchant.post(`${path}/pay`).type('form').send(form(fields));
      expectHumanPage(res, 400, `${field} twice`);
      expect(res.text).toContain(field);
      expect(await counts()).toEqual(before);
      const session = (await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
      expect(session.status).toBe('CREATED');
      // The buyer can still pay with a corrected form.
      expect((await ctx.merchant.post(`${path}/pay`).type('form').send(form(CARD))).status).toBe(303);
    }
  });

  it('refuses a form with too many fields with 413, and a body over the limit with 413', async () => {
    const { path } = await newSession();
    const before = await counts();
    const eleven: Array<[string, string]> = [...CARD, ...Array.from({ length: 7 }, (_, i): [string, string] => [`f${i}`, 'x'])];
    expectHumanPage(await ctx.merchant.post(`${path}/pay`).type('form').send(form(eleven)), 413, '11 fields');
    expectHumanPage(await ctx.merchant.post(`${path}/pay`).type('form').send(form([...CARD, ['note', 'x'.repeat(20_000)]])), 413, 'large body');
    expect(await counts()).toEqual(before);
  });

  it('refuses control characters (NUL) in a field with 400, storing nothing', async () => {
    const { id, path } = await newSession();
    const before = await counts();
    const res = await ctx.merchant.post(`${path}/pay`).type('form').send(form([['email', 'bu\u0000yer@example.com'], ...CARD.slice(1)]));
    expectHumanPage(res, 400, 'NUL in email');
    expect(res.text).toContain('email');
    expect(await counts()).toEqual(before);
    const row = await ctx.testDb.database.db('checkout_sessions').where({ id }).first();
    expect(row.status).toBe('CREATED');
    expect(row.customer_email).toBeNull();
  });

  it('refuses a charset it cannot read with 415, and nested field names are plain names', async () => {
    const { path } = await newSession();
    const res = await ctx.merchant.post(`${path}/pay`).set('Content-Type', 'application/x-www-form-urlencoded; charset=koi8-r').send(form(CARD));
    expectHumanPage(res, 415, 'koi8-r');
    const nested = await ctx.merchant.post(`${path}/pay`).type('form').send('cardNumber[a]=4242424242424242&expiry=12/30&cvc=123&email=a@b.co');
    expectHumanPage(nested, [400, 402], 'nested name');
  });
});

describe('payment links', () => {
  it('refuse control characters in the query with 400, creating no session', async () => {
    const before = await counts();
    for (const query of ['ref=%00', 'ref=a%00b', '%00=x', 'merchant_reference=%01']) {
      expectHumanPage(await ctx.merchant.get(`/pay/${linkToken}?${query}`), 400, query);
    }
    expect(await counts()).toEqual(before);
    expect((await ctx.merchant.get(`/pay/${linkToken}?ref=ok`)).status).toBe(303);
  });
});

describe('the hosted pages\' error page', () => {
  it('keeps the status and headers of an application refusal (a rate limit), and shows a failure of ours as a logged 500 page', async () => {
    const logged: string[] = [];
    const router = Router();
    guardHostedPages(router);
    router.get('/checkout/:token', (_req, _res, next) => next(new AppError('RATE_LIMITED', 'Too many attempts on this checkout', { headers: { 'Retry-After': '7' } })));
    router.get('/checkout/:token/complete', () => {
      throw new Error('boom at the database');
    });
    hostedPageFallbacks(router, createLogger({ level: 'info', destination: { write: (line) => void logged.push(line) } }));
    const app = express().use(router);
    const limited = await supertest(app).get('/checkout/abc');
    expectHumanPage(limited, 429, 'rate limited');
    expect(limited.headers['retry-after']).toBe('7');
    expect(limited.text).toContain('Too many attempts on this checkout');
    const failed = await supertest(app).get('/checkout/abc/complete');
    expectHumanPage(failed, 500, 'thrown');
    expect(failed.text).not.toContain('boom');
    expect(logged.join('')).toContain('boom at the database');
  });
});
