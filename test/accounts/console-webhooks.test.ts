/**
 * The console's webhook operations (openapi/console.yaml, tag Webhooks): the delivery log with
 * its filters and keyset pages, one delivery with payload and attempts, redelivery, test events
 * and the signing key — by role, across two organizations, with the session's CSRF checks, and
 * in the audit log.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/kernel/ids.js';
import { KnexWebhookDeliveryRepository } from '../../src/webhooks/deliveries.repository.js';
import { enqueueWebhookEvent } from '../../src/webhooks/outbox.repository.js';
import type { WebhookOrder } from '../../src/webhooks/webhook.model.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { ORIGIN, as, sessionCookieOf, signIn, signUp, type Member } from './helpers.js';

let ctx: TestContext;
let dev: Member;
let support: Member;
let viewer: Member;
let ownerA: Member;
let ownerB: Member;
let endpointA: string;
let endpointB: string;
const URL_A = 'https://127.0.0.1:9/hooks/a';

const asA = (req: import('supertest').Test) => req.set('X-API-Key', ctx.orgA.apiKey);

async function emit(orgId: string, orderId = newId('ORD'), type: 'order.paid' | 'order.failed' = 'order.paid'): Promise<string> {
  return ctx.testDb.database.db.transaction((trx) => enqueueWebhookEvent(trx, { orgId, type, data: { order: { orderId, orgId, status: 'PAID' } as unknown as WebhookOrder } }, ctx.clock.now()));
}

async function refresh(member: Member): Promise<Member> {
  const res = await signIn(ctx, member.email);
  if (res.status !== 200) throw new Error(`sign-in: ${res.status} ${res.text}`);
  return { ...member, cookie: sessionCookieOf(res)!, csrf: res.body.data.csrfToken };
}

beforeAll(async () => {
  ctx = await createTestContext({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true' } });
  [dev, support, viewer, ownerA, ownerB] = await Promise.all([
    signUp(ctx, ctx.orgA.orgId, 'developer'),
    signUp(ctx, ctx.orgA.orgId, 'support'),
    signUp(ctx, ctx.orgA.orgId, 'viewer'),
    signUp(ctx, ctx.orgA.orgId, 'owner'),
    signUp(ctx, ctx.orgB.orgId, 'owner'),
  ]);
  endpointA = (await ctx.services.webhooks.createEndpoint(ctx.orgA.orgId, { name: 'Shop A', url: URL_A })).id;
  endpointB = (await ctx.services.webhooks.createEndpoint(ctx.orgB.orgId, { name: 'Shop B', url: 'https://127.0.0.1:9/hooks/b' })).id;
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});
// Tests move the clock by a day: members sign in afresh before each.
beforeEach(async () => {
  const fresh = await Promise.all([dev, support, viewer, ownerA, ownerB].map(refresh));
  [dev, support, viewer, ownerA, ownerB] = fresh as [Member, Member, Member, Member, Member];
});

describe('the delivery log', () => {
  it('lists the organization’s deliveries newest first, filtered, in keyset pages without repeats', async () => {
    const orderId = newId('ORD');
    const first = await emit(ctx.orgA.orgId, orderId);
    ctx.clock.advance(1000);
    const second = await emit(ctx.orgA.orgId, undefined, 'order.failed');
    ctx.clock.advance(1000);
    const third = await emit(ctx.orgA.orgId);
    ctx.clock.advance(1000);
    await emit(ctx.orgB.orgId, orderId);

    const all = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries'));
    expect(all.status).toBe(200);
    const events = all.body.data.records.map((d: { eventId: string }) => d.eventId);
    expect(events.slice(0, 3)).toEqual([third, second, first]);
    expect(all.body.data.records.every((d: { endpointId: string }) => d.endpointId === endpointA)).toBe(true);
    expect(all.body.data.records[2]).toMatchObject({ eventId: first, eventType: 'order.paid', orderId, status: 'pending', attemptCount: 0, nextAttemptAt: expect.any(String), completedAt: null });

    // Pages of one, keyset: each page after the previous page's cursor, none repeated.
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ size: 1, ...(cursor ? { starting_after: cursor } : {}) }));
      expect(res.status).toBe(200);
      seen.push(...res.body.data.records.map((d: { deliveryId: string }) => d.deliveryId));
      cursor = res.body.data.nextCursor;
      expect(res.body.data.hasMore).toBe(cursor !== null);
    } while (cursor);
    expect(seen).toEqual(all.body.data.records.map((d: { deliveryId: string }) => d.deliveryId));

    const byOrder = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ order_id: orderId }));
    expect(byOrder.body.data.records.map((d: { eventId: string }) => d.eventId)).toEqual([first]);
    const byType = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ event_type: 'order.failed' }));
    expect(byType.body.data.records.map((d: { eventId: string }) => d.eventId)).toEqual([second]);
    const byEvent = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ event_id: third, endpoint_id: endpointA, status: 'pending' }));
    expect(byEvent.body.data.records.map((d: { eventId: string }) => d.eventId)).toEqual([third]);
    const none = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ status: 'succeeded' }));
    expect(none.body.data).toEqual({ records: [], hasMore: false, nextCursor: null });
    // Another organization's endpoint matches nothing here.
    const foreign = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ endpoint_id: endpointB }));
    expect(foreign.body.data.records).toEqual([]);
  });

  it('refuses a cursor that is not one of the organization’s deliveries (400) and a bad filter (400)', async () => {
    await emit(ctx.orgB.orgId);
    const ofB = await as(ownerB, ctx.merchant.get('/v1/console/webhook-deliveries'));
    const foreignCursor = ofB.body.data.records[0].deliveryId;
    const res = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ starting_after: foreignCursor }));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.message).toContain('starting_after');
    expect((await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ status: 'lost' }))).status).toBe(400);
  });
});

describe('one delivery', () => {
  it('shows the endpoint, the exact envelope and every attempt with its response excerpt', async () => {
    const orderId = newId('ORD');
    const eventId = await emit(ctx.orgA.orgId, orderId);
    const listed = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ event_id: eventId }));
    const deliveryId = listed.body.data.records[0].deliveryId;
    await new KnexWebhookDeliveryRepository(ctx.testDb.database.db).insertAttempt({
      deliveryId,
      attemptNumber: 1,
      url: URL_A,
      statusCode: 503,
      durationMs: 84,
      responseBody: 'upstream unavailable',
      error: null,
      attemptedAt: ctx.clock.now(),
    });
    const res = await as(dev, ctx.merchant.get(`/v1/console/webhook-deliveries/${deliveryId}`));
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({
      deliveryId,
      eventId,
      eventType: 'order.paid',
      orderId,
      endpoint: { id: endpointA, name: 'Shop A', url: URL_A, deleted: false },
      payload: { type: 'order.paid', apiVersion: expect.any(String), endpoint: { id: endpointA, name: 'Shop A', orgId: ctx.orgA.orgId }, data: { order: { orderId } } },
      attempts: [{ attemptNumber: 1, statusCode: 503, responseBody: 'upstream unavailable', durationMs: 84, error: null }],
    });
  });

  it('another organization’s delivery and an unknown id are the same 404', async () => {
    const eventId = await emit(ctx.orgB.orgId);
    const ofB = await as(ownerB, ctx.merchant.get('/v1/console/webhook-deliveries').query({ event_id: eventId }));
    const foreign = ofB.body.data.records[0].deliveryId;
    const a = await as(dev, ctx.merchant.get(`/v1/console/webhook-deliveries/${foreign}`));
    const b = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries/WHD_000000000000000000000000'));
    expect(a.status).toBe(404);
    expect(b.status).toBe(404);
    expect(a.body.error).toEqual(b.body.error);
    expect((await as(dev, ctx.merchant.post(`/v1/console/webhook-deliveries/${foreign}/redeliver`))).status).toBe(404);
    expect((await as(dev, ctx.merchant.post(`/v1/console/webhook-endpoints/${endpointB}/test`))).status).toBe(404);
  });
});

describe('redelivery and test events', () => {
  it('redelivers as a new pending delivery of the same event, recorded in the audit log', async () => {
    const eventId = await emit(ctx.orgA.orgId);
    const listed = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ event_id: eventId }));
    const original = listed.body.data.records[0].deliveryId;
    const res = await as(dev, ctx.merchant.post(`/v1/console/webhook-deliveries/${original}/redeliver`));
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ eventId, endpointId: endpointA, status: 'pending', attemptCount: 0 });
    expect(res.body.data.deliveryId).not.toBe(original);
    const after = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ event_id: eventId }));
    expect(after.body.data.records).toHaveLength(2);

    const audit = await as(ownerA, ctx.merchant.get('/v1/console/audit-log'));
    const entry = audit.body.data.records.find((e: { action: string; targetId: string }) => e.action === 'redeliverConsoleWebhookDelivery' && e.targetId === original);
    expect(entry).toMatchObject({ actorType: 'user', actorId: dev.userId, targetType: 'webhook-deliveries' });
  });

  it('sends a test event to one endpoint; a disabled endpoint is 409, for the test and for a redelivery', async () => {
    const res = await as(dev, ctx.merchant.post(`/v1/console/webhook-endpoints/${endpointA}/test`));
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ eventType: 'webhook.test', endpointId: endpointA, status: 'pending', orderId: null });
    const detail = await as(dev, ctx.merchant.get(`/v1/console/webhook-deliveries/${res.body.data.deliveryId}`));
    expect(detail.body.data.payload.data.test.message).toContain('Kassa console');

    await asA(ctx.merchant.patch(`/v1/webhook/${endpointA}`)).send({ enabled: false });
    try {
      const test = await as(dev, ctx.merchant.post(`/v1/console/webhook-endpoints/${endpointA}/test`));
      expect(test.status).toBe(409);
      expect(test.body.error.code).toBe('CONFLICT');
      const again = await as(dev, ctx.merchant.post(`/v1/console/webhook-deliveries/${res.body.data.deliveryId}/redeliver`));
      expect(again.status).toBe(409);
    } finally {
      await asA(ctx.merchant.patch(`/v1/webhook/${endpointA}`)).send({ enabled: true });
    }
  });
});

describe('the signing key', () => {
  it('lists the published keys; a member rotates at most once a day (409 before), with a grace of 1 to 7 days', async () => {
    const listed = await as(dev, ctx.merchant.get('/v1/console/webhook-signing-keys'));
    expect(listed.status).toBe(200);
    expect(listed.body.data[0]).toMatchObject({ current: true, retiredAt: null, publicKey: expect.stringMatching(/^whpk_/) });
    const current = listed.body.data[0].keyId;

    const early = await as(dev, ctx.merchant.post('/v1/console/webhook-signing-keys/rotate')).send({});
    expect(early.status).toBe(409);
    expect(early.body.error.message).toContain('24 hours');
    expect((await as(dev, ctx.merchant.post('/v1/console/webhook-signing-keys/rotate')).send({ graceSeconds: 8 * 86400 })).status).toBe(400);

    ctx.clock.advance(24 * 3600_000 + 1);
    dev = await refresh(dev);
    // A member cannot retire the shared key at once (issue 37, item 11): the grace is at least a day.
    for (const graceSeconds of [0, 3600, 86399]) {
      const refused = await as(dev, ctx.merchant.post('/v1/console/webhook-signing-keys/rotate')).send({ graceSeconds });
      expect(refused.status, `graceSeconds ${graceSeconds}`).toBe(400);
      expect(refused.body.error.message).toContain('graceSeconds');
    }
    expect((await ctx.platform.get('/v1/webhooks/signing-key')).body.data.keyId).toBe(current);
    const rotated = await as(dev, ctx.merchant.post('/v1/console/webhook-signing-keys/rotate')).send({ graceSeconds: 86400 });
    expect(rotated.status).toBe(201);
    expect(rotated.body.data.retiredKeyId).toBe(current);
    expect(rotated.body.data.keys.map((k: { keyId: string }) => k.keyId)).toEqual([rotated.body.data.keyId, current]);
    // Published for receivers at once.
    const doc = await ctx.platform.get('/v1/webhooks/signing-key');
    expect(doc.body.data.keyId).toBe(rotated.body.data.keyId);
    expect((await as(dev, ctx.merchant.post('/v1/console/webhook-signing-keys/rotate'))).status).toBe(409);

    ownerA = await refresh(ownerA);
    const audit = await as(ownerA, ctx.merchant.get('/v1/console/audit-log'));
    const entry = audit.body.data.records.find((e: { action: string }) => e.action === 'rotateConsoleWebhookSigningKey');
    expect(entry).toMatchObject({ actorType: 'user', actorId: dev.userId, summary: expect.stringContaining('graceSeconds') });
    expect(JSON.stringify(audit.body)).not.toContain('86400');
  });
});

describe('roles, sessions and CSRF', () => {
  const reads = ['/v1/console/webhook-deliveries', '/v1/console/webhook-signing-keys'];

  it('support and viewer are refused reads and writes (403); the developer is allowed', async () => {
    for (const member of [support, viewer]) {
      for (const path of reads) expect((await as(member, ctx.merchant.get(path))).status).toBe(403);
      expect((await as(member, ctx.merchant.post(`/v1/console/webhook-endpoints/${endpointA}/test`))).status).toBe(403);
      expect((await as(member, ctx.merchant.post('/v1/console/webhook-signing-keys/rotate'))).status).toBe(403);
      expect((await as(member, ctx.merchant.post('/v1/console/webhook-deliveries/WHD_000000000000000000000000/redeliver'))).status).toBe(403);
    }
    for (const path of reads) expect((await as(dev, ctx.merchant.get(path))).status).toBe(200);
  });

  it('no session is 401; a write without the CSRF token or from another origin is 403 and changes nothing', async () => {
    expect((await ctx.merchant.get('/v1/console/webhook-deliveries')).status).toBe(401);
    expect((await ctx.merchant.post(`/v1/console/webhook-endpoints/${endpointA}/test`).set('Origin', ORIGIN)).status).toBe(401);
    const before = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ event_type: 'webhook.test' }));
    const noCsrf = await ctx.merchant.post(`/v1/console/webhook-endpoints/${endpointA}/test`).set('Cookie', dev.cookie).set('Origin', ORIGIN);
    expect(noCsrf.status).toBe(403);
    const crossSite = await ctx.merchant.post(`/v1/console/webhook-endpoints/${endpointA}/test`).set('Cookie', dev.cookie).set('Origin', 'https://evil.example').set('X-CSRF-Token', dev.csrf);
    expect(crossSite.status).toBe(403);
    const after = await as(dev, ctx.merchant.get('/v1/console/webhook-deliveries').query({ event_type: 'webhook.test' }));
    expect(after.body.data.records.length).toBe(before.body.data.records.length);
  });
});
