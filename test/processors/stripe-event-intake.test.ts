/**
 * What Kassa's Stripe event endpoint takes in before anything is applied (issue 27, items 6 and 7):
 * the signature's age against Stripe's 5-minute tolerance on Kassa's clock (both ways), validly
 * signed payloads that are not events Kassa can apply (400, nothing applied or remembered),
 * events about Checkout Sessions Stripe does not have (acknowledged and logged, not 503), and a
 * declined PaymentIntent that names a Kassa session it does not belong to (ignored).
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Stripe from 'stripe';
import { createStripeContext, EVENTS_PATH, WEBHOOK_SECRET, type StripeContext } from './stripe-context.js';

let s: StripeContext;
const logLines: string[] = [];
beforeAll(async () => {
  s = await createStripeContext({ LOG_LEVEL: 'info' }, { logDestination: { write: (line) => void logLines.push(line) } });
});
afterAll(async () => {
  await s?.close();
});

const nowSeconds = () => Math.floor(s.ctx.clock.now().getTime() / 1000);
const rememberedEvents = async () => Number((await s.ctx.testDb.database.db('stripe_events').count('* as n'))[0]!.n);
const isRemembered = async (eventId: string) => (await s.ctx.testDb.database.db('stripe_events').where({ id: eventId }).first()) !== undefined;

/** A session the buyer has paid on Stripe, and Stripe's completed event for it (not delivered yet). */
async function paidOnStripe(email: string) {
  const session = await s.newSession();
  const stripeId = await s.stripeIdOf(session.id);
  s.stripe.complete(stripeId, { email });
  return { session, event: s.stripe.lastEvent('checkout.session.completed', stripeId) };
}

describe("the signature's age (Stripe's 5-minute tolerance, on Kassa's clock)", () => {
  it('a delivery signed 299 s ago is applied; one signed 301 s ago is refused with 400 and nothing is applied', async () => {
    const fresh = await paidOnStripe('age-299@example.com');
    const res = await s.deliver(fresh.event, undefined, nowSeconds() - 299);
    expect(res.status).toBe(200);
    expect(res.body.outcome).toBe('applied');
    expect(await s.readSession(fresh.session.id)).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID' });

    const stale = await paidOnStripe('age-301@example.com');
    const refused = await s.deliver(stale.event, undefined, nowSeconds() - 301);
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    expect(refused.body.error.message).toMatch(/tolerance|old|time/i);
    expect((await s.readSession(stale.session.id)).status).toBe('CREATED');
    expect(await isRemembered(stale.event.id)).toBe(false);
  });

  it("a delivery signed 7 days ago (the review's replay) is refused; its fresh redelivery is applied", async () => {
    const { session, event } = await paidOnStripe('age-7d@example.com');
    expect((await s.deliver(event, undefined, nowSeconds() - 7 * 86400)).status).toBe(400);
    expect((await s.readSession(session.id)).status).toBe('CREATED');
    expect((await s.deliver(event)).body.outcome).toBe('applied');
  });

  it('a timestamp more than 5 minutes in the future is refused with 400; one within the tolerance is applied', async () => {
    const ahead = await paidOnStripe('future-301@example.com');
    const refused = await s.deliver(ahead.event, undefined, nowSeconds() + 301);
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    expect((await s.readSession(ahead.session.id)).status).toBe('CREATED');
    expect(await isRemembered(ahead.event.id)).toBe(false);

    const skewed = await paidOnStripe('future-299@example.com');
    expect((await s.deliver(skewed.event, undefined, nowSeconds() + 299)).body.outcome).toBe('applied');
  });

  it('a timestamp that is not a number is refused even when the HMAC over it matches (no age could be checked)', async () => {
    const { session, event } = await paidOnStripe('nan@example.com');
    const payload = JSON.stringify(event);
    const v1 = createHmac('sha256', WEBHOOK_SECRET).update(`NaN.${payload}`).digest('hex');
    const res = await s.ctx.merchant.post(EVENTS_PATH).set('Content-Type', 'application/json').set('Stripe-Signature', `t=NaN,v1=${v1}`).send(payload);
    expect(res.status).toBe(400);
    expect((await s.readSession(session.id)).status).toBe('CREATED');
  });

  it("measures the age on Kassa's injectable clock, not the machine's", async () => {
    const { session, event } = await paidOnStripe('clock@example.com');
    const signedAt = nowSeconds();
    const signed = s.stripe.signed(event, undefined, signedAt);
    s.ctx.clock.advance(301_000);
    const post = () => s.ctx.merchant.post(EVENTS_PATH).set('Content-Type', 'application/json').set('Stripe-Signature', signed.signature).send(signed.payload);
    expect((await post()).status).toBe(400);
    s.ctx.clock.advance(-2_000);
    expect((await post()).body.outcome).toBe('applied');
    expect((await s.readSession(session.id)).orderStatus).toBe('PAID');
  });
});

