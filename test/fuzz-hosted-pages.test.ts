/**
 * Fuzzing the buyer-facing pages (fast-check) the way test/fuzz.test.ts fuzzes the APIs: every
 * hosted route, with real tokens (a card session, a crypto session, a paid subscription's manage
 * page, a payment link) and hostile ones, forms with repeated, unknown, oversized, nested and
 * control-character fields in several encodings, and hostile payment-link queries. Whatever is
 * sent, the answer is never a 5xx, always a human HTML page (or a redirect to one), and never
 * shows a stack trace or driver text. Runs on the embedded database, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 *
 * KASSA_HOSTED_FUZZ_RUNS (default 300) sets the number of requests; KASSA_FUZZ_SEED replays a run.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './harness/context.js';
import { HOSTILE_STRINGS, encodeURIComponentSafe, pathViolation } from './fuzz/schema-arbitrary.js';
import { listen, type Listener, type RawRequest, type RawResponse } from './fuzz/operations.js';
import { createLink, createPrice, createProduct } from './catalog/fixtures.js';

const RUNS = Number(process.env.KASSA_HOSTED_FUZZ_RUNS ?? 300);
const SEED = process.env.KASSA_FUZZ_SEED ? Number(process.env.KASSA_FUZZ_SEED) : undefined;
const CHAIN = 31337;

let ctx: TestContext;
let merchant: Listener;
const tokens = { page: [] as string[], manage: [] as string[], link: [] as string[] };
const tally = new Map<string, Map<number, number>>();

beforeAll(async () => {
  ctx = await createTestContext({
    env: {
      // Configured but never contacted: the crypto page needs a chain to quote on, not a node.
      CRYPTO_CHAINS: JSON.stringify([
        { chainId: CHAIN, name: 'Local', rpcUrl: 'http://127.0.0.1:9', confirmations: 2, explorerUrl: 'https://local.test', blockRange: 10, initialLookback: 0, tokens: { USDC: '0x5FbDB2315678afecb367f032d93F642f64180aa3' } },
      ]),
    },
  });
  merchant = await listen(ctx.apps.merchant);
  const create = async (body: object, key: string) => {
    const res = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', key).send(body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return new URL(res.body.data.url).pathname.split('/').pop()!;
  };
  for (const [i, extra] of [{}, { customerEmail: 'known@example.com', successUrl: 'https://shop.example/thanks' }, { quantity: 3 }].entries()) {
    tokens.page.push(await create({ pricingData: { amount: 1500, currency: 'USD', productData: { name: 'Fuzz card' } }, ...extra }, `hosted-fuzz-card-${i}`));
  }
  expect((await ctx.admin.put(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${CHAIN}`).send({ address: '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed' })).status).toBe(200);
  tokens.page.push(await create({ provider: 'CRYPTO', pricingData: { amount: 2_000_000, currency: 'USDC', productData: { name: 'Fuzz crypto' } } }, 'hosted-fuzz-crypto'));
  const monthly = { pricingData: { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', productData: { name: 'Fuzz plan' } } };
  const subscribed = await create(monthly, 'hosted-fuzz-sub');
  const paid = await ctx.merchant.post(`/checkout/${subscribed}/pay`).type('form').send({ email: 'fuzz@example.com', cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  tokens.page.push(subscribed);
  tokens.manage.push((await ctx.testDb.database.db('subscriptions').first('manage_token')).manage_token);
  const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Fuzz link product' });
  const price = await createPrice(ctx, product.productId, { amount: 700, currency: 'EUR' });
  tokens.link.push(new URL((await createLink(ctx, price.pricingId)).paymentLinkUrl).pathname.split('/').pop()!);
}, 120_000);

afterAll(async () => {
  await merchant?.close();
  await ctx?.close();
  if (tally.size > 0) {
    const lines = [...tally].map(([route, counts]) => `${route.padEnd(40)} ${[...counts].sort(([a], [b]) => a - b).map(([s, n]) => `${s}×${n}`).join(' ')}`);
    console.log(`hosted-page fuzz: statuses per route (${RUNS} requests)\n${lines.join('\n')}`);
  }
});

type Kind = 'page' | 'manage' | 'link';
interface Route {
  method: 'GET' | 'POST' | 'HEAD' | 'PUT' | 'DELETE';
  pattern: string;
  kind: Kind;
  form: boolean;
  /** How often it is drawn: the pages that write (pay, e-mail, cancel) more than the rest. */
  weight: number;
}

