/**
 * The webhook delivery job as the worker runs it: deliveries in flight are topped up as each one
 * finishes (a slow receiver holds one slot, not the whole batch), and stopping the worker waits
 * for the attempts in flight to be recorded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { startReceiver, RECEIVER_CERT, type Receiver } from '../webhooks/receiver.js';
import { DeliveryWorker } from '../../src/webhooks/delivery.worker.js';
import { KnexWebhookDeliveryRepository } from '../../src/webhooks/deliveries.repository.js';
import { UrlGuard } from '../../src/webhooks/url-guard.js';
import { createLogger } from '../../src/kernel/logger.js';
import { startWorker } from '../../src/worker.js';

let ctx: TestContext;
let receiver: Receiver;

const sessionBody = { pricingData: { amount: 1500, currency: 'USD', productData: { name: 'Job test' } }, customerEmail: 'buyer@example.com' };

async function pay(apiKey: string, key: string): Promise<void> {
  const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', apiKey).set('Idempotency-Key', key).send(sessionBody);
  expect(created.status).toBe(201);
  const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/34', cvc: '123' });
  expect(paid.status).toBe(303);
}

beforeAll(async () => {
  ctx = await createTestContext({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true' } });
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await ctx?.close();
});

describe('the delivery job', () => {
  it('keeps delivering past a slow receiver, and stopping waits for the attempt in flight', async () => {
    receiver.respond = (request) => (request.path === '/slow' ? { status: 200, body: 'slow', delayMs: 2500 } : { status: 200, body: 'ok' });
    expect((await ctx.merchant.post('/v1/webhook').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Slow', url: receiver.url('/slow'), events: ['order.paid'] })).status).toBe(201);
    expect((await ctx.merchant.post('/v1/webhook').set('X-API-Key', ctx.orgB.apiKey).send({ name: 'Fast', url: receiver.url('/fast'), events: ['order.paid'] })).status).toBe(201);
    await pay(ctx.orgA.apiKey, 'slow-1');
    ctx.clock.advance(1);
    for (let i = 0; i < 6; i++) await pay(ctx.orgB.apiKey, `fast-${i}`);

    const worker = new DeliveryWorker(new KnexWebhookDeliveryRepository(ctx.testDb.database.db), ctx.services.signingKeys, new UrlGuard({ allowLoopback: true }), ctx.clock, createLogger({ level: 'silent' }), {
      batchSize: 3,
      ca: RECEIVER_CERT,
      idleIntervalMs: 50,
    });
    const running = startWorker([worker.job()], createLogger({ level: 'silent' }));
    // Three slots: the slow delivery holds one, the six fast ones pass through the other two.
    await expect.poll(() => receiver.received.filter((r) => r.path === '/fast').length, { timeout: 10_000, interval: 20 }).toBe(6);
    expect(receiver.received.filter((r) => r.path === '/slow')).toHaveLength(1);
    const slow = await ctx.testDb.database.db('webhook_deliveries').where({ org_id: ctx.orgA.orgId }).first();
    expect(slow.status).toBe('pending');

    await running.stop();
    const after = await ctx.testDb.database.db('webhook_deliveries').where({ org_id: ctx.orgA.orgId }).first();
    expect(after).toMatchObject({ status: 'succeeded', attempt_count: 1, last_status_code: 200 });
    const fast = await ctx.testDb.database.db('webhook_deliveries').where({ org_id: ctx.orgB.orgId }).select('status');
    expect(fast.map((d) => d.status)).toEqual(Array(6).fill('succeeded'));
  });
});
