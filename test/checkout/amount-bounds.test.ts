/**
 * What one payment may amount to on each rail (card 1-99999999 minor units, crypto
 * 1-999999999999), at both edges: checkout creation (unit amount × quantity), catalog prices,
 * payment links and prices stored before the bounds; and that every accepted amount is exact as
 * the orders' display `amount`.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createLink, createPrice, createProduct } from '../catalog/fixtures.js';
import { AMOUNT_BOUNDS } from '../../src/catalog/price-rules.js';
import { decimalsOf, toDisplayAmount } from '../../src/kernel/money.js';

const CARD_MAX = 99_999_999;
const CRYPTO_MAX = 999_999_999_999;
const CHAIN = 31337;
const WALLET = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({
    env: {
      CRYPTO_CHAINS: JSON.stringify([
        { chainId: CHAIN, name: 'Local', rpcUrl: 'http://127.0.0.1:9', confirmations: 2, explorerUrl: 'https://a.test', blockRange: 10, initialLookback: 0, tokens: { USDC: '0x5FbDB2315678afecb367f032d93F642f64180aa3', USDT: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512' } },
      ]),
    },
  });
  expect((await ctx.admin.put(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${CHAIN}`).send({ address: WALLET })).status).toBe(200);
});
afterAll(async () => {
  await ctx?.close();
});

/** `amount / 10^decimals` written exactly, as a JSON number would spell it (no trailing zeros). */
function exactDecimal(minorUnits: number, decimals: number): string {
  const digits = BigInt(minorUnits).toString().padStart(decimals + 1, '0');
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole;
}

describe('display amounts', () => {
  const currencies = { STRIPE: ['USD', 'JPY', 'KWD', 'EUR'], CRYPTO: ['USDC', 'USDT'] } as const;

  it('the bounds are the documented ones', () => {
    expect(AMOUNT_BOUNDS).toEqual({ STRIPE: { min: 1, max: CARD_MAX }, CRYPTO: { min: 1, max: CRYPTO_MAX } });
  });

  it.each(Object.entries(currencies).flatMap(([rail, list]) => list.map((currency) => [rail as 'STRIPE' | 'CRYPTO', currency] as const)))(
    '%s %s: every amount within the bounds is exact as a JSON number, at both edges and in between',
    (rail, currency) => {
      const { min, max } = AMOUNT_BOUNDS[rail];
      const decimals = decimalsOf(currency);
      const exact = (amount: number) => JSON.stringify(toDisplayAmount(amount, currency)) === exactDecimal(amount, decimals);
      for (const amount of [min, min + 1, max - 1, max]) expect(exact(amount), `${amount} ${currency}`).toBe(true);
      fc.assert(fc.property(fc.integer({ min, max }), exact), { numRuns: 20_000 });
    },
  );

  it('(the old ceiling, 2^53 - 1 cents, was not: the display amount lost a cent)', () => {
    expect(JSON.stringify(toDisplayAmount(Number.MAX_SAFE_INTEGER, 'USD'))).not.toBe(exactDecimal(Number.MAX_SAFE_INTEGER, 2));
  });
});

let keys = 0;
const create = (body: Record<string, unknown>) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `amount-${++keys}`).send(body);
const card = (amount: number, currency = 'USD', extra: Record<string, unknown> = {}) => ({ pricingData: { amount, currency, productData: { name: 'Edge' } }, ...extra });
const crypto = (amount: number, extra: Record<string, unknown> = {}) => ({
  provider: 'CRYPTO',
  pricingData: { amount, currency: 'USDC', productData: { name: 'Edge' } },
  customerEmail: 'buyer@example.com',
  ...extra,
});
const countSessions = async () => Number((await ctx.testDb.database.db('checkout_sessions').count<{ count: number }[]>({ count: '*' }).first())?.count);

async function expectRefused(body: Record<string, unknown>, message: RegExp) {
  const before = await countSessions();
  const res = await create(body);
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  expect(res.body.error.code).toBe('VALIDATION_ERROR');
  expect(res.body.error.message).toMatch(message);
  expect(await countSessions()).toBe(before);
}

