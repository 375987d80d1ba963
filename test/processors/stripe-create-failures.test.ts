/**
 * Stripe failing a card session's create (and other calls): rate limits (429, `Retry-After`)
 * retried beyond the SDK's own retries, a wait too long answered 503 with `Retry-After`, and
 * permanent refusals answered with the 4xx that says why (never a 503 a retry cannot fix).
 * Nothing is stored on any failure, so the same Idempotency-Key then succeeds.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createStripeContext, type StripeContext } from './stripe-context.js';

let s: StripeContext;
beforeAll(async () => {
  s = await createStripeContext();
});
afterAll(async () => {
  await s?.close();
});

const stored = async (key: string) => ({
  key: await s.ctx.testDb.database.db('idempotency_keys').where({ key }).first(),
  sessions: Number((await s.ctx.testDb.database.db('checkout_sessions').count('* as n'))[0]!.n),
});
const createCalls = (since: number) => s.stripe.requests.slice(since).filter((r) => r.method === 'POST' && r.path === '/v1/checkout/sessions');

describe('rate limits (429)', () => {
  it("waits Stripe's Retry-After and retries with the same idempotency key (the SDK does not retry 429)", async () => {
    const before = s.stripe.requests.length;
    s.stripe.failNext('rateLimit:1');
    const res = await s.create();
    expect(res.status).toBe(201);
    const [first, second] = createCalls(before);
    expect(createCalls(before)).toHaveLength(2);
    expect(second!.idempotencyKey).toBe(first!.idempotencyKey);
    // Kassa waited at least the second Stripe asked for before asking again.
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(950);
  });

  it('answers 503 with Retry-After, having called Stripe once, when Stripe asks for a longer wait than a request can hold', async () => {
    const before = s.stripe.requests.length;
    const counts = await stored('slow-down');
    s.stripe.failNext('rateLimit:30');
    const res = await s.create({}, 'slow-down');
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('30');
    expect(res.body).toMatchObject({ success: false, error: { code: 'SERVICE_UNAVAILABLE' } });
    expect(createCalls(before)).toHaveLength(1);
    expect(await stored('slow-down')).toEqual(counts);
    expect((await s.create({}, 'slow-down')).status).toBe(201);
  });

  it('gives up with 503 after three rate-limited attempts', async () => {
    const before = s.stripe.requests.length;
    s.stripe.failNext('rateLimit:0', 3);
    const res = await s.create({}, 'still-limited');
    expect(res.status).toBe(503);
    expect(createCalls(before)).toHaveLength(3);
    expect((await stored('still-limited')).key).toBeUndefined();
  });

  it('retries a rate-limited refund and a rate-limited read-back of an event', async () => {
    const { orderId } = await s.paidOrder('limited@example.com');
    s.stripe.failNext('rateLimit:0', 1, '/v1/refunds');
    expect((await s.ctx.admin.post(`/v1/orders/${orderId}/refund`).send({ amount: 100 })).status).toBe(200);

    const session = await s.newSession();
    const stripeId = await s.stripeIdOf(session.id);
    s.stripe.complete(stripeId, { email: 'limited-event@example.com' });
    s.stripe.failNext('rateLimit:0', 2, `/v1/checkout/sessions/${stripeId}`);
    expect((await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeId))).body.outcome).toBe('applied');
  });
});

describe('permanent refusals are not 503', () => {
  it("a total below Stripe's minimum charge is 400 with Stripe's reason, sent once, nothing stored", async () => {
    const before = s.stripe.requests.length;
    const counts = await stored('too-small');
    const res = await s.create({ pricingId: undefined, pricingData: { amount: 10, currency: 'EUR', productData: { name: 'Sticker' } } }, 'too-small');
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    expect(res.body.error.message).toMatch(/card processor refused this checkout \(amount_too_small\)/);
    expect(createCalls(before)).toHaveLength(1);
    expect(await stored('too-small')).toEqual(counts);
  });

  it('Stripe refusing the secret key is 403 (the card payment account is not usable), without the key in the answer', async () => {
    const before = s.stripe.requests.length;
    s.stripe.failNext('unauthorized');
    const res = await s.create({}, 'bad-key');
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ success: false, error: { code: 'FORBIDDEN' } });
    expect(res.body.error.message).toMatch(/card payment account is not usable/);
    expect(JSON.stringify(res.body)).not.toContain('sk_test');
    expect(createCalls(before)).toHaveLength(1);
    expect((await stored('bad-key')).key).toBeUndefined();
  });
});

describe("expires_at under latency (Stripe's 30-minute minimum counts from Stripe's own creation time)", () => {
  afterEach(() => {
    s.stripe.clockAheadSeconds = 0;
  });
  const nowMs = () => s.ctx.clock.now().getTime();

  it('expiresIn 1800, the documented minimum, opens when the create reaches Stripe seconds later; Kassa expires when Stripe does', async () => {
    s.stripe.clockAheadSeconds = 5;
    const res = await s.create({ expiresIn: 1800 });
    expect(res.status).toBe(201);
    const stripeSession = s.stripe.sessions.get(await s.stripeIdOf(res.body.data.id))!;
    expect(stripeSession.expires_at - stripeSession.created).toBeGreaterThanOrEqual(1800);
    // One expiry on both sides: never earlier than asked, at most the one-minute headroom later.
    const expiresAt = Date.parse(res.body.data.expiresAt);
    expect(expiresAt / 1000).toBe(stripeSession.expires_at);
    expect(expiresAt - nowMs()).toBeGreaterThanOrEqual(1800_000);
    expect(expiresAt - nowMs()).toBeLessThanOrEqual(1860_000);
    expect((await s.readSession(res.body.data.id)).expiresAt).toBe(res.body.data.expiresAt);
  });

  it('a create that takes up to the headroom (59 s) to reach Stripe still opens', async () => {
    s.stripe.clockAheadSeconds = 59;
    expect((await s.create({ expiresIn: 1800 })).status).toBe(201);
    expect((await s.create({ expiresIn: 1830 })).status).toBe(201);
  });

  it('a longer expiry is sent to Stripe as asked', async () => {
    s.stripe.clockAheadSeconds = 5;
    const res = await s.create({ expiresIn: 7200 });
    expect(res.status).toBe(201);
    expect(Date.parse(res.body.data.expiresAt)).toBe(nowMs() + 7200_000);
    expect(s.stripe.sessions.get(await s.stripeIdOf(res.body.data.id))!.expires_at).toBe((nowMs() + 7200_000) / 1000);
  });

  it('a create that reaches Stripe later than the headroom covers answers 503 (retry), not 400, and stores nothing; the retry opens', async () => {
    const counts = await stored('too-slow');
    s.stripe.clockAheadSeconds = 120;
    const res = await s.create({ expiresIn: 1800 }, 'too-slow');
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ success: false, error: { code: 'SERVICE_UNAVAILABLE' } });
    expect(await stored('too-slow')).toEqual(counts);
    s.stripe.clockAheadSeconds = 0;
    expect((await s.create({ expiresIn: 1800 }, 'too-slow')).status).toBe(201);
  });
});
