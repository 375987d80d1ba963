/**
 * What happens to the money after a Stripe payment (issue 28, sections 3 and 4), end to end over
 * HTTP: Kassa in-process, its Stripe SDK client on the local Stripe-shaped server, Stripe's events
 * signed with the SDK, and Kassa's own signed webhooks received by a real HTTPS receiver and
 * verified against the published key. Refunds (Kassa's and the Dashboard's, with their failures),
 * disputes as objects, and a renewal that needs the buyer's 3-D Secure.
 */
import type Stripe from 'stripe';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { default as addFormatsModule } from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDocument } from '../../src/http/spec.js';
import { createStripeContext, type StripeContext } from './stripe-context.js';
import { receiveOrderWebhooks, type OrderWebhooks } from './order-webhooks.js';

const AFTER_PAYMENT_EVENTS = ['order.refunded', 'order.refund_failed', 'order.dispute_created', 'order.dispute_closed', 'subscription.action_required', 'subscription.updated'];

let s: StripeContext;
let webhooks: OrderWebhooks;
let monthlyPriceId: string;
beforeAll(async () => {
  s = await createStripeContext({ WEBHOOK_ALLOW_LOOPBACK: 'true' });
  webhooks = await receiveOrderWebhooks(s.ctx, AFTER_PAYMENT_EVENTS);
  const product = await s.ctx.services.catalog.createProduct(s.ctx.orgA.orgId, { name: 'Pro plan', description: 'Everything' });
  monthlyPriceId = (await s.ctx.services.catalog.createPrice(product.id, { amount: 500, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
});
afterAll(async () => {
  await webhooks?.close();
  await s?.close();
});

const merchantGet = (path: string, apiKey = s.ctx.orgA.apiKey) => s.ctx.merchant.get(path).set('X-API-Key', apiKey);
const refund = (orderId: string, body: object) => s.ctx.admin.post(`/v1/orders/${orderId}/refund`).send(body);
const chargeOf = (intentId: string) => s.stripe.intents.get(intentId)!.latest_charge as string;
/** The verified deliveries about the order of these types, as received. */
const delivered = async (orderId: string, ...types: string[]) => (await webhooks.receivedWithData(orderId)).filter((r) => types.includes(r.type));

describe('order.refunded', () => {
  it('a partial refund from the admin API and one made in the Stripe Dashboard: two signed order.refunded with each amount and the total after it; duplicates add nothing', async () => {
    const { orderId, intentId } = await s.paidOrder('two-refunds@example.com');

    const kassa = await refund(orderId, { amount: 200, reason: 'requested_by_customer' });
    expect(kassa.status).toBe(200);
    expect(kassa.body.data).toMatchObject({ status: 'PAID', amountRefundedCents: 200 });
    const made = [...s.stripe.refunds.values()].find((r) => r.payment_intent === intentId)!;
    // The reason reaches Stripe with the refund.
    expect(s.stripe.requests.filter((r) => r.path === '/v1/refunds').at(-1)!.body).toMatchObject({ amount: '200', reason: 'requested_by_customer' });
    expect(made.reason).toBe('requested_by_customer');
    // Stripe's own events about Kassa's refund (charge.refunded, refund.created) announce nothing more.
    expect((await s.deliver(s.stripe.lastEvent('charge.refunded'))).body.outcome).toBe('ignored');
    expect((await s.deliver(s.stripe.lastEvent('refund.created', made.id))).body.outcome).toBe('ignored');

    const dashboard = s.stripe.refundInDashboard(intentId, 300);
    const created = s.stripe.lastEvent('refund.created', dashboard.id);
    const chargeRefunded = s.stripe.lastEvent('charge.refunded');
    expect((await s.deliver(created)).body.outcome).toBe('applied');
    // The same news again: the same event redelivered, and the charge's event about it.
    expect((await s.deliver(created)).body.outcome).toBe('duplicate');
    expect((await s.deliver(chargeRefunded)).body.outcome).toBe('ignored');

    const received = await delivered(orderId, 'order.refunded');
    expect(received.map((r) => [(r.data.refund as { amountCents: number }).amountCents, r.order.amountRefundedCents, r.order.status])).toEqual([
      [200, 200, 'PAID'],
      [300, 500, 'PAID'],
    ]);
    expect(received[0]!.data.refund).toMatchObject({ orderId, source: 'kassa', reason: 'requested_by_customer', status: 'succeeded', providerRefundId: made.id, currency: 'eur' });
    expect(received[1]!.data.refund).toMatchObject({ orderId, source: 'dashboard', reason: null, status: 'succeeded', providerRefundId: dashboard.id });
    expect(await s.orderEvents(orderId)).toEqual(['order.paid', 'order.refunded', 'order.refunded']);

    const listed = await merchantGet(`/v1/orders/${orderId}/refunds`);
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((r: { amountCents: number; source: string }) => [r.amountCents, r.source])).toEqual([
      [200, 'kassa'],
      [300, 'dashboard'],
    ]);
    expect(await s.readOrder(orderId)).toMatchObject({ status: 'PAID', amountRefundedCents: 500 });

    // The rest, from Kassa: REFUNDED, announced with the full total.
    expect((await refund(orderId, { reason: 'duplicate' })).body.data).toMatchObject({ status: 'REFUNDED', amountRefundedCents: 1200 });
    const last = (await delivered(orderId, 'order.refunded')).at(-1)!;
    expect([last.order.status, last.order.amountRefundedCents, (last.data.refund as { amountCents: number }).amountCents]).toEqual(['REFUNDED', 1200, 700]);
  });

  it('the delivery log and the `webhook listen` feed show the new events', async () => {
    const org = s.ctx.orgA.orgId;
    const cursor = (await s.ctx.admin.get(`/v1/orgs/${org}/webhook-events`)).body.data.cursor as number;
    const { orderId, intentId } = await s.paidOrder('listen@example.com');
    s.stripe.refundInDashboard(intentId, 100);
    expect((await s.deliver(s.stripe.lastEvent('charge.refunded'))).body.outcome).toBe('applied');
    const dispute = s.stripe.openDispute(intentId);
    expect((await s.deliver(s.stripe.lastEvent('charge.dispute.created', dispute.id))).body.outcome).toBe('applied');
    await webhooks.received(orderId);

    const feed = (await s.ctx.admin.get(`/v1/orgs/${org}/webhook-events?after=${cursor}`)).body.data.events as Array<{ type: string; body: string }>;
    const about = feed.filter((e) => e.body.includes(orderId));
    expect(about.map((e) => e.type)).toEqual(['order.paid', 'order.refunded', 'order.dispute_created']);
    expect(JSON.parse(about[1]!.body).data).toMatchObject({ order: { orderId, amountRefundedCents: 100 }, refund: { amountCents: 100, source: 'dashboard' } });

    const log = (await s.ctx.admin.get(`/v1/orgs/${org}/webhook-deliveries?size=100`)).body.data.records as Array<{ eventType: string; status: string }>;
    expect(log.filter((d) => d.eventType === 'order.refunded' || d.eventType === 'order.dispute_created').every((d) => d.status === 'succeeded')).toBe(true);
    expect(log.map((d) => d.eventType)).toEqual(expect.arrayContaining(['order.refunded', 'order.dispute_created']));
  });

  it("an order's refunds and disputes are its organization's only (404 for another's), and an unknown reason is a 400", async () => {
    const { orderId, intentId } = await s.paidOrder('tenant@example.com');
    expect((await merchantGet(`/v1/orders/${orderId}/refunds`, s.ctx.orgB.apiKey)).status).toBe(404);
    expect((await merchantGet(`/v1/orders/${orderId}/disputes`, s.ctx.orgB.apiKey)).status).toBe(404);
    expect((await merchantGet(`/v1/orders/${orderId}/refunds`)).body).toEqual({ success: true, message: 'OK', data: [] });
    expect((await merchantGet(`/v1/orders/${orderId}/disputes`)).body).toEqual({ success: true, message: 'OK', data: [] });
    const bad = await refund(orderId, { amount: 100, reason: 'changed_my_mind' });
    expect(bad.status).toBe(400);
    expect(s.stripe.requests.filter((r) => r.path === '/v1/refunds' && r.body.payment_intent === intentId)).toEqual([]);
  });
});

describe('refunds recorded before refunds were rows (upgrade)', () => {
  it('a Dashboard refund already counted in amountRefunded is adopted, not counted or announced again; a later one is', async () => {
    const { orderId, intentId } = await s.paidOrder('legacy-refund@example.com');
    // As an order refunded before migration 0130 stands: its total counted, no refund row.
    const earlier = s.stripe.refundInDashboard(intentId, 300);
    await s.ctx.testDb.database.db('orders').where({ id: orderId }).update({ amount_refunded_cents: 300 });

    expect((await s.deliver(s.stripe.lastEvent('refund.created', earlier.id))).status).toBe(200);
    expect(await s.readOrder(orderId)).toMatchObject({ status: 'PAID', amountRefundedCents: 300 });
    expect(await s.orderEvents(orderId)).toEqual(['order.paid']);
    // The refund is now a row of the order, so the next event about it is known.
    const listed = await merchantGet(`/v1/orders/${orderId}/refunds`);
    expect(listed.body.data.map((r: { amountCents: number; providerRefundId: string }) => [r.amountCents, r.providerRefundId])).toEqual([[300, earlier.id]]);

    const later = s.stripe.refundInDashboard(intentId, 100);
    expect((await s.deliver(s.stripe.lastEvent('refund.created', later.id))).body.outcome).toBe('applied');
    expect(await s.readOrder(orderId)).toMatchObject({ status: 'PAID', amountRefundedCents: 400 });
    expect(await s.orderEvents(orderId)).toEqual(['order.paid', 'order.refunded']);
  });
});

describe('refund failures', () => {
  it('refund.failed takes the amount back out: REFUNDED becomes PAID again, one order.refund_failed however often Stripe says so', async () => {
    const { orderId, intentId } = await s.paidOrder('refund-fails@example.com');
    expect((await refund(orderId, {})).body.data).toMatchObject({ status: 'REFUNDED', amountRefundedCents: 1200 });
    const made = [...s.stripe.refunds.values()].find((r) => r.payment_intent === intentId)!;

    s.stripe.failRefund(made.id, 'expired_or_canceled_card');
    const failed = s.stripe.lastEvent('refund.failed', made.id);
    expect((await s.deliver(failed)).body.outcome).toBe('applied');
    // charge.refund.updated about the same failure, and the first event again: nothing more.
    expect((await s.deliver(s.stripe.lastEvent('charge.refund.updated', made.id))).body.outcome).toBe('ignored');
    expect((await s.deliver({ ...failed, id: `${failed.id}_again` })).body.outcome).toBe('ignored');

    expect(await s.readOrder(orderId)).toMatchObject({ status: 'PAID', amountRefundedCents: 0, refunded: false });
    const events = await delivered(orderId, 'order.refunded', 'order.refund_failed');
    expect(events.map((e) => [e.type, e.order.status, e.order.amountRefundedCents])).toEqual([
      ['order.refunded', 'REFUNDED', 1200],
      ['order.refund_failed', 'PAID', 0],
    ]);
    expect(events[1]!.data.refund).toMatchObject({ providerRefundId: made.id, status: 'failed', failureReason: 'expired_or_canceled_card', amountCents: 1200 });
    expect((await merchantGet(`/v1/orders/${orderId}/refunds`)).body.data).toMatchObject([{ status: 'failed', amountCents: 1200 }]);

    // The money can be refunded again.
    expect((await refund(orderId, { amount: 1200 })).body.data).toMatchObject({ status: 'REFUNDED', amountRefundedCents: 1200 });
  });

  it('a failed Dashboard refund first seen failed counts nothing and announces nothing', async () => {
    const { orderId, intentId } = await s.paidOrder('failed-before-seen@example.com');
    const dashboard = s.stripe.refundInDashboard(intentId, 400);
    s.stripe.failRefund(dashboard.id);
    expect((await s.deliver(s.stripe.lastEvent('refund.failed', dashboard.id))).body.outcome).toBe('applied');
    expect(await s.readOrder(orderId)).toMatchObject({ status: 'PAID', amountRefundedCents: 0 });
    expect(await s.orderEvents(orderId)).toEqual(['order.paid']);
    expect((await merchantGet(`/v1/orders/${orderId}/refunds`)).body.data).toMatchObject([{ status: 'failed', source: 'dashboard' }]);
  });
});

describe('disputes', () => {
  it('created → closed: the dispute is an object of the order, announced open and closed once each', async () => {
    const { orderId, intentId } = await s.paidOrder('disputed@example.com');
    const dispute = s.stripe.openDispute(intentId, 'product_not_received');
    const created = s.stripe.lastEvent('charge.dispute.created', dispute.id);
    expect((await s.deliver(created)).body.outcome).toBe('applied');
    expect((await s.deliver({ ...created, id: `${created.id}_again` })).body.outcome).toBe('ignored');
    const open = (await merchantGet(`/v1/orders/${orderId}/disputes`)).body.data;
    expect(open).toEqual([
      {
        disputeId: expect.stringMatching(/^DSP_/),
        orderId,
        providerDisputeId: dispute.id,
        amountCents: 1200,
        currency: 'eur',
        reason: 'product_not_received',
        status: 'needs_response',
        evidenceDueBy: new Date(dispute.evidence_details.due_by! * 1000).toISOString(),
        outcome: null,
        createdAt: s.ctx.clock.now().toISOString(),
        updatedAt: s.ctx.clock.now().toISOString(),
        closedAt: null,
      },
    ]);
    expect(await s.readOrder(orderId)).toMatchObject({ disputed: true, status: 'PAID' });

    s.stripe.closeDispute(dispute.id, 'lost');
    const closed = s.stripe.lastEvent('charge.dispute.closed', dispute.id);
    expect((await s.deliver(closed)).body.outcome).toBe('applied');
    expect((await s.deliver(closed)).body.outcome).toBe('duplicate');
    const events = await delivered(orderId, 'order.dispute_created', 'order.dispute_closed');
    expect(events.map((e) => [e.type, (e.data.dispute as { status: string }).status, (e.data.dispute as { outcome: string | null }).outcome])).toEqual([
      ['order.dispute_created', 'needs_response', null],
      ['order.dispute_closed', 'lost', 'lost'],
    ]);
    // A lost dispute is not a refund.
    expect(events[1]!.order).toMatchObject({ status: 'PAID', amountRefundedCents: 0 });
    expect((await merchantGet(`/v1/orders/${orderId}/disputes`)).body.data).toMatchObject([{ status: 'lost', outcome: 'lost', closedAt: s.ctx.clock.now().toISOString() }]);
  });

  it('a dispute first seen closed (won) is announced created, then closed', async () => {
    const { orderId, intentId } = await s.paidOrder('won-late@example.com');
    const dispute = s.stripe.openDispute(intentId);
    s.stripe.closeDispute(dispute.id, 'won');
    expect((await s.deliver(s.stripe.lastEvent('charge.dispute.closed', dispute.id))).body.outcome).toBe('applied');
    expect(await s.orderEvents(orderId)).toEqual(['order.paid', 'order.dispute_created', 'order.dispute_closed']);
    expect((await merchantGet(`/v1/orders/${orderId}/disputes`)).body.data).toMatchObject([{ status: 'won', outcome: 'won' }]);
  });
});

describe('invoice.payment_action_required (3-D Secure on a renewal)', () => {
  async function subscribe(email: string) {
    const res = await s.create({ pricingId: monthlyPriceId });
    expect(res.status).toBe(201);
    const stripeSessionId = await s.stripeIdOf(res.body.data.id);
    const paid = s.stripe.complete(stripeSessionId, { email });
    expect((await s.deliver(s.stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
    const subscriptionId = (await s.ctx.testDb.database.db('subscriptions').where({ checkout_session_id: res.body.data.id }).first()).id as string;
    return { subscriptionId, stripeSub: s.stripe.subscriptionOf(stripeSessionId) };
  }
  const readSubscription = async (id: string) => (await merchantGet(`/v1/subscriptions/${id}`)).body.data;
  const subscriptionDeliveries = async (subscriptionId: string) =>
    (await webhooks.all()).filter((r) => (r.data.subscription as { subscriptionId?: string } | undefined)?.subscriptionId === subscriptionId);

  it('marks the subscription as waiting for the buyer with Stripe’s hosted invoice page, once; paid, the action is gone and the renewal is PAID', async () => {
    const { subscriptionId, stripeSub } = await subscribe('sca@example.com');
    const invoice: Stripe.Invoice = s.stripe.renewRequiringAction(stripeSub.id);
    expect((await s.deliver(s.stripe.lastEvent('invoice.payment_failed', invoice.id))).body.outcome).toBe('applied');
    const actionEvent = s.stripe.lastEvent('invoice.payment_action_required', invoice.id);
    expect((await s.deliver(actionEvent)).body.outcome).toBe('applied');
    // The same news under another event id: acknowledged, nothing emitted again (counted below).
    expect((await s.deliver({ ...actionEvent, id: `${actionEvent.id}_again` })).status).toBe(200);

    const waiting = await readSubscription(subscriptionId);
    expect(waiting).toMatchObject({
      status: 'ACTIVE',
      paymentAction: { invoiceId: invoice.id, hostedInvoiceUrl: invoice.hosted_invoice_url, requiredAt: s.ctx.clock.now().toISOString() },
    });
    const action = (await subscriptionDeliveries(subscriptionId)).filter((d) => d.type === 'subscription.action_required');
    expect(action).toHaveLength(1);
    expect(action[0]!.data.subscription).toMatchObject({ status: 'ACTIVE', paymentAction: { invoiceId: invoice.id, hostedInvoiceUrl: invoice.hosted_invoice_url } });

    // The buyer confirms on Stripe's page: the invoice is paid.
    s.ctx.clock.advance(60_000);
    const paid = s.stripe.retryInvoice(invoice.id, 'paid');
    expect((await s.deliver(s.stripe.invoiceEvent('invoice.paid', paid))).body.outcome).toBe('applied');
    const after = await readSubscription(subscriptionId);
    expect(after.paymentAction).toBeUndefined();
    expect(after.status).toBe('ACTIVE');
    const updated = (await subscriptionDeliveries(subscriptionId)).filter((d) => d.type === 'subscription.updated').at(-1)!;
    expect(updated.data.subscription).not.toHaveProperty('paymentAction');
    const renewal = (await merchantGet(`/v1/orders?subscription_id=${subscriptionId}&size=10`)).body.data.records.find((o: { originalOrderId?: string }) => o.originalOrderId);
    expect(renewal).toMatchObject({ status: 'PAID', amountCents: 500 });
  });

  it('an action event about an invoice paid since changes nothing', async () => {
    const { subscriptionId, stripeSub } = await subscribe('sca-late@example.com');
    const invoice = s.stripe.renewRequiringAction(stripeSub.id);
    s.stripe.retryInvoice(invoice.id, 'paid');
    expect((await s.deliver(s.stripe.lastEvent('invoice.payment_action_required', invoice.id))).body.outcome).toBe('ignored');
    expect((await readSubscription(subscriptionId)).paymentAction).toBeUndefined();
  });
});

describe('the payloads', () => {
  it("every delivery received above is its event's envelope in merchant.yaml (RefundWebhookEvent, DisputeWebhookEvent, SubscriptionWebhookEvent)", async () => {
    const doc = await loadDocument('merchant');
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    (addFormatsModule as unknown as { default: (a: unknown) => void }).default(ajv);
    const schemas = doc.components!.schemas as Record<string, object>;
    const envelope: Record<string, string> = {
      'order.refunded': 'RefundWebhookEvent',
      'order.refund_failed': 'RefundWebhookEvent',
      'order.dispute_created': 'DisputeWebhookEvent',
      'order.dispute_closed': 'DisputeWebhookEvent',
      'subscription.action_required': 'SubscriptionWebhookEvent',
      'subscription.updated': 'SubscriptionWebhookEvent',
    };
    const received = await webhooks.all();
    expect(new Set(received.map((r) => r.type))).toEqual(new Set(Object.keys(envelope)));
    for (const r of received) {
      const validate = ajv.compile(schemas[envelope[r.type]!]!);
      expect(validate(r.body), `${r.type}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
  });
});
