/**
 * Retention of webhook history: settled events (every delivery succeeded or failed) older than
 * WEBHOOK_RETENTION_DAYS are deleted with their deliveries and attempts; an event with a delivery
 * still pending stays, however old.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { enqueueWebhookEvent } from '../../src/webhooks/outbox.repository.js';
import { workerJobs } from '../../src/jobs.js';

let ctx: TestContext;
const db = () => ctx.testDb.database.db;

beforeAll(async () => {
  ctx = await createTestContext({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true', WEBHOOK_RETENTION_DAYS: '30' } });
  const res = await ctx.merchant.post('/v1/webhook').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Receiver', url: 'https://127.0.0.1:9/hook', events: [] });
  expect(res.status).toBe(201);
});
afterAll(async () => {
  await ctx?.close();
});

/** An event with one delivery (to the endpoint above) in the given state, and one attempt row. */
async function eventIn(status: 'pending' | 'succeeded' | 'failed'): Promise<string> {
  const eventId = await db().transaction((trx) =>
    enqueueWebhookEvent(trx, { orgId: ctx.orgA.orgId, type: 'order.paid', data: { order: { orderId: 'ORD_x' } } } as never, ctx.clock.now()),
  );
  const [delivery] = await db()('webhook_deliveries').where({ event_id: eventId }).update({ status }).returning('id');
  await db()('webhook_attempts').insert({ delivery_id: delivery.id, attempt_number: 1, url: 'https://127.0.0.1:9/hook', status_code: 200, duration_ms: 5, attempted_at: ctx.clock.now() });
  return eventId;
}

const rowsOf = async (eventId: string) => ({
  events: (await db()('webhook_events').where({ id: eventId })).length,
  deliveries: (await db()('webhook_deliveries').where({ event_id: eventId })).length,
  attempts: (await db()('webhook_attempts as a').join('webhook_deliveries as d', 'd.id', 'a.delivery_id').where('d.event_id', eventId)).length,
});

describe('webhook history retention', () => {
  it('deletes settled events past the retention period with their deliveries and attempts, and keeps the rest', async () => {
    const oldSucceeded = await eventIn('succeeded');
    const oldFailed = await eventIn('failed');
    const oldPending = await eventIn('pending');
    ctx.clock.advance(30 * 86_400_000 + 60_000);
    const recent = await eventIn('succeeded');
    const [pruned] = await db()('webhook_deliveries').where({ event_id: oldSucceeded }).pluck('id');
    expect((await ctx.admin.get(`/v1/webhook-deliveries/${pruned}`)).status).toBe(200);

    expect(await ctx.services.webhooks.pruneSettledEvents(ctx.config.webhookRetentionDays)).toBe(false);

    expect(await rowsOf(oldSucceeded)).toEqual({ events: 0, deliveries: 0, attempts: 0 });
    expect(await rowsOf(oldFailed)).toEqual({ events: 0, deliveries: 0, attempts: 0 });
    expect(await rowsOf(oldPending)).toEqual({ events: 1, deliveries: 1, attempts: 1 });
    expect(await rowsOf(recent)).toEqual({ events: 1, deliveries: 1, attempts: 1 });

    // As admin.yaml documents: a pruned delivery is 404, redelivery too, and no longer listed.
    const gone = await ctx.admin.get(`/v1/webhook-deliveries/${pruned}`);
    expect(gone.status).toBe(404);
    expect(gone.body.error.code).toBe('NOT_FOUND');
    const redeliver = await ctx.admin.post(`/v1/webhook-deliveries/${pruned}/redeliver`);
    expect(redeliver.status).toBe(404);
    expect(redeliver.body.error.code).toBe('NOT_FOUND');
    const listed = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-deliveries?event=${oldSucceeded}`);
    expect(listed.status).toBe(200);
    expect(JSON.stringify(listed.body.data)).not.toContain(pruned);
    const kept = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-deliveries?event=${oldPending}`);
    expect(JSON.stringify(kept.body.data)).toContain(oldPending);
  });

  it('works in batches: a full batch says more may be waiting', async () => {
    for (let i = 0; i < 3; i++) await eventIn('succeeded');
    ctx.clock.advance(31 * 86_400_000);
    // Three new settled events plus the first test's recent one (now old too): 2 + 2, then none.
    expect(await ctx.services.webhooks.pruneSettledEvents(30, 2)).toBe(true);
    expect(await ctx.services.webhooks.pruneSettledEvents(30, 2)).toBe(true);
    expect(await ctx.services.webhooks.pruneSettledEvents(30, 2)).toBe(false);
    const settledOld = await db()('webhook_events as e')
      .where('e.created_at', '<', new Date(ctx.clock.now().getTime() - 30 * 86_400_000))
      .whereNotExists((q) => q.select(1).from('webhook_deliveries as d').whereRaw('d.event_id = e.id').andWhere('d.status', 'pending'));
    expect(settledOld).toHaveLength(0);
  });

  it('runs as a worker job', () => {
    expect(workerJobs(ctx.deps).map((job) => job.name)).toContain('webhook-retention');
  });
});
