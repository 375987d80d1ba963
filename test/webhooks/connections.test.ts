/**
 * Keep-alive connections of the delivery worker (src/webhooks/connections.ts) against real HTTPS
 * receivers on loopback: connections are reused, the certificate is still checked against the
 * URL's host, a DNS change is followed (and a private answer refused) at the next re-resolution,
 * and a pooled connection the receiver closes costs neither an attempt nor a lost event.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/kernel/logger.js';
import { newId } from '../../src/kernel/ids.js';
import { DeliveryWorker, type DeliveryWorkerOptions } from '../../src/webhooks/delivery.worker.js';
import { enqueueWebhookEvent, KnexWebhookOutboxRepository } from '../../src/webhooks/outbox.repository.js';
import type { WebhookOrder } from '../../src/webhooks/webhook.model.js';
import { UrlGuard, type Resolve } from '../../src/webhooks/url-guard.js';
import { KnexWebhookDeliveryRepository } from '../../src/webhooks/deliveries.repository.js';
import { KnexWebhookEndpointRepository } from '../../src/webhooks/endpoints.repository.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { RECEIVER_CERT, startReceiver, type Receiver } from './receiver.js';

let ctx: TestContext;
let receiver: Receiver;
let repos: { endpoints: KnexWebhookEndpointRepository; outbox: KnexWebhookOutboxRepository; deliveries: KnexWebhookDeliveryRepository };
const workers: DeliveryWorker[] = [];

beforeAll(async () => {
  ctx = await createTestContext({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true' } });
  const db = ctx.testDb.database.db;
  repos = { endpoints: new KnexWebhookEndpointRepository(db), outbox: new KnexWebhookOutboxRepository(db), deliveries: new KnexWebhookDeliveryRepository(db) };
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await ctx?.close();
});
afterEach(async () => {
  receiver.reset();
  const { records } = await repos.endpoints.listEndpoints(ctx.orgA.orgId, { offset: 0, limit: 100 });
  for (const e of records) await repos.endpoints.deleteEndpoint(ctx.orgA.orgId, e.id, ctx.clock.now());
  // Whatever a test left pending must not be delivered by the next one.
  await ctx.testDb.database.db('webhook_deliveries').where({ status: 'pending' }).update({ status: 'failed' });
  for (const w of workers.splice(0)) w.closeConnections();
});

/** Names the tests resolve themselves (the certificate covers receiver.kassa.test, 127.0.0.1 and localhost). */
function worker(options: DeliveryWorkerOptions & { resolve?: Resolve } = {}) {
  const w = new DeliveryWorker(repos.deliveries, ctx.services.signingKeys, new UrlGuard({ allowLoopback: true, resolve: options.resolve }), ctx.clock, createLogger({ level: 'silent' }), {
    timeoutMs: 2000,
    ca: RECEIVER_CERT,
    random: () => 0.5,
    ...options,
  });
  workers.push(w);
  return w;
}

async function endpoint(url: string): Promise<string> {
  const now = ctx.clock.now();
  const id = newId('WHE');
  expect(await repos.endpoints.insertEndpointWithinCap({ id, orgId: ctx.orgA.orgId, name: 'Receiver', url, events: [], enabled: true, createdAt: now, updatedAt: now, deletedAt: null }, 20)).toBe(true);
  return id;
}

const order = (): WebhookOrder => ({
  orderId: newId('ORD'),
  orgId: ctx.orgA.orgId,
  merchantReference: null,
  merchantMetadata: {},
  status: 'PAID',
  provider: 'STRIPE',
  amountCents: 5800,
  customerId: 'CUS_hk60G7KOFpB5lxQ84MRIHi9l',
  customerExternalId: null,
  lines: [{ kind: 'PRICE', description: 'Pro plan', quantity: '1', unitAmountDecimal: String(5800), exactAmountDecimal: String(5800), amountCents: 5800 }],
  amountRefundedCents: 0,
  currency: 'usd',
  product: { id: newId('PRD'), name: 'Pro plan' },
  paymentLinkId: null,
  originalOrderId: null,
  providerSubscriptionId: null,
  providerPaymentId: null,
  providerStatus: null,
  createdAt: '2026-11-22T09:00:00.000Z',
  updatedAt: '2026-11-22T09:00:01.000Z',
});

async function emit(): Promise<string> {
  return ctx.testDb.database.db.transaction((trx) => enqueueWebhookEvent(trx, { orgId: ctx.orgA.orgId, type: 'order.paid', data: { order: order() } }, ctx.clock.now()));
}

async function deliveryOf(eventId: string) {
  const { records } = await repos.deliveries.listDeliveries(ctx.orgA.orgId, { eventId }, { offset: 0, limit: 10 });
  expect(records).toHaveLength(1);
  return records[0]!;
}

async function drain(w: DeliveryWorker): Promise<number> {
  let handled = 0;
  for (let n = await w.runOnce(); n > 0; n = await w.runOnce()) handled += n;
  return handled;
}

const loopbackName: Resolve = async (name) => {
  if (name === 'receiver.kassa.test' || name === 'wrong-name.kassa.test') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error(`${name} not found`), { code: 'ENOTFOUND' });
};

