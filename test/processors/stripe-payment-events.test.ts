/**
 * Stripe's payment events beyond the Checkout Session's own, end to end over HTTP: declined
 * attempts (payment_intent.payment_failed → lastError), refunds made through Kassa or in Stripe's
 * Dashboard (charge.refunded → amountRefunded / REFUNDED, never counted twice), disputes
 * (charge.dispute.created / closed → disputed), and paid orphan Checkout Sessions (refunded).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStripeContext, type StripeContext } from './stripe-context.js';

let s: StripeContext;
beforeAll(async () => {
  s = await createStripeContext();
});
afterAll(async () => {
  await s?.close();
});

const refundsOf = (intentId: string) => [...s.stripe.refunds.values()].filter((r) => r.payment_intent === intentId).map((r) => r.amount);

describe('payment_intent.payment_failed', () => {
  it("records the decline as the session's lastError; the session stays payable and is paid with another card", async () => {
    const session = await s.newSession();
    const stripeId = await s.stripeIdOf(session.id);
    const intent = s.stripe.declineAttempt(stripeId, 'insufficient_funds');
    const failed = s.stripe.lastEvent('payment_intent.payment_failed', intent.id);
    expect((await s.deliver(failed)).body).toEqual({ received: true, outcome: 'applied' });
    const read = await s.readSession(session.id);
    expect(read.status).toBe('CREATED');
    expect(read.lastError).toEqual({ code: 'insufficient_funds', occurredAt: new Date(failed.created * 1000).toISOString(), operation: 'charge', requestId: intent.last_payment_error!.charge });

    s.stripe.complete(stripeId, { email: 'second-card@example.com' });
    await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeId));
    // A redelivery of the old failure after the payment changes nothing.
    expect((await s.deliver({ ...failed, id: `${failed.id}_redelivered` })).status).toBe(200);
    const paid = await s.readSession(session.id);
    expect(paid).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID' });
    expect(paid.lastError).toEqual(read.lastError);
    expect(await s.orderEvents(paid.orderId)).toEqual(['order.paid']);
  });

  it('a late failure event whose PaymentIntent has succeeded since records nothing', async () => {
    const session = await s.newSession();
    const stripeId = await s.stripeIdOf(session.id);
    const intent = s.stripe.declineAttempt(stripeId, 'card_velocity_exceeded');
    s.stripe.complete(stripeId, { email: 'late@example.com' });
    // Only the failure arrives (the completion's webhook is still on its way): Stripe's PaymentIntent now succeeded.
    expect((await s.deliver(s.stripe.lastEvent('payment_intent.payment_failed', intent.id))).body.outcome).toBe('ignored');
    expect((await s.readSession(session.id)).lastError).toBeNull();
  });

  it('a badly signed failure is refused (400) and records nothing', async () => {
    const session = await s.newSession();
    const intent = s.stripe.declineAttempt(await s.stripeIdOf(session.id));
    const res = await s.deliver(s.stripe.lastEvent('payment_intent.payment_failed', intent.id), 'whsec_forged');
    expect(res.status).toBe(400);
    expect((await s.readSession(session.id)).lastError).toBeNull();
  });

  it('an asynchronous payment that fails after completion fails the order through the Checkout Session', async () => {
    const session = await s.newSession();
    const stripeId = await s.stripeIdOf(session.id);
    s.stripe.complete(stripeId, { email: 'async@example.com', outcome: 'processing' });
    await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeId));
    s.stripe.settleAsync(stripeId, 'failed');
    const intentId = s.stripe.sessions.get(stripeId)!.payment_intent as string;
    // Only payment_intent.payment_failed arrives (checkout.session.async_payment_failed was lost).
    expect((await s.deliver(s.stripe.lastEvent('payment_intent.payment_failed', intentId))).body.outcome).toBe('applied');
    const read = await s.readSession(session.id);
    expect(read).toMatchObject({ status: 'FAILED', orderStatus: 'FAILED' });
    expect(await s.orderEvents(read.orderId)).toEqual(['order.pending', 'order.failed']);
  });
});

describe('charge.refunded', () => {
  it('reads refunds made in the Stripe Dashboard: partial keeps PAID, the rest makes it REFUNDED; duplicates change nothing', async () => {
    const { orderId, intentId } = await s.paidOrder('dash@example.com');
    s.stripe.refundInDashboard(intentId, 300);
    const first = s.stripe.lastEvent('charge.refunded');
    expect((await s.deliver(first)).body.outcome).toBe('applied');
    expect(await s.readOrder(orderId)).toMatchObject({ status: 'PAID', amountRefundedCents: 300, amountRefunded: 3, refunded: false });
    expect((await s.deliver(first)).body.outcome).toBe('duplicate');

    s.stripe.refundInDashboard(intentId, 900);
    await s.deliver(s.stripe.lastEvent('charge.refunded'));
    expect(await s.readOrder(orderId)).toMatchObject({ status: 'REFUNDED', amountRefundedCents: 1200, refunded: true });
    // One order.refunded per refund (issue 28), the duplicate delivery none.
    expect(await s.orderEvents(orderId)).toEqual(['order.paid', 'order.refunded', 'order.refunded']);
  });

  it("never counts a refund Kassa made twice: Stripe's event for it reconciles to the same total", async () => {
    const { orderId, intentId } = await s.paidOrder('kassa-refund@example.com');
    expect((await s.ctx.admin.post(`/v1/orders/${orderId}/refund`).send({ amount: 200 })).status).toBe(200);
    const kassaMade = s.stripe.lastEvent('charge.refunded');
    expect((await s.deliver(kassaMade)).status).toBe(200);
    expect(await s.readOrder(orderId)).toMatchObject({ status: 'PAID', amountRefundedCents: 200 });

    s.stripe.refundInDashboard(intentId, 100);
    const dashboard = s.stripe.lastEvent('charge.refunded');
    // Out of order and replayed: the newer event first, then the older one again under a new id.
    await s.deliver(dashboard);
    await s.deliver({ ...kassaMade, id: `${kassaMade.id}_again` });
    expect(await s.readOrder(orderId)).toMatchObject({ status: 'PAID', amountRefundedCents: 300 });
    expect(refundsOf(intentId)).toEqual([200, 100]);

    // Kassa's next refund starts from the reconciled total.
    expect((await s.ctx.admin.post(`/v1/orders/${orderId}/refund`).send({})).body.data).toMatchObject({ status: 'REFUNDED', amountRefundedCents: 1200 });
    expect(refundsOf(intentId)).toEqual([200, 100, 900]);
  });

  it('answers 503 and records nothing when the charge cannot be read back; the redelivery applies it', async () => {
    const { orderId, intentId } = await s.paidOrder('unreachable@example.com');
    s.stripe.refundInDashboard(intentId, 250);
    const event = s.stripe.lastEvent('charge.refunded');
    s.stripe.failNext('error500', 3, '/v1/charges/');
    expect((await s.deliver(event)).status).toBe(503);
    expect(await s.readOrder(orderId)).toMatchObject({ amountRefundedCents: 0 });
    expect((await s.deliver(event)).body.outcome).toBe('applied');
    expect(await s.readOrder(orderId)).toMatchObject({ amountRefundedCents: 250 });
  });

  it("an event about a charge Stripe does not have for this account is acknowledged and ignored", async () => {
    const { intentId } = await s.paidOrder('other-account@example.com');
    s.stripe.refundInDashboard(intentId, 100);
    const event = s.stripe.lastEvent('charge.refunded');
    const foreign = { ...event, id: `${event.id}_foreign`, data: { object: { ...(event.data.object as object), id: 'ch_not_here' } } } as typeof event;
    expect((await s.deliver(foreign)).body).toEqual({ received: true, outcome: 'ignored' });
  });

  it('a refund event that arrives before the payment event applies the payment first, then the refund', async () => {
    const session = await s.newSession();
    const stripeId = await s.stripeIdOf(session.id);
    const paid = s.stripe.complete(stripeId, { email: 'early-refund@example.com' });
    s.stripe.refundInDashboard(paid.payment_intent as string, 500);
    expect((await s.deliver(s.stripe.lastEvent('charge.refunded'))).body.outcome).toBe('applied');
    const read = await s.readSession(session.id);
    expect(read).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID' });
    expect(await s.readOrder(read.orderId)).toMatchObject({ amountRefundedCents: 500 });
    // The late payment event changes nothing.
    await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeId));
    expect(await s.orderEvents(read.orderId)).toEqual(['order.paid', 'order.refunded']);
  });
});

describe('disputes', () => {
  it('charge.dispute.created marks the order disputed; closed as won it stays disputed, status and refunds unchanged', async () => {
    const { orderId, intentId } = await s.paidOrder('won@example.com');
    const dispute = s.stripe.openDispute(intentId);
    expect((await s.deliver(s.stripe.lastEvent('charge.dispute.created', dispute.id))).body.outcome).toBe('applied');
    expect(await s.readOrder(orderId)).toMatchObject({ disputed: true, status: 'PAID', amountRefundedCents: 0 });
    s.stripe.closeDispute(dispute.id, 'won');
    expect((await s.deliver(s.stripe.lastEvent('charge.dispute.closed', dispute.id))).status).toBe(200);
    expect(await s.readOrder(orderId)).toMatchObject({ disputed: true, status: 'PAID', amountRefundedCents: 0 });
    expect(await s.orderEvents(orderId)).toEqual(['order.paid', 'order.dispute_created', 'order.dispute_closed']);
  });

  it('closed as lost (and its created event missed) the order is disputed, still PAID with nothing refunded', async () => {
    const { orderId, intentId } = await s.paidOrder('lost@example.com');
    const dispute = s.stripe.openDispute(intentId);
    s.stripe.closeDispute(dispute.id, 'lost');
    expect((await s.deliver(s.stripe.lastEvent('charge.dispute.closed', dispute.id))).body.outcome).toBe('applied');
    expect(await s.readOrder(orderId)).toMatchObject({ disputed: true, status: 'PAID', amountRefundedCents: 0 });
    // The created event, late: nothing changes.
    await s.deliver(s.stripe.lastEvent('charge.dispute.created', dispute.id));
    expect(await s.readOrder(orderId)).toMatchObject({ disputed: true, status: 'PAID' });
  });

  it('a dispute on a payment Kassa does not know is acknowledged and ignored', async () => {
    const { intentId } = await s.paidOrder('unknown@example.com');
    await s.ctx.testDb.database.db('orders').where({ processor_payment_id: intentId }).update({ processor_payment_id: 'pi_elsewhere' });
    // The PaymentIntent still names Kassa's session, which has its order: Kassa applies it and finds no order by this PaymentIntent.
    const intent = s.stripe.intents.get(intentId)!;
    s.stripe.intents.set(intentId, { ...intent, metadata: {} });
    const dispute = s.stripe.openDispute(intentId);
    expect((await s.deliver(s.stripe.lastEvent('charge.dispute.created', dispute.id))).body.outcome).toBe('ignored');
  });
});

describe('orphan Checkout Sessions (Stripe made them, Kassa never stored them)', () => {
  it('a create that timed out after Stripe made the session answers 503; if the orphan is paid anyway, Kassa refunds it once', async () => {
    const sessionsBefore = Number((await s.ctx.testDb.database.db('checkout_sessions').count('* as n'))[0]!.n);
    const stripeBefore = new Set(s.stripe.sessions.keys());
    s.stripe.failNext('answerThenHang');
    s.stripe.failNext('hang', 2);
    const res = await s.create({ customerEmail: 'orphan@example.com' }, 'orphan-key');
    expect(res.status).toBe(503);
    expect(Number((await s.ctx.testDb.database.db('checkout_sessions').count('* as n'))[0]!.n)).toBe(sessionsBefore);
    const [orphan] = [...s.stripe.sessions.values()].filter((cs) => !stripeBefore.has(cs.id));
    expect(orphan).toMatchObject({ status: 'open', metadata: { kassa_org_id: s.ctx.orgA.orgId } });

    // The merchant retries with the same key: a new Kassa session with its own Stripe session.
    const retried = await s.create({ customerEmail: 'orphan@example.com' }, 'orphan-key');
    expect(retried.status).toBe(201);
    expect(await s.stripeIdOf(retried.body.data.id)).not.toBe(orphan!.id);

    const paid = s.stripe.complete(orphan!.id, { email: 'orphan@example.com' });
    const event = s.stripe.lastEvent('checkout.session.completed', orphan!.id);
    expect((await s.deliver(event)).body.outcome).toBe('applied');
    expect(refundsOf(paid.payment_intent as string)).toEqual([1200]);
    expect(s.stripe.requests.filter((r) => r.path === '/v1/refunds').at(-1)!.idempotencyKey).toBe(`kassa_orphan_refund_${orphan!.id}`);
    // Duplicate, and the same news under another event id: no second refund.
    expect((await s.deliver(event)).body.outcome).toBe('duplicate');
    await s.deliver({ ...event, id: `${event.id}_again` });
    expect(refundsOf(paid.payment_intent as string)).toEqual([1200]);
    // The Kassa session of the retry is untouched.
    expect((await s.readSession(retried.body.data.id)).status).toBe('CREATED');
  });

  it("leaves alone a Kassa-made Checkout Session of an organization this deployment does not have (another Kassa on the same Stripe account)", async () => {
    const session = await s.newSession();
    const stripeId = await s.stripeIdOf(session.id);
    const other = { ...s.stripe.sessions.get(stripeId)!, client_reference_id: 'CS_elsewhere', metadata: { kassa_checkout_session_id: 'CS_elsewhere', kassa_org_id: 'ORG_elsewhere' } };
    s.stripe.sessions.set(stripeId, other);
    const paid = s.stripe.complete(stripeId, { email: 'foreign@example.com' });
    expect((await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeId))).body.outcome).toBe('ignored');
    expect(refundsOf(paid.payment_intent as string)).toEqual([]);
  });
});
