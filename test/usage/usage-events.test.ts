/**
 * POST /v1/usage-events (issue 38 §3): per-event answers (accepted, duplicate, rejected with a
 * reason), exactly once by id per organization whatever the retries, CloudEvents' shape, future
 * timestamps, the closed-period grace window, unknown customers, and the batch's limits.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { buy, monthlyPrice, oneTimePrice, setExternalId } from './helpers.js';

let ctx: TestContext;
let lena: string; // one-time buyer: billed by UTC calendar month
let max: string; // monthly subscriber since the context's start (2026-11-22T09:00Z)
let n = 0;
const START = '2026-11-22T09:00:00.000Z';

beforeAll(async () => {
  ctx = await createTestContext();
  lena = (await buy(ctx, 'lena@example.com', await oneTimePrice(ctx, ctx.orgA.orgId), ctx.orgA.apiKey)).customerId;
  max = (await buy(ctx, 'max@example.com', (await monthlyPrice(ctx, ctx.orgA.orgId)).priceId, ctx.orgA.apiKey)).customerId;
  expect((await setExternalId(ctx, lena, 'user_lena', ctx.orgA.apiKey)).status).toBe(200);
  expect((await setExternalId(ctx, max, 'user_max', ctx.orgA.apiKey)).status).toBe(200);
});
afterAll(async () => {
  await ctx?.close();
});

const send = (events: unknown[], apiKey = ctx.orgA.apiKey) => ctx.merchant.post('/v1/usage-events').set('X-API-Key', apiKey).send({ events });
const event = (over: Record<string, unknown> = {}) => ({
  id: `evt_${++n}`,
  customer: { externalId: 'user_lena' },
  name: 'api_request',
  timestamp: '2026-11-22T08:59:00.000Z',
  properties: { tokens: 10 },
  ...over,
});
const stored = async (orgId = ctx.orgA.orgId) => ctx.testDb.database.db('usage_events').where('org_id', orgId).select('id', 'customer_id', 'name', 'properties');

describe('accepted, duplicate, rejected', () => {
  it('answers per event in order, stores each id once, and says why a rejected one was refused', async () => {
    ctx.clock.set(START);
    const a = event();
    const b = event({ customer: { customerId: max } });
    const ghost = event({ customer: { externalId: 'nobody' } });
    const ghostId = event({ customer: { customerId: 'CUS_000000000000000000000000' } });
    const future = event({ timestamp: '2026-11-22T09:06:00.000Z' });
    const skew = event({ timestamp: '2026-11-22T09:04:59.000Z' });
    const first = await send([a, b, ghost, ghostId, future, skew, { ...a, properties: { tokens: 999 } }]);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.data).toMatchObject({ accepted: 3, duplicates: 1, rejected: 3 });
    expect(first.body.data.results.map((r: { id: string; status: string; reason: { code: string } | null }) => [r.id, r.status, r.reason?.code ?? null])).toEqual([
      [a.id, 'ACCEPTED', null],
      [b.id, 'ACCEPTED', null],
      [ghost.id, 'REJECTED', 'UNKNOWN_CUSTOMER'],
      [ghostId.id, 'REJECTED', 'UNKNOWN_CUSTOMER'],
      [future.id, 'REJECTED', 'FUTURE_TIMESTAMP'],
      [skew.id, 'ACCEPTED', null],
      [a.id, 'DUPLICATE', null],
    ]);
    expect(first.body.data.results[2].reason.message).toContain('nobody');

    // The retry (all of it, changed or not) stores nothing more; the first version of `a` stays.
    const retry = await send([a, b, { ...skew, properties: { tokens: 1 } }]);
    expect(retry.body.data).toMatchObject({ accepted: 0, duplicates: 3, rejected: 0 });
    const rows = await stored();
    expect(rows.filter((r) => r.id === a.id)).toEqual([{ id: a.id, customer_id: lena, name: 'api_request', properties: { tokens: 10 } }]);
    expect(rows.map((r) => r.id).sort()).toEqual([a.id, b.id, skew.id].sort());

    // A rejected event is not stored: once its customer exists it is accepted with the same id.
    expect((await send([ghost])).body.data.results[0].status).toBe('REJECTED');
  });

  it('takes CloudEvents\' JSON shape (type → name, time → timestamp, subject → externalId, data → properties)', async () => {
    ctx.clock.set(START);
    const cloud = { specversion: '1.0', id: `ce_${++n}`, source: 'my-app', type: 'llm_tokens', time: '2026-11-22T08:30:00Z', subject: 'user_max', data: { tokens: 7, model: 'gpt-4o' } };
    const res = await send([cloud, event({ customer: { customerId: max } })]);
    expect(res.body.data).toMatchObject({ accepted: 2, rejected: 0 });
    const row = (await stored()).find((r) => r.id === cloud.id);
    expect(row).toEqual({ id: cloud.id, customer_id: max, name: 'llm_tokens', properties: { tokens: 7, model: 'gpt-4o' } });
    expect((await send([cloud])).body.data.results[0].status).toBe('DUPLICATE');
  });

  it('keeps organizations apart: the same id in another organization is another event; a customer of another organization is unknown', async () => {
    ctx.clock.set(START);
    const shared = event();
    expect((await send([shared])).body.data.accepted).toBe(1);
    const inB = await send([{ ...shared, customer: { customerId: lena } }], ctx.orgB.apiKey);
    expect(inB.body.data.results[0]).toMatchObject({ status: 'REJECTED', reason: { code: 'UNKNOWN_CUSTOMER' } });
    expect(await stored(ctx.orgB.orgId)).toEqual([]);
  });
});

describe('billing periods and the 1-hour grace window', () => {
  it('calendar months for a customer without a subscription: last month accepted until 01:00 of the 1st, then PERIOD_CLOSED', async () => {
    const lastMonth = (id: string) => event({ id, timestamp: '2026-11-30T23:59:00.000Z' });
    ctx.clock.set('2026-12-01T00:59:59.000Z');
    expect((await send([lastMonth(`late_${++n}`)])).body.data.results[0].status).toBe('ACCEPTED');
    const twoAgo = await send([event({ timestamp: '2026-10-31T12:00:00.000Z' })]);
    expect(twoAgo.body.data.results[0]).toMatchObject({ status: 'REJECTED', reason: { code: 'PERIOD_CLOSED' } });
    ctx.clock.set('2026-12-01T01:00:00.000Z');
    const tooLate = await send([lastMonth(`late_${++n}`)]);
    expect(tooLate.body.data.results[0]).toMatchObject({ status: 'REJECTED', reason: { code: 'PERIOD_CLOSED' } });
    expect(tooLate.body.data.results[0].reason.message).toContain('2026-12-01T00:00:00.000Z');
    // This month's events are accepted whenever they arrive.
    expect((await send([event({ timestamp: '2026-12-01T00:00:00.000Z' })])).body.data.accepted).toBe(1);
  });

  it('a retry of an event stored in time is a DUPLICATE after its period closed, never a rejection', async () => {
    ctx.clock.set('2026-12-01T00:30:00.000Z');
    const late = event({ timestamp: '2026-11-30T23:00:00.000Z' });
    expect((await send([late])).body.data.accepted).toBe(1);
    ctx.clock.set('2026-12-02T00:00:00.000Z');
    expect((await send([late])).body.data.results[0]).toEqual({ id: late.id, status: 'DUPLICATE', reason: null });
  });

  it('a subscriber\'s periods are the subscription\'s: events before its current period start are refused once the grace hour is over', async () => {
    // max's subscription period: 2026-11-22T09:00Z → 2026-12-22T09:00Z; before it is a period that closed at its start.
    ctx.clock.set('2026-11-22T09:30:00.000Z');
    expect((await send([event({ customer: { customerId: max }, timestamp: '2026-11-22T08:00:00.000Z' })])).body.data.accepted).toBe(1);
    ctx.clock.set('2026-11-22T10:00:00.000Z');
    const refused = await send([event({ customer: { customerId: max }, timestamp: '2026-11-22T08:00:00.000Z' })]);
    expect(refused.body.data.results[0]).toMatchObject({ status: 'REJECTED', reason: { code: 'PERIOD_CLOSED' } });
    // lena (calendar month) is not affected by max's period at the same instant.
    expect((await send([event({ timestamp: '2026-11-22T08:00:00.000Z' })])).body.data.accepted).toBe(1);
  });
});

describe('limits and permissions', () => {
  it('refuses a malformed batch whole (400): none, too many, a nested property, a missing field, both customer names', async () => {
    ctx.clock.set(START);
    const before = (await stored()).length;
    const tooMany = Array.from({ length: 1001 }, (_, i) => ({ id: `m${i}`, customer: { externalId: 'user_lena' }, name: 'x', timestamp: START }));
    for (const events of [[], tooMany, [event({ properties: { nested: { a: 1 } } })], [{ ...event(), name: undefined }], [event({ customer: { externalId: 'user_lena', customerId: lena } })], [event({ timestamp: 'yesterday' })]]) {
      const res = await send(events);
      expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
    }
    expect((await stored()).length).toBe(before);
  });

  it('names the mistake of the shape the event is in, not the other shape’s missing fields', async () => {
    // Before: "body.events.0.timestamp must match format \"date-time\"; body.events.0.specversion must
    // have required property 'specversion'; body.events.0 must match exactly one schema in oneOf".
    const kassa = await send([event({ timestamp: 'yesterday' })]);
    expect(kassa.status).toBe(400);
    expect(kassa.body.error.message).toBe('body.events.0.timestamp must match format "date-time"');
    const cloud = await send([{ specversion: '1.0', id: 'ce_bad', source: 'app', type: 'llm_tokens', subject: 'user_lena', time: 'yesterday', data: { tokens: 1 } }]);
    expect(cloud.status).toBe(400);
    expect(cloud.body.error.message).toBe('body.events.0.time must match format "date-time"');
    // Neither shape: every line stays.
    const neither = await send([{ id: 'x' }]);
    expect(neither.status).toBe(400);
    expect(neither.body.error.message).toContain('must match exactly one schema in oneOf');
  });

  it('takes 1,000 events in one batch (up to 1 MiB), refuses a larger body (413)', async () => {
    ctx.clock.set(START);
    const batch = Array.from({ length: 1000 }, (_, i) => ({ id: `bulk_${i}`, customer: { externalId: 'user_lena' }, name: 'bulk', timestamp: START, properties: { i, note: 'x'.repeat(500) } }));
    const res = await send(batch);
    expect(res.status).toBe(200);
    expect(res.body.data.accepted).toBe(1000);
    const huge = Array.from({ length: 1000 }, (_, i) => ({ id: `huge_${i}`, customer: { externalId: 'user_lena' }, name: 'bulk', timestamp: START, properties: { a: 'x'.repeat(1000), b: 'y'.repeat(100) } }));
    expect((await send(huge)).status).toBe(413);
  });

  it('needs usage:write (403)', async () => {
    const readOnly = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'meters only', permissions: ['meters:read'] });
    expect((await send([event()], readOnly.key)).status).toBe(403);
  });
});