describe('keep-alive connections', () => {
  it('are reused: 40 deliveries, 5 at a time, take at most 5 TLS handshakes; later ones take none', async () => {
    await endpoint(receiver.url());
    const events: string[] = [];
    for (let i = 0; i < 40; i++) events.push(await emit());
    const w = worker({ batchSize: 5 });
    expect(await drain(w)).toBe(40);
    expect(receiver.received).toHaveLength(40);
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id']))).toEqual(new Set(events));
    expect(receiver.tlsConnections()).toBeGreaterThanOrEqual(1);
    expect(receiver.tlsConnections()).toBeLessThanOrEqual(5);
    const handshakes = receiver.tlsConnections();
    expect(w.pooledSockets().idle).toBe(handshakes);

    for (let i = 0; i < 5; i++) {
      const id = await emit();
      expect(await w.runOnce()).toBe(1);
      expect(await deliveryOf(id)).toMatchObject({ status: 'succeeded', attemptCount: 1 });
    }
    expect(receiver.tlsConnections()).toBe(handshakes);
  });

  it('still verify the certificate against the URL’s host, not the address connected to, and send it as SNI and Host', async () => {
    const w = worker({ resolve: loopbackName });
    await endpoint(`https://receiver.kassa.test:${receiver.port}/good`);
    const good = await emit();
    await w.runOnce();
    expect(await deliveryOf(good)).toMatchObject({ status: 'succeeded' });
    expect(receiver.received[0]!.headers.host).toBe(`receiver.kassa.test:${receiver.port}`);
    expect(receiver.received[0]!.servername).toBe('receiver.kassa.test');
    await repos.endpoints.deleteEndpoint(ctx.orgA.orgId, (await repos.endpoints.listEndpoints(ctx.orgA.orgId, { offset: 0, limit: 1 })).records[0]!.id, ctx.clock.now());

    // Same address (127.0.0.1 is in the certificate), but a name the certificate does not carry.
    await endpoint(`https://wrong-name.kassa.test:${receiver.port}/bad`);
    const bad = await emit();
    await w.runOnce();
    const delivery = await deliveryOf(bad);
    expect(delivery).toMatchObject({ status: 'pending', lastStatusCode: null });
    expect(delivery.lastError).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID|does not match certificate/);
    expect(receiver.received.map((r) => r.path)).toEqual(['/good']);
  });

  it('follow a DNS change once the TTL has passed (new connections to the new checked address)', async () => {
    // A second receiver on another loopback address, same port: which one answers shows where we connected.
    const other = await startReceiver({ host: '127.0.0.2', port: receiver.port });
    try {
      let answer = '127.0.0.1';
      const w = worker({ resolve: async () => [{ address: answer, family: 4 }], resolveTtlMs: 10_000 });
      await endpoint(`https://receiver.kassa.test:${receiver.port}/hooks`);
      await emit();
      await w.runOnce();
      answer = '127.0.0.2';
      ctx.clock.advance(9_999);
      await emit();
      await w.runOnce();
      expect(receiver.received).toHaveLength(2);
      expect(other.received).toHaveLength(0);
      ctx.clock.advance(1);
      const moved = await emit();
      await w.runOnce();
      expect(await deliveryOf(moved)).toMatchObject({ status: 'succeeded' });
      expect(other.received.map((r) => r.headers['webhook-id'])).toEqual([moved]);
      expect(receiver.received).toHaveLength(2);
      expect(receiver.tlsConnections()).toBe(1);
      expect(other.tlsConnections()).toBe(1);
      // The previous route's idle connection is closed, not kept for later.
      expect(w.pooledSockets()).toEqual({ active: 0, idle: 1 });
    } finally {
      await other.close();
    }
  });

  it('closed by the receiver while idle are not reused: the next delivery opens a new one', async () => {
    await endpoint(receiver.url());
    const w = worker();
    await emit();
    await w.runOnce();
    expect(w.pooledSockets().idle).toBe(1);
    receiver.closeConnections();
    await expect.poll(() => w.pooledSockets().idle, { timeout: 5000, interval: 10 }).toBe(0);
    const next = await emit();
    await w.runOnce();
    expect(await deliveryOf(next)).toMatchObject({ status: 'succeeded', attemptCount: 1 });
    expect(receiver.tlsConnections()).toBe(2);
  });

  it('closed by the receiver just as it is reused: sent again on a new connection within the same attempt', async () => {
    await endpoint(receiver.url());
    const w = worker();
    await emit();
    await w.runOnce();
    // Every request after the first on a connection finds the connection closing.
    receiver.hangUp = (position) => position > 0;
    const next = await emit();
    await w.runOnce();
    const delivery = await deliveryOf(next);
    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1, lastStatusCode: 200 });
    expect(delivery.attempts).toHaveLength(1);
    expect(receiver.received.map((r) => r.headers['webhook-id'])).toHaveLength(2);
    expect(receiver.received[1]!.headers['webhook-id']).toBe(next);
    expect(receiver.tlsConnections()).toBe(2);
  });

  it('a new connection that is closed without an answer is an ordinary failed attempt (no second try)', async () => {
    await endpoint(receiver.url());
    receiver.hangUp = () => true;
    const w = worker();
    const id = await emit();
    await w.runOnce();
    const delivery = await deliveryOf(id);
    expect(delivery).toMatchObject({ status: 'pending', attemptCount: 1, lastStatusCode: null });
    expect(delivery.lastError).toMatch(/ECONNRESET|socket hang up/);
    expect(receiver.tlsConnections()).toBe(1);
    expect(receiver.received).toHaveLength(0);
  });

  it('are not reused after a response body longer than the kept bytes (the rest is not read)', async () => {
    await endpoint(receiver.url());
    receiver.respond = () => ({ status: 200, body: 'x'.repeat(10_000) });
    const w = worker({ maxResponseBytes: 100 });
    const ids = [await emit()];
    await w.runOnce();
    ids.push(await emit());
    await w.runOnce();
    for (const id of ids) expect((await deliveryOf(id)).attempts[0]!.responseBody).toBe('x'.repeat(100));
    expect(receiver.tlsConnections()).toBe(2);
  });
});