describe('checkout sessions: card rail', () => {
  it.each([
    ['0', card(0), /pricingData\.amount must be >= 1/],
    ['2^53 - 1 (the issue)', card(Number.MAX_SAFE_INTEGER), /pricingData\.amount must be <= 999999999999/],
    ['the maximum + 1', card(CARD_MAX + 1), /body\.pricingData\.amount is 100000000 minor units; card checkout takes 1 to 99999999 \(\$0\.01 to \$999,999\.99\)/],
    ['the maximum + 1 in JPY', card(CARD_MAX + 1, 'JPY'), /card checkout takes 1 to 99999999 \(¥1 to ¥99,999,999\)/],
    ['a total over the maximum (unit × quantity)', card(50_000_000, 'USD', { quantity: 2 }), /body\.pricingData\.amount × body\.quantity is 100000000 minor units; card checkout takes 1 to 99999999/],
    ['a total past 2^53 (unit × quantity)', card(999_999_999, 'USD', { quantity: 999_999 }), /body\.pricingData\.amount × body\.quantity is \d+ minor units; card checkout/],
  ])('refuses %s with 400, creating nothing', async (_label, body, message) => {
    await expectRefused(body, message);
  });

  const pagePath = (url: string) => new URL(url).pathname;
  const pay = (url: string) =>
    ctx.merchant.post(`${pagePath(url)}/pay`).type('form').send({ cardNumber: '4242 4242 4242 4242', expiry: '12/30', cvc: '123', email: 'edge@example.com' });

  it.each([
    ['1 cent', card(1), 1, '0.01'],
    ['the maximum, 999,999.99 USD', card(CARD_MAX), CARD_MAX, '999999.99'],
    ['the maximum as a total (33333333 × 3)', card(33_333_333, 'USD', { quantity: 3 }), CARD_MAX, '999999.99'],
    ['the maximum in JPY (zero-decimal)', card(CARD_MAX, 'JPY'), CARD_MAX, '99999999'],
    ['the maximum in KWD (three decimals)', card(CARD_MAX, 'KWD'), CARD_MAX, '99999.999'],
  ])('takes %s, pays it in the sandbox, and the order shows the exact display amount', async (_label, body, amountCents, display) => {
    const res = await create(body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.amount).toBe(amountCents);
    const paid = await pay(res.body.data.url);
    expect(paid.status).toBe(303); // to the page showing the result
    const session = (await ctx.merchant.get(`/v1/checkout-sessions/${res.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(session.orderStatus).toBe('PAID');
    const order = await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(order.body.data.amountCents).toBe(amountCents);
    // The wire text itself, not a parsed number that could hide a rounding.
    expect(order.text).toContain(`"amount":${display},`);
  });
});

describe('checkout sessions: crypto rail', () => {
  it.each([
    ['0', crypto(0), /pricingData\.amount must be >= 1/],
    ['the maximum + 1', crypto(CRYPTO_MAX + 1), /pricingData\.amount must be <= 999999999999/],
    ['a total over the maximum (unit × quantity)', crypto(500_000_000_000, { quantity: 2 }), /body\.pricingData\.amount × body\.quantity is 1000000000000 minor units; crypto checkout takes 1 to 999999999999 \(0\.000001 USDC to 999,999\.999999 USDC\)/],
  ])('refuses %s with 400, creating nothing', async (_label, body, message) => {
    await expectRefused(body, message);
  });

  it.each([
    ['1 unit (0.000001 USDC)', 1],
    ['a card-rail total above the card maximum', CARD_MAX + 1],
    ['the maximum, 999,999.999999 USDC', CRYPTO_MAX],
  ])('takes %s', async (_label, amount) => {
    const res = await create(crypto(amount));
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.amount).toBe(amount);
    expect(BigInt(res.body.data.crypto.amountUnits)).toBeGreaterThanOrEqual(BigInt(amount));
  });
});

describe('catalog prices (admin API)', () => {
  let productId: string;
  beforeAll(async () => {
    productId = (await createProduct(ctx, ctx.orgA.orgId, { name: 'Bounded' })).productId;
  });
  const post = (body: Record<string, unknown>) => ctx.admin.post(`/v1/products/${productId}/prices`).send(body);

  it.each([
    ['card 1', { amount: 1, currency: 'USD' }],
    ['card maximum', { amount: CARD_MAX, currency: 'USD' }],
    ['card maximum in JPY', { amount: CARD_MAX, currency: 'JPY' }],
    ['crypto 1', { amount: 1, currency: 'USDC', provider: 'CRYPTO' }],
    ['crypto maximum', { amount: CRYPTO_MAX, currency: 'USDT', provider: 'CRYPTO' }],
    ['flexible bounds at the card edges', { amount: 1500, currency: 'USD', flexibleAmount: true, minAmount: 1, maxAmount: CARD_MAX }],
  ])('creates %s', async (_label, body) => {
    const res = await post(body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.amount).toBe(body.amount);
  });

  it.each([
    ['card 0', { amount: 0, currency: 'USD' }, 'amount', /amount must be >= 1/],
    ['card maximum + 1', { amount: CARD_MAX + 1, currency: 'USD' }, 'amount', /amount is 100000000 minor units; card checkout takes 1 to 99999999/],
    ['crypto 0', { amount: 0, currency: 'USDC', provider: 'CRYPTO' }, 'amount', /amount must be >= 1/],
    ['crypto maximum + 1', { amount: CRYPTO_MAX + 1, currency: 'USDC', provider: 'CRYPTO' }, 'amount', /amount must be <= 999999999999/],
    ['2^53 - 1', { amount: Number.MAX_SAFE_INTEGER, currency: 'JPY' }, 'amount', /amount must be <= 999999999999/],
    ['a flexible price with suggested amount 0', { amount: 0, currency: 'USD', flexibleAmount: true }, 'amount', /amount must be >= 1/],
    ['a flexible minAmount of 0', { amount: 1500, currency: 'USD', flexibleAmount: true, minAmount: 0 }, 'minAmount', /minAmount must be >= 1/],
    ['a flexible maxAmount past the card maximum', { amount: 1500, currency: 'USD', flexibleAmount: true, maxAmount: CARD_MAX + 1 }, 'maxAmount', /maxAmount is 100000000 minor units; card checkout/],
  ])('refuses %s with 400 naming the field', async (_label, body, field, message) => {
    const res = await post(body);
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.message).toContain(field);
    expect(res.body.error.message).toMatch(message);
  });
});

describe('prices stored before the bounds (an earlier release allowed 0 to 2^53 - 1)', () => {
  it.each([
    ['0', 0],
    ['2^53 - 1', Number.MAX_SAFE_INTEGER],
  ])('a card price of %s is never charged: not by pricingId, not by a new or an existing payment link', async (_label, stored) => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: `Legacy ${stored}` });
    const price = await createPrice(ctx, product.productId, { amount: 1500, currency: 'USD' });
    const link = await createLink(ctx, price.pricingId);
    // What an earlier release could store (prices are immutable through the API).
    await ctx.testDb.database.db('prices').where({ id: price.pricingId }).update({ amount: stored });

    await expectRefused({ pricingId: price.pricingId }, new RegExp(`The amount of body\\.pricingId ${price.pricingId} is ${stored} minor units; card checkout takes 1 to 99999999`));

    const newLink = await ctx.admin.post(`/v1/prices/${price.pricingId}/payment-links`);
    expect(newLink.status).toBe(400);
    expect(newLink.body.error.message).toMatch(/amount of price PRC_\w+ is \d+ minor units; card checkout takes 1 to 99999999/);

    const before = await countSessions();
    const page = await ctx.merchant.get(new URL(link.paymentLinkUrl).pathname);
    expect(page.status).toBe(400);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.text).toMatch(/This payment link&#39;s price is \d+ minor units; card checkout takes 1 to 99999999|This payment link's price is \d+ minor units/);
    expect(await countSessions()).toBe(before);
  });
});
