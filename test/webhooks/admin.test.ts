/**
 * Operator tools (admin API and CLI): signing-key rotation, delivery inspection, redelivery, test
 * events and `webhook listen`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { default as addFormatsModule } from 'ajv-formats';
import { loadDocument } from '../../src/http/spec.js';
import { newId } from '../../src/kernel/ids.js';
import { createLogger } from '../../src/kernel/logger.js';
import { verifyWebhook } from '../../src/client/verify-webhook.js';
import { DeliveryWorker } from '../../src/webhooks/delivery.worker.js';
import { enqueueWebhookEvent } from '../../src/webhooks/outbox.repository.js';
import type { WebhookOrder } from '../../src/webhooks/webhook.model.js';
import { UrlGuard } from '../../src/webhooks/url-guard.js';
import { KnexWebhookDeliveryRepository } from '../../src/webhooks/deliveries.repository.js';
import { createAdminClient, createContext } from '../../scripts/admin/cli.js';
import { listenOnce } from '../../scripts/admin/webhook.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { RECEIVER_CERT, startReceiver, verifyWithNodeCrypto, type Receiver } from './receiver.js';

let ctx: TestContext;
let receiver: Receiver;
let worker: DeliveryWorker;
const asA = (req: import('supertest').Test) => req.set('X-API-Key', ctx.orgA.apiKey);

beforeAll(async () => {
  ctx = await createTestContext({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true' } });
  receiver = await startReceiver();
  worker = new DeliveryWorker(
    new KnexWebhookDeliveryRepository(ctx.testDb.database.db),
    ctx.services.signingKeys,
    new UrlGuard({ allowLoopback: true }),
    ctx.clock,
    createLogger({ level: 'silent' }),
    { timeoutMs: 1000, ca: RECEIVER_CERT, random: () => 0.5 },
  );
});
afterAll(async () => {
  await receiver?.close();
  await ctx?.close();
});
afterEach(() => receiver.reset());

async function schema(name: string) {
  const doc = await loadDocument('merchant');
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormatsModule as unknown as { default: (a: unknown) => void }).default(ajv);
  return ajv.compile((doc.components!.schemas as Record<string, object>)[name]!);
}

async function endpoint(path = '/hooks/kassa', events: string[] = []): Promise<string> {
  const res = await asA(ctx.merchant.post('/v1/webhook')).send({ name: 'Ops', url: receiver.url(path), events });
  expect(res.status).toBe(201);
  return res.body.data.id;
}

function order(orgId: string): WebhookOrder {
  return {
    orderId: newId('ORD'),
    orgId,
    merchantReference: null,
    merchantMetadata: null,
    status: 'PAID',
    provider: 'CRYPTO',
    amountCents: 25_000_000,
    customerId: 'CUS_hk60G7KOFpB5lxQ84MRIHi9l',
    customerExternalId: null,
    lines: [{ kind: 'PRICE', description: 'Pro plan', quantity: '1', unitAmountDecimal: String(25_000_000), exactAmountDecimal: String(25_000_000), amountCents: 25_000_000 }],
    amountRefundedCents: 0,
    currency: 'usdc',
    product: { id: null, name: 'Conference ticket' },
    paymentLinkId: null,
    crypto: {
      chainId: 'eip155:8453',
      assetSymbol: 'USDC',
      txHash: `0x${'4e'.repeat(32)}`,
      payer: 'eip155:8453:0x1f9840a85d5aF5bf1D1762F925BDADdC4201F984',
      recipient: 'eip155:8453:0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
    },
    originalOrderId: null,
    providerSubscriptionId: null,
    providerPaymentId: null,
    providerStatus: null,
    createdAt: '2026-11-22T09:00:00.000Z',
    updatedAt: '2026-11-22T09:00:00.000Z',
  };
}

const emit = (orgId = ctx.orgA.orgId) =>
  ctx.testDb.database.db.transaction((trx) => enqueueWebhookEvent(trx, { orgId, type: 'order.paid', data: { order: order(orgId) } }, ctx.clock.now()));

describe('admin API: every webhook operation needs the admin token', () => {
  it('answers 401 without it', async () => {
    const { default: supertest } = await import('supertest');
    const bare = supertest(ctx.apps.admin);
    expect((await bare.post('/v1/webhooks/signing-key/rotate')).status).toBe(401);
    expect((await bare.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-deliveries`)).status).toBe(401);
    expect((await bare.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-events`)).status).toBe(401);
    expect((await bare.post('/v1/webhook-endpoints/WHE_x/test')).status).toBe(401);
  });
});

describe('deliveries, redelivery and test events', () => {
  it('lists an organization’s deliveries with their attempts, filters by event, and reads one', async () => {
    const id = await endpoint();
    receiver.respond = (_r, i) => (i === 0 ? { status: 503, body: 'busy' } : { status: 200, body: 'ok' });
    const eventId = await emit();
    const other = await emit();
    await worker.runOnce();
    ctx.clock.advance(30_000);
    await worker.runOnce();

    const list = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-deliveries?event=${eventId}`);
    expect(list.status).toBe(200);
    expect(list.body.data).toMatchObject({ total: 1, page: 1, size: 20 });
    const delivery = list.body.data.records[0];
    expect(delivery).toMatchObject({ orgId: ctx.orgA.orgId, eventId, eventType: 'order.paid', endpointId: id, nextAttemptAt: null });
    expect(delivery.deliveryId).toMatch(/^WHD_[0-9A-Za-z]{24}$/);
    expect(delivery.attempts.length).toBeGreaterThanOrEqual(1);
    expect(delivery.attempts[0]).toMatchObject({ attemptNumber: 1, url: receiver.url(), durationMs: expect.any(Number), error: null });

    const all = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-deliveries`);
    expect(all.body.data.records.map((d: { eventId: string }) => d.eventId)).toEqual(expect.arrayContaining([eventId, other]));
    const one = await ctx.admin.get(`/v1/webhook-deliveries/${delivery.deliveryId}`);
    expect(one.status).toBe(200);
    expect(one.body.data).toEqual(delivery);

    // Another organization's list does not show them; unknown ids are 404.
    const ofB = await ctx.admin.get(`/v1/orgs/${ctx.orgB.orgId}/webhook-deliveries`);
    expect(ofB.body.data.total).toBe(0);
    expect((await ctx.admin.get('/v1/orgs/ORG_000000000000000000000000/webhook-deliveries')).status).toBe(404);
    expect((await ctx.admin.get('/v1/webhook-deliveries/WHD_000000000000000000000000')).status).toBe(404);
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-deliveries?bogus=1`)).status).toBe(400);
    await asA(ctx.merchant.delete(`/v1/webhook/${id}`));
  });

  it('redelivers an event as a new delivery with the same webhook-id', async () => {
    const id = await endpoint();
    receiver.respond = () => ({ status: 400 });
    const eventId = await emit();
    await worker.runOnce();
    const [failed] = (await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-deliveries?event=${eventId}`)).body.data.records;
    expect(failed.status).toBe('failed');

    receiver.respond = () => ({ status: 200 });
    const res = await ctx.admin.post(`/v1/webhook-deliveries/${failed.deliveryId}/redeliver`);
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ eventId, endpointId: id, status: 'pending', attemptCount: 0, attempts: [] });
    expect(res.body.data.deliveryId).not.toBe(failed.deliveryId);
    await worker.runOnce();
    expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId]);
    const after = (await ctx.admin.get(`/v1/webhook-deliveries/${res.body.data.deliveryId}`)).body.data;
    expect(after).toMatchObject({ status: 'succeeded', attemptCount: 1 });
    // The original keeps its history.
    expect((await ctx.admin.get(`/v1/webhook-deliveries/${failed.deliveryId}`)).body.data.status).toBe('failed');

    expect((await asA(ctx.merchant.patch(`/v1/webhook/${id}`)).send({ enabled: false })).status).toBe(200);
    const disabled = await ctx.admin.post(`/v1/webhook-deliveries/${failed.deliveryId}/redeliver`);
    expect(disabled.status).toBe(409);
    await asA(ctx.merchant.delete(`/v1/webhook/${id}`));
    expect((await ctx.admin.post(`/v1/webhook-deliveries/${failed.deliveryId}/redeliver`)).status).toBe(409);
    expect((await ctx.admin.post('/v1/webhook-deliveries/WHD_000000000000000000000000/redeliver')).status).toBe(404);
  });

  it('sends a signed webhook.test event to one endpoint, whatever its selection; our verifier accepts it', async () => {
    const id = await endpoint('/test-only', ['subscription.ended']);
    const res = await ctx.admin.post(`/v1/webhook-endpoints/${id}/test`);
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ endpointId: id, eventType: 'webhook.test', status: 'pending' });
    await worker.runOnce();
    expect(receiver.received).toHaveLength(1);
    const got = receiver.received[0]!;
    const keyDoc = (await ctx.platform.get('/v1/webhooks/signing-key')).body;
    const event = verifyWebhook(got.rawBody, got.headers, keyDoc, { now: ctx.clock.now() });
    expect(event).toMatchObject({ type: 'webhook.test', endpoint: { id, name: 'Ops' }, data: { test: { requestedAt: ctx.clock.now().toISOString() } } });
    const validate = await schema('TestWebhookEvent');
    expect(validate(event), JSON.stringify(validate.errors)).toBe(true);
    expect(verifyWithNodeCrypto(got, keyDoc.data.keys)).toHaveLength(1);

    expect((await asA(ctx.merchant.patch(`/v1/webhook/${id}`)).send({ enabled: false })).status).toBe(200);
    expect((await ctx.admin.post(`/v1/webhook-endpoints/${id}/test`)).status).toBe(409);
    await asA(ctx.merchant.delete(`/v1/webhook/${id}`));
    expect((await ctx.admin.post(`/v1/webhook-endpoints/${id}/test`)).status).toBe(404);
  });
});

describe('signing-key rotation', () => {
  it('makes a new key current and keeps the previous one published for the grace period', async () => {
    const before = (await ctx.platform.get('/v1/webhooks/signing-key')).body.data;
    const res = await ctx.admin.post('/v1/webhooks/signing-key/rotate').send({ graceSeconds: 600 });
    expect(res.status).toBe(201);
    expect(res.body.data.retiredKeyId).toBe(before.keyId);
    expect(res.body.data.keys).toEqual([
      expect.objectContaining({ keyId: res.body.data.keyId, current: true, retiredAt: null, publishUntil: null }),
      expect.objectContaining({ keyId: before.keyId, current: false, retiredAt: ctx.clock.now().toISOString(), publishUntil: new Date(ctx.clock.now().getTime() + 600_000).toISOString() }),
    ]);
    const during = (await ctx.platform.get('/v1/webhooks/signing-key')).body.data;
    expect(during.keyId).toBe(res.body.data.keyId);
    expect(during.keys.map((k: { kid: string }) => k.kid)).toEqual([res.body.data.keyId, before.keyId]);
    ctx.clock.advance(600_001);
    const after = (await ctx.platform.get('/v1/webhooks/signing-key')).body.data;
    expect(after.keys.map((k: { kid: string }) => k.kid)).toEqual([res.body.data.keyId]);

    expect((await ctx.admin.post('/v1/webhooks/signing-key/rotate').send({ graceSeconds: -1 })).status).toBe(400);
    expect((await ctx.admin.post('/v1/webhooks/signing-key/rotate').send({ grace: 1 })).status).toBe(400);
    // Without a body: the default 7-day grace.
    const defaulted = await ctx.admin.post('/v1/webhooks/signing-key/rotate');
    expect(defaulted.status).toBe(201);
    expect(Date.parse(defaulted.body.data.keys[1].publishUntil) - ctx.clock.now().getTime()).toBe(7 * 24 * 3600_000);
  });
});

describe('webhook listen', () => {
  it('starts from now, then returns each new event of the organization signed for local forwarding', async () => {
    await emit(); // before listening: not replayed
    const start = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-events`);
    expect(start.status).toBe(200);
    expect(start.body.data.events).toEqual([]);
    const cursor = start.body.data.cursor;

    const first = await emit();
    await emit(ctx.orgB.orgId); // another organization's
    const second = await emit();
    const feed = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-events?after=${cursor}`);
    expect(feed.status).toBe(200);
    expect(feed.body.data.events.map((e: { eventId: string }) => e.eventId)).toEqual([first, second]);
    const keyDoc = (await ctx.platform.get('/v1/webhooks/signing-key')).body;
    const validate = await schema('OrderWebhookEvent');
    for (const e of feed.body.data.events) {
      const event = verifyWebhook(e.body, e.headers, keyDoc, { now: ctx.clock.now() });
      expect(event).toMatchObject({ type: 'order.paid', endpoint: { id: 'WHE_000000000000000000listen', name: 'webhook listen (CLI)' } });
      expect(validate(event), JSON.stringify(validate.errors)).toBe(true);
    }
    const next = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-events?after=${feed.body.data.cursor}`);
    expect(next.body.data).toEqual({ cursor: feed.body.data.cursor, events: [] });
    expect((await ctx.admin.get('/v1/orgs/ORG_000000000000000000000000/webhook-events')).status).toBe(404);
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-events?after=-1`)).status).toBe(400);
  });

  it('the CLI forwards them to a local http receiver, which verifies them with node:crypto', async () => {
    const server = http.createServer();
    const admin = ctx.apps.admin.listen(0, '127.0.0.1');
    const forwarded: Array<{ headers: http.IncomingHttpHeaders; rawBody: Buffer }> = [];
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        forwarded.push({ headers: req.headers, rawBody: Buffer.concat(chunks) });
        res.writeHead(forwarded.length === 1 ? 200 : 500).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      await new Promise<void>((resolve) => (admin.listening ? resolve() : admin.once('listening', resolve)));
      const cli = createContext(
        createAdminClient({ baseUrl: `http://127.0.0.1:${(admin.address() as AddressInfo).port}`, token: () => ctx.adminToken }),
        () => {},
      );
      const forwardUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/local/hooks`;
      const start = await listenOnce(cli, ctx.orgA.orgId, undefined, forwardUrl);
      expect(start.forwarded).toEqual([]);
      const a = await emit();
      const b = await emit();
      const round = await listenOnce(cli, ctx.orgA.orgId, start.cursor, forwardUrl);
      expect(round.forwarded.map((f) => [f.eventId, f.type, f.status, f.error])).toEqual([
        [a, 'order.paid', 200, null],
        [b, 'order.paid', 500, null],
      ]);
      expect(round.cursor).toBeGreaterThan(start.cursor);
      const keys = (await ctx.platform.get('/v1/webhooks/signing-key')).body.data.keys;
      for (const f of forwarded) {
        expect(verifyWithNodeCrypto({ method: 'POST', path: '', headers: f.headers, rawBody: f.rawBody, json: undefined }, keys)).toHaveLength(keys.length);
      }
      expect(forwarded.map((f) => f.headers['webhook-id'])).toEqual([a, b]);
      expect((await listenOnce(cli, ctx.orgA.orgId, round.cursor, forwardUrl)).forwarded).toEqual([]);
    } finally {
      admin.close();
      server.close();
    }
  });
});
