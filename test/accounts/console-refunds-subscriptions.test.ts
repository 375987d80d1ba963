/**
 * The console's refunds and subscription changes: the admin API's services (OrderService's
 * refund flow, SubscriptionService) for the member's organization only, with the role table
 * (orders:refund and subscriptions:manage for owners, admins and support; never a viewer or a
 * developer), another organization's objects (404), no session (401), no CSRF token (403), the
 * refund's Idempotency-Key, and the audit entry of each change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { ORIGIN, as, sessionCookieOf, signIn, signUp, type Member } from './helpers.js';

let ctx: TestContext;
let ownerA: Member;
let supportA: Member;
let viewerA: Member;
let developerA: Member;
let ownerB: Member;
let oneTimePrice: string;
let monthlyPrice: string;

beforeAll(async () => {
  ctx = await createTestContext({ env: { TRUST_PROXY: '1' } });
  [ownerA, supportA, viewerA, developerA, ownerB] = await Promise.all([
    signUp(ctx, ctx.orgA.orgId, 'owner'),
    signUp(ctx, ctx.orgA.orgId, 'support'),
    signUp(ctx, ctx.orgA.orgId, 'viewer'),
    signUp(ctx, ctx.orgA.orgId, 'developer'),
    signUp(ctx, ctx.orgB.orgId, 'owner'),
  ]);
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Beans' });
  oneTimePrice = (await ctx.services.catalog.createPrice(product.id, { amount: 2500, currency: 'USD' })).id;
  monthlyPrice = (await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

let n = 0;
/** A paid order of org A (sandbox card), and its subscription for a subscription price. */
async function buy(pricingId: string): Promise<{ orderId: string; subscriptionId: string | null }> {
  const created = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', ctx.orgA.apiKey)
    .set('Idempotency-Key', `console-${++n}-${Date.now()}`)
    .send({ pricingId, customerEmail: `buyer${n}@example.com` });
  expect(created.status).toBe(201);
  const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  const order = (await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  expect(order.status).toBe('PAID');
  return { orderId: order.id, subscriptionId: order.subscriptionId ?? null };
}

const refund = (m: Member, orderId: string, key: string | undefined, body?: object) => {
  const req = as(m, ctx.merchant.post(`/v1/console/orders/${orderId}/refund`));
  if (key !== undefined) req.set('Idempotency-Key', key);
  return body === undefined ? req : req.send(body);
};
const change = (m: Member, subscriptionId: string, what: 'cancel' | 'pause' | 'resume', body?: object) => {
  const req = as(m, ctx.merchant.post(`/v1/console/subscriptions/${subscriptionId}/${what}`));
  return body === undefined ? req : req.send(body);
};
async function auditOf(targetId: string) {
  const log = await as(ownerA, ctx.merchant.get('/v1/console/audit-log?size=100'));
  return (log.body.data.records as Array<{ action: string; actorId: string; targetType: string; targetId: string; summary: string }>).filter((r) => r.targetId === targetId);
}

describe('refunds', () => {
  it('support refunds part then the rest; the order and its refunds follow; each refund is audited', async () => {
    const { orderId } = await buy(oneTimePrice);
    const part = await refund(supportA, orderId, 'k-part', { amount: 500, reason: 'requested_by_customer' });
    expect(part.status).toBe(200);
    expect(part.headers['idempotent-replayed']).toBeUndefined();
    expect(part.body.data).toMatchObject({ orderId, orgId: ctx.orgA.orgId, status: 'PAID', amountCents: 2500, amountRefundedCents: 500 });
    expect(part.body.message).toBe('Order partially refunded');
    const rest = await refund(ownerA, orderId, 'k-rest');
    expect(rest.status).toBe(200);
    expect(rest.body.data).toMatchObject({ status: 'REFUNDED', amountRefundedCents: 2500 });
    const refunds = await ctx.merchant.get(`/v1/orders/${orderId}/refunds`).set('X-API-Key', ctx.orgA.apiKey);
    expect(refunds.body.data.map((r: { reason: string | null }) => r.reason)).toEqual(['requested_by_customer', null]);
    const entries = await auditOf(orderId);
    expect(entries.filter((e) => e.action === 'order.refund').map((e) => e.actorId).sort()).toEqual([supportA.userId, ownerA.userId].sort());
    expect(entries.find((e) => e.actorId === supportA.userId)!.summary).toContain('fields: amount, reason');
  });

  it('the same Idempotency-Key replays (nothing refunded twice); with other parameters it is 409 IDEMPOTENCY_KEY_REUSED', async () => {
    const { orderId } = await buy(oneTimePrice);
    const first = await refund(ownerA, orderId, 'k-double', { amount: 700 });
    expect(first.status).toBe(200);
    const again = await refund(ownerA, orderId, 'k-double', { amount: 700 });
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data.amountRefundedCents).toBe(700);
    const other = await refund(ownerA, orderId, 'k-double', { amount: 800 });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const { orderId: second } = await buy(oneTimePrice);
    const elsewhere = await refund(ownerA, second, 'k-double', { amount: 700 });
    expect(elsewhere.status).toBe(409);
    expect(elsewhere.body.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const refunds = await ctx.merchant.get(`/v1/orders/${orderId}/refunds`).set('X-API-Key', ctx.orgA.apiKey);
    expect(refunds.body.data).toHaveLength(1);
  });

  it('domain errors: without Idempotency-Key 400, above the remainder 400 (the key stays free), a refunded order 409', async () => {
    const { orderId } = await buy(oneTimePrice);
    const noKey = await refund(ownerA, orderId, undefined, { amount: 100 });
    expect(noKey.status).toBe(400);
    const tooMuch = await refund(ownerA, orderId, 'k-big', { amount: 2501 });
    expect(tooMuch.status).toBe(400);
    expect(tooMuch.body.error.code).toBe('VALIDATION_ERROR');
    expect((await refund(ownerA, orderId, 'k-big', { amount: 2500 })).status).toBe(200);
    const done = await refund(ownerA, orderId, 'k-after');
    expect(done.status).toBe(409);
    expect(done.body.error.code).toBe('CONFLICT');
  });

  it('a viewer and a developer are refused (403); another organization gets 404; no session 401; no CSRF token 403 — nothing refunded', async () => {
    const { orderId } = await buy(oneTimePrice);
    for (const m of [viewerA, developerA]) {
      const refused = await refund(m, orderId, `k-${m.userId}`);
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe('FORBIDDEN');
    }
    const foreign = await refund(ownerB, orderId, 'k-b');
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe('NOT_FOUND');
    expect((await ctx.merchant.post(`/v1/console/orders/${orderId}/refund`).set('Idempotency-Key', 'k-anon')).status).toBe(401);
    const noCsrf = await ctx.merchant.post(`/v1/console/orders/${orderId}/refund`).set('Cookie', ownerA.cookie).set('Origin', ORIGIN).set('Idempotency-Key', 'k-csrf');
    expect(noCsrf.status).toBe(403);
    const order = await ctx.merchant.get(`/v1/orders/${orderId}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(order.body.data.amountRefundedCents).toBe(0);
  });
});

describe('subscriptions', () => {
  it('support pauses, resumes, schedules the end at period end, then ends it now; each change is audited', async () => {
    const { subscriptionId } = await buy(monthlyPrice);
    const id = subscriptionId!;
    const paused = await change(supportA, id, 'pause');
    expect(paused.status).toBe(200);
    expect(paused.body.data).toMatchObject({ subscriptionId: id, orgId: ctx.orgA.orgId, status: 'PAUSED' });
    const resumed = await change(supportA, id, 'resume');
    expect(resumed.body.data.status).toBe('ACTIVE');
    const scheduled = await change(ownerA, id, 'cancel');
    expect(scheduled.status).toBe(200);
    expect(scheduled.body.data).toMatchObject({ status: 'ACTIVE', cancelAtPeriodEnd: true });
    expect(scheduled.body.message).toBe('Subscription will end at the period end');
    const now = await change(ownerA, id, 'cancel', { atPeriodEnd: false });
    expect(now.body.data.status).toBe('CANCELED');
    expect(now.body.data.endedAt).not.toBeNull();
    const actions = (await auditOf(id)).map((e) => e.action).sort();
    expect(actions).toEqual(['subscription.cancel', 'subscription.cancel', 'subscription.pause', 'subscription.resume']);
  });

  it('state errors are 409: an ended subscription cannot be paused, resumed or canceled', async () => {
    const { subscriptionId } = await buy(monthlyPrice);
    const id = subscriptionId!;
    expect((await change(ownerA, id, 'cancel', { atPeriodEnd: false })).status).toBe(200);
    for (const what of ['pause', 'resume', 'cancel'] as const) {
      const refused = await change(ownerA, id, what);
      expect(refused.status).toBe(409);
      expect(refused.body.error.code).toBe('CONFLICT');
    }
    const bad = await change(ownerA, id, 'cancel', { atPeriodEnd: 'soon' });
    expect(bad.status).toBe(400);
  });

  it('a viewer and a developer are refused (403); another organization gets 404; no session 401; no CSRF 403 — nothing changes', async () => {
    const { subscriptionId } = await buy(monthlyPrice);
    const id = subscriptionId!;
    for (const m of [viewerA, developerA]) {
      for (const what of ['pause', 'resume', 'cancel'] as const) expect((await change(m, id, what)).status).toBe(403);
    }
    for (const what of ['pause', 'resume', 'cancel'] as const) {
      const foreign = await change(ownerB, id, what);
      expect(foreign.status).toBe(404);
    }
    expect((await ctx.merchant.post(`/v1/console/subscriptions/${id}/pause`)).status).toBe(401);
    expect((await ctx.merchant.post(`/v1/console/subscriptions/${id}/pause`).set('Cookie', supportA.cookie).set('Origin', ORIGIN)).status).toBe(403);
    const sub = await ctx.merchant.get(`/v1/subscriptions/${id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(sub.body.data.status).toBe('ACTIVE');
  });
});

// Last: it moves the clock past every session's lifetime.
describe('Idempotency-Key lifetime', () => {
  it('a key is remembered 24 hours, then free for a new refund', async () => {
    const { orderId } = await buy(oneTimePrice);
    expect((await refund(ownerA, orderId, 'k-day', { amount: 100 })).status).toBe(200);
    ctx.clock.advance(24 * 3600_000 + 1);
    const fresh = await signIn(ctx, ownerA.email);
    const owner = { ...ownerA, cookie: sessionCookieOf(fresh)!, csrf: fresh.body.data.csrfToken };
    const later = await refund(owner, orderId, 'k-day', { amount: 200 });
    expect(later.status).toBe(200);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
    expect(later.body.data.amountRefundedCents).toBe(300);
  });
});