const ROUTES: Route[] = [
  { method: 'GET', pattern: '/checkout/{token}', kind: 'page', form: false, weight: 1 },
  { method: 'HEAD', pattern: '/checkout/{token}', kind: 'page', form: false, weight: 1 },
  { method: 'GET', pattern: '/checkout/{token}/complete', kind: 'page', form: false, weight: 1 },
  { method: 'POST', pattern: '/checkout/{token}/pay', kind: 'page', form: true, weight: 5 },
  { method: 'POST', pattern: '/checkout/{token}/crypto-email', kind: 'page', form: true, weight: 2 },
  { method: 'GET', pattern: '/pay/{token}', kind: 'link', form: false, weight: 2 },
  { method: 'GET', pattern: '/subscriptions/manage/{token}', kind: 'manage', form: false, weight: 1 },
  { method: 'POST', pattern: '/subscriptions/manage/{token}/cancel', kind: 'manage', form: true, weight: 2 },
  // Paths under the hosted prefixes that are no page, and methods no page takes.
  { method: 'GET', pattern: '/checkout/{token}/pay', kind: 'page', form: false, weight: 1 },
  { method: 'PUT', pattern: '/checkout/{token}', kind: 'page', form: true, weight: 1 },
  { method: 'DELETE', pattern: '/subscriptions/manage/{token}', kind: 'manage', form: false, weight: 1 },
  { method: 'GET', pattern: '/pay/{token}/extra', kind: 'link', form: false, weight: 1 },
];

const FIELD_NAMES = ['email', 'cardNumber', 'expiry', 'cvc', 'name', 'cardNumber[]', 'cvc[a]', '__proto__', 'constructor', ''];
const text = fc.oneof(
  fc.constantFrom('buyer@example.com', '4242 4242 4242 4242', '4000000000000002', '4000000000000077', '12/30', '01/99', '13/20', '123', '1234', ''),
  fc.constantFrom(...HOSTILE_STRINGS.filter((s) => s.length < 1_000)),
  fc.string({ unit: 'binary', maxLength: 40 }),
);

const encodePairs = (pairs: Array<[string, string]>) => pairs.map(([k, v]) => `${encodeURIComponentSafe(k)}=${encodeURIComponentSafe(v)}`).join('&');

/** The card form as a browser sends it, with generated values and now and then a field twice. */
const cardForm = fc
  .record({
    email: fc.oneof({ weight: 3, arbitrary: fc.constant('buyer@example.com') }, text),
    cardNumber: fc.oneof({ weight: 3, arbitrary: fc.constantFrom('4242424242424242', '4000000000000002', '4000000000000077') }, text),
    expiry: fc.oneof({ weight: 3, arbitrary: fc.constant('12/30') }, text),
    cvc: fc.oneof({ weight: 3, arbitrary: fc.constant('123') }, text),
    again: fc.option(fc.tuple(fc.constantFrom('email', 'cardNumber', 'expiry', 'cvc'), text)),
  })
  .map(({ again, ...fields }) => encodePairs([...Object.entries(fields), ...(again ? [again] : [])]));

