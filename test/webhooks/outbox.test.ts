/** The transactional outbox: an event commits with the state change that causes it, or not at all. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { enqueueWebhookEvent, KnexWebhookOutboxRepository } from '../../src/webhooks/outbox.repository.js';
import type { WebhookOrder } from '../../src/webhooks/webhook.model.js';
import { KnexWebhookDeliveryRepository } from '../../src/webhooks/deliveries.repository.js';
import { KnexWebhookEndpointRepository } from '../../src/webhooks/endpoints.repository.js';
import { newId } from '../../src/kernel/ids.js';

let ctx: TestContext;
let repos: { endpoints: KnexWebhookEndpointRepository; outbox: KnexWebhookOutboxRepository; deliveries: KnexWebhookDeliveryRepository };
beforeAll(async () => {
  ctx = await createTestContext();
  const db = ctx.testDb.database.db;
  repos = { endpoints: new KnexWebhookEndpointRepository(db), outbox: new KnexWebhookOutboxRepository(db), deliveries: new KnexWebhookDeliveryRepository(db) };
  await ctx.testDb.database.db.schema.createTable('outbox_probe', (t) => {
    t.text('id').primary();
    t.text('status').notNullable();
  });
});
afterAll(async () => {
  await ctx?.close();
});

const order = (orgId: string, status: WebhookOrder['status']): WebhookOrder => ({
  orderId: newId('ORD'),
  orgId,
  merchantReference: 'invoice-1',
  merchantMetadata: { cartId: 'c_1' },
  status,
  provider: 'STRIPE',
  amountCents: 5800,
  customerId: 'CUS_hk60G7KOFpB5lxQ84MRIHi9l',
  customerExternalId: null,
  lines: [{ kind: 'PRICE', description: 'Pro plan', quantity: '1', unitAmountDecimal: String(5800), exactAmountDecimal: String(5800), amountCents: 5800 }],
  amountRefundedCents: 0,
  currency: 'usd',
  product: { id: null, name: 'Pro plan' },
  paymentLinkId: null,
  originalOrderId: null,
  providerSubscriptionId: null,
  providerPaymentId: null,
  providerStatus: null,
  createdAt: '2026-11-22T09:00:00.000Z',
  updatedAt: '2026-11-22T09:00:00.000Z',
});

async function endpoint(orgId: string, events: string[], enabled = true) {
  const now = ctx.clock.now();
  const e = { id: newId('WHE'), orgId, name: 'probe', url: 'https://hooks.example.com/x', events: events as never, enabled, createdAt: now, updatedAt: now, deletedAt: null };
  expect(await repos.endpoints.insertEndpointWithinCap(e, 20)).toBe(true);
  return e.id;
}

describe('enqueueWebhookEvent', () => {
  it('commits the event and one delivery per matching enabled endpoint together with the state change', async () => {
    const db = ctx.testDb.database.db;
    const all = await endpoint(ctx.orgA.orgId, []);
    const paidOnly = await endpoint(ctx.orgA.orgId, ['order.paid']);
    await endpoint(ctx.orgA.orgId, ['order.failed']); // not selected
    await endpoint(ctx.orgA.orgId, [], false); // disabled
    await endpoint(ctx.orgB.orgId, []); // another organization
    const now = ctx.clock.now();
    const eventId = await db.transaction(async (trx) => {
      await trx('outbox_probe').insert({ id: 'p1', status: 'PAID' });
      return enqueueWebhookEvent(trx, { orgId: ctx.orgA.orgId, type: 'order.paid', data: { order: order(ctx.orgA.orgId, 'PAID') } }, now);
    });
    expect(eventId).toMatch(/^EVT_[0-9A-Za-z]{24}$/);
    expect(await db('outbox_probe').where({ id: 'p1' }).first()).toBeTruthy();
    const event = await repos.outbox.findEvent(eventId);
    expect(event).toMatchObject({ orgId: ctx.orgA.orgId, type: 'order.paid', createdAt: now });
    expect((event!.data as { order: WebhookOrder }).order.status).toBe('PAID');
    const deliveries = await db('webhook_deliveries').where({ event_id: eventId });
    expect(deliveries.map((d) => d.endpoint_id).sort()).toEqual([all, paidOnly].sort());
    expect(deliveries.every((d) => d.status === 'pending' && d.attempt_count === 0)).toBe(true);
  });

  it('leaves no event and no delivery when the transaction rolls back', async () => {
    const db = ctx.testDb.database.db;
    const before = Number((await db('webhook_events').count({ c: '*' }).first())!.c);
    let emitted: string | undefined;
    await expect(
      db.transaction(async (trx) => {
        await trx('outbox_probe').insert({ id: 'p2', status: 'PAID' });
        emitted = await enqueueWebhookEvent(trx, { orgId: ctx.orgA.orgId, type: 'order.paid', data: { order: order(ctx.orgA.orgId, 'PAID') } }, ctx.clock.now());
        throw new Error('the order update failed after the event was written');
      }),
    ).rejects.toThrow('the order update failed');
    expect(emitted).toMatch(/^EVT_/);
    expect(await repos.outbox.findEvent(emitted!)).toBeUndefined();
    expect(await db('webhook_deliveries').where({ event_id: emitted! })).toHaveLength(0);
    expect(await db('outbox_probe').where({ id: 'p2' }).first()).toBeUndefined();
    expect(Number((await db('webhook_events').count({ c: '*' }).first())!.c)).toBe(before);
  });

  it('refuses an event whose data does not match its type', async () => {
    const db = ctx.testDb.database.db;
    await expect(
      db.transaction((trx) =>
        enqueueWebhookEvent(trx, { orgId: ctx.orgA.orgId, type: 'subscription.created', data: { order: order(ctx.orgA.orgId, 'PAID') } }, ctx.clock.now()),
      ),
    ).rejects.toThrow('must carry data.subscription');
  });
});