describe('validly signed payloads that are not events Kassa can apply', () => {
  const eventLike = (overrides: Record<string, unknown>) =>
    JSON.stringify({ id: `evt_malformed_${Math.random().toString(36).slice(2)}`, object: 'event', type: 'checkout.session.completed', created: nowSeconds(), ...overrides });

  it.each([
    ['a JSON array', () => JSON.stringify([{ id: 'evt_in_array', object: 'event', type: 'checkout.session.completed', data: { object: { id: 'cs_test_x' } } }])],
    ['an empty array', () => '[]'],
    ['JSON null', () => 'null'],
    ['a JSON string', () => '"checkout.session.completed"'],
    ['an event without data', () => eventLike({})],
    ['an event whose data is null', () => eventLike({ data: null })],
    ['an event whose data.object is null', () => eventLike({ data: { object: null } })],
    ['an event whose data.object is an array', () => eventLike({ data: { object: [] } })],
    ['a Checkout Session event whose object has no id', () => eventLike({ data: { object: { object: 'checkout.session' } } })],
    ['a PaymentIntent event whose object id is a number', () => eventLike({ type: 'payment_intent.payment_failed', data: { object: { id: 42 } } })],
    ['an event without an id', () => JSON.stringify({ object: 'event', type: 'checkout.session.completed', data: { object: { id: 'cs_test_x' } } })],
    ['an event without a type', () => eventLike({ type: undefined, data: { object: { id: 'cs_test_x' } } })],
    ['not JSON at all', () => 'checkout.session.completed'],
  ])('%s → 400, nothing applied or remembered', async (_name, payload) => {
    const session = await s.newSession();
    const before = await rememberedEvents();
    const res = await s.deliverPayload(payload());
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    expect(await rememberedEvents()).toBe(before);
    expect((await s.readSession(session.id)).status).toBe('CREATED');
  });

  it('an event type Kassa does not use is still acknowledged (200 ignored) whatever its object', async () => {
    const res = await s.deliverPayload(JSON.stringify({ id: 'evt_other_type', object: 'event', type: 'customer.created', created: nowSeconds(), data: { object: { id: 'cus_1', object: 'customer' } } }));
    expect(res.status).toBe(200);
    expect(res.body.outcome).toBe('ignored');
  });
});

describe('events about Checkout Sessions Stripe does not have', () => {
  it('are acknowledged (200 ignored) and logged, not 503 (Stripe would retry them for three days)', async () => {
    const unknown = { ...s.stripe.latest(), id: 'cs_test_not_on_this_account' } as Stripe.Checkout.Session;
    const event = s.stripe.event('checkout.session.completed', unknown);
    const res = await s.deliver(event);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true, outcome: 'ignored' });
    expect(await isRemembered(event.id)).toBe(true);
    const logged = logLines.map((l) => JSON.parse(l) as { msg: string; stripeSessionId?: string; eventId?: string }).find((l) => l.stripeSessionId === unknown.id);
    expect(logged?.msg).toMatch(/does not have/);
  });

  it('Stripe unreachable while reading one back is still 503 (redelivered)', async () => {
    const { session, event } = await paidOnStripe('unknown-vs-down@example.com');
    s.stripe.failNext('error500', 3);
    expect((await s.deliver(event)).status).toBe(503);
    expect((await s.deliver(event)).body.outcome).toBe('applied');
    expect((await s.readSession(session.id)).orderStatus).toBe('PAID');
  });
});

describe("payment_intent.payment_failed is applied to the session it belongs to only", () => {
  it("a declined PaymentIntent whose metadata names another session sets no lastError there", async () => {
    const victim = await s.newSession();
    const ids = { kassa_checkout_session_id: victim.id, kassa_org_id: s.ctx.orgA.orgId };
    const foreign = s.stripe.declineStandaloneIntent(1200, 'eur', ids, 'stolen_card');
    const res = await s.deliver(s.stripe.lastEvent('payment_intent.payment_failed', foreign.id));
    expect(res.status).toBe(200);
    expect(res.body.outcome).toBe('ignored');
    expect((await s.readSession(victim.id)).lastError).toBeNull();

    // The session's own declined attempt is still recorded.
    const own = s.stripe.declineAttempt(await s.stripeIdOf(victim.id), 'insufficient_funds');
    expect((await s.deliver(s.stripe.lastEvent('payment_intent.payment_failed', own.id))).body.outcome).toBe('applied');
    expect((await s.readSession(victim.id)).lastError).toMatchObject({ code: 'insufficient_funds' });
  });

  it("a foreign PaymentIntent naming a paid session leaves its order alone", async () => {
    const { session, event } = await paidOnStripe('paid-victim@example.com');
    await s.deliver(event);
    const ids = { kassa_checkout_session_id: session.id, kassa_org_id: s.ctx.orgA.orgId };
    const foreign = s.stripe.declineStandaloneIntent(1200, 'eur', ids);
    expect((await s.deliver(s.stripe.lastEvent('payment_intent.payment_failed', foreign.id))).body.outcome).toBe('ignored');
    const read = await s.readSession(session.id);
    expect(read).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID', lastError: null });
    expect(await s.orderEvents(read.orderId)).toEqual(['order.paid']);
  });
});