/** A raw form body: the card form, encoded pairs (repeated names included), or bytes no encoder would make. */
const formBody = fc.oneof(
  { weight: 6, arbitrary: cardForm },
  { weight: 4, arbitrary: fc.array(fc.tuple(fc.oneof(fc.constantFrom(...FIELD_NAMES), fc.string({ maxLength: 12 })), text), { maxLength: 14 }).map(encodePairs) },
  { weight: 1, arbitrary: fc.constantFrom('%', '%zz=1', 'a=%E0%A4%A', '&&&', '=', 'a', 'a=1&a=2&a=3', 'email=a%00b%40c.de', 'x'.repeat(9_000), `${'a=1&'.repeat(200)}b=2`) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
);

const contentType = fc.oneof(
  { weight: 8, arbitrary: fc.constant('application/x-www-form-urlencoded') },
  fc.constantFrom(
  'application/x-www-form-urlencoded; charset=utf-8',
  'application/x-www-form-urlencoded; charset=iso-8859-1',
  'application/x-www-form-urlencoded; charset=koi8-r',
  'application/json',
  'text/plain',
  'multipart/form-data; boundary=x',
  undefined,
  ),
);

const queryPairs = fc.array(fc.tuple(fc.oneof(fc.constantFrom('merchant_reference', 'merchantReference', 'ref', 'a[b]', 'a[]', ''), fc.string({ maxLength: 45 })), text), { maxLength: 4 });

function tokenArbitrary(kind: Kind): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...tokens[kind]).map(encodeURIComponentSafe) },
    { weight: 2, arbitrary: pathViolation },
    { weight: 1, arbitrary: fc.constantFrom(...tokens[kind]).map((t) => `${t}%00`) },
    { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9_-]{1,80}$/) },
  );
}

const requestArbitrary = (): fc.Arbitrary<{ route: Route; request: RawRequest }> =>
  fc.oneof(...ROUTES.map((route) => ({ weight: route.weight, arbitrary: fc.constant(route) }))).chain((route) =>
    fc.record({ token: tokenArbitrary(route.kind), query: queryPairs, body: formBody, type: contentType, accept: fc.constantFrom('text/html', '*/*', 'application/json', undefined) }).map((g) => {
      let path = route.pattern.replace('{token}', g.token);
      if (g.query.length > 0) path += `?${encodePairs(g.query)}`;
      const headers: Record<string, string> = {};
      if (g.accept) headers.Accept = g.accept;
      const request: RawRequest = { method: route.method, path, headers };
      if (route.form) {
        request.body = g.body;
        if (g.type) headers['Content-Type'] = g.type;
      }
      return { route, request };
    }),
  );

function check(route: Route, request: RawRequest, response: RawResponse): void {
  const label = `${route.method} ${route.pattern}`;
  const counts = tally.get(label) ?? new Map<number, number>();
  counts.set(response.status, (counts.get(response.status) ?? 0) + 1);
  tally.set(label, counts);
  const shown = `${request.method} ${request.path.slice(0, 300)} type=${request.headers?.['Content-Type']} body=${(request.body ?? '').slice(0, 300)}\n→ ${response.status} ${response.text.slice(0, 400)}`;
  expect(response.status, shown).toBeLessThan(500);
  if (response.status >= 300 && response.status < 400) {
    // Only where a page sends the buyer: another hosted page, or the merchant's return URL.
    expect(response.headers.location, shown).toMatch(/^\/(checkout|subscriptions\/manage)\/[A-Za-z0-9]+(\/complete)?$|^https:\/\//);
    return;
  }
  expect(response.headers['content-type'], shown).toMatch(/^text\/html/);
  expect(response.headers['content-security-policy'], shown).toContain("default-src 'none'");
  if (request.method !== 'HEAD') expect(response.text, shown).toMatch(/^<!doctype html>/);
  expect(response.text, shown).not.toMatch(/\bat [\w.<>]+ \(|node_modules|Error:|relation "|syntax error at or near|\bknex\b|\bpglite\b|invalid byte sequence/i);
}

describe('fuzzing the hosted pages', () => {
  it('answers every request with a human page or a redirect, never a 5xx or a stack trace', async () => {
    await fc.assert(
      fc.asyncProperty(requestArbitrary(), async ({ route, request }) => {
        // Sessions expire and rate windows move on as the run goes.
        ctx.clock.advance(1_000);
        check(route, request, await merchant.send(request));
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
  }, 120_000);
});
