/**
 * A test context with Stripe as the card processor: Kassa in-process (PGlite or PostgreSQL), its
 * Stripe SDK client pointed at the local Stripe-shaped server (./stripe-server.ts), a one-time
 * price, and helpers that drive Kassa over HTTP and deliver Stripe's signed events to it.
 */
import type Stripe from 'stripe';
import { expect } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';

export const SECRET_KEY = 'sk_test_kassa4242';
export const WEBHOOK_SECRET = 'whsec_kassatestsecret';
export const EVENTS_PATH = '/v1/processors/stripe/events';

export interface StripeContext {
  ctx: TestContext;
  stripe: FakeStripe;
  priceId: string;
  /** POST /v1/checkout-sessions with the price (overridable) and an Idempotency-Key. */
  create(body?: object, key?: string): Promise<import('supertest').Response>;
  newSession(body?: object): Promise<{ id: string; url: string; expiresAt: string }>;
  readSession(id: string): Promise<Record<string, unknown> & { status: string; orderId: string; orderStatus: string; lastError: unknown }>;
  readOrder(orderId: string): Promise<Record<string, unknown>>;
  stripeIdOf(kassaSessionId: string): Promise<string>;
  /** Posts the event to Kassa's endpoint, signed as Stripe signs (`secret` to sign it wrongly, `timestamp` to sign it at another time). */
  deliver(event: Stripe.Event, secret?: string, timestamp?: number): Promise<import('supertest').Response>;
  /** Posts any payload to Kassa's endpoint, validly signed (at `timestamp`, else now). */
  deliverPayload(payload: string, timestamp?: number): Promise<import('supertest').Response>;
  /** Webhook event types queued for an order, oldest first. */
  orderEvents(orderId: string): Promise<string[]>;
  /** A session paid on Stripe and its event applied: its order and PaymentIntent. */
  paidOrder(email?: string): Promise<{ sessionId: string; orderId: string; intentId: string; stripeSessionId: string }>;
  close(): Promise<void>;
}

export async function createStripeContext(env: Record<string, string> = {}, options: { logDestination?: { write(line: string): void } } = {}): Promise<StripeContext> {
  let ctx: TestContext | undefined;
  const stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx!.clock.now() });
  const base = await stripe.start();
  ctx = await createTestContext({
    env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '500', ...env },
    ...options,
  });
  const c = ctx;
  const product = await c.services.catalog.createProduct(c.orgA.orgId, { name: 'Ebook', description: 'A good read' });
  const priceId = (await c.services.catalog.createPrice(product.id, { amount: 1200, currency: 'EUR' })).id;
  let keys = 0;
  const create = (body: object = {}, key = `stripe-${++keys}`) =>
    c.merchant.post('/v1/checkout-sessions').set('X-API-Key', c.orgA.apiKey).set('Idempotency-Key', key).send({ pricingId: priceId, ...body });
  const stripeIdOf = async (id: string) => (await c.testDb.database.db('checkout_sessions').where({ id }).first()).processor_session_id as string;
  const readSession = async (id: string) => (await c.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', c.orgA.apiKey)).body.data;
  const post = (signed: { payload: string; signature: string }) =>
    c.merchant.post(EVENTS_PATH).set('Content-Type', 'application/json').set('Stripe-Signature', signed.signature).send(signed.payload);
  const deliver = (event: Stripe.Event, secret?: string, timestamp?: number) => post(stripe.signed(event, secret, timestamp));
  const deliverPayload = (payload: string, timestamp?: number) => post(stripe.signPayload(payload, undefined, timestamp));
  const newSession = async (body: object = {}) => {
    const res = await create(body);
    expect(res.status).toBe(201);
    return res.body.data as { id: string; url: string; expiresAt: string };
  };
  return {
    ctx: c,
    stripe,
    priceId,
    create,
    newSession,
    readSession,
    readOrder: async (orderId) => (await c.merchant.get(`/v1/orders/${orderId}`).set('X-API-Key', c.orgA.apiKey)).body.data,
    stripeIdOf,
    deliver,
    deliverPayload,
    orderEvents: async (orderId) =>
      (await c.testDb.database.db('webhook_events').orderBy('created_at'))
        .filter((e: { payload: unknown }) => JSON.stringify(e.payload).includes(orderId))
        .map((e: { type: string }) => e.type),
    paidOrder: async (email = 'buyer@example.com') => {
      const session = await newSession();
      const stripeSessionId = await stripeIdOf(session.id);
      const paid = stripe.complete(stripeSessionId, { email });
      expect((await deliver(stripe.lastEvent('checkout.session.completed', stripeSessionId))).body.outcome).toBe('applied');
      return { sessionId: session.id, orderId: (await readSession(session.id)).orderId, intentId: paid.payment_intent as string, stripeSessionId };
    },
    close: async () => {
      await stripe.stop();
      await c.close();
    },
  };
}
