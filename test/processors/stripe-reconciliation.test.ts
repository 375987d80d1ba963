/**
 * Reconciliation from Stripe's event list: events whose webhook never reached Kassa are read from
 * `GET /v1/events` by the worker's job and applied through the same path as the endpoint's
 * (once per event id, object read back). Two workers at once apply each event once (PostgreSQL).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/knex.js';
import { createLogger } from '../../src/kernel/logger.js';
import type { Job } from '../../src/kernel/job.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { KnexStripeEventRepository } from '../../src/processors/stripe-event.repository.js';
import { createStripeClient, STRIPE_EVENT_TYPES } from '../../src/processors/stripe-processor.js';
import { StripeEventReconciler } from '../../src/processors/stripe-reconciliation.js';
import { createServices } from '../../src/services.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { createStripeContext, type StripeContext } from './stripe-context.js';

let s: StripeContext;
let job: Job;
beforeAll(async () => {
  s = await createStripeContext();
  job = s.ctx.services.modules.processors.jobs().find((j) => j.name === 'stripe-reconciliation')!;
});
afterAll(async () => {
  await s?.close();
});

const config = () => {
  const processor = s.ctx.config.cardProcessor;
  if (processor.kind !== 'stripe') throw new Error('Stripe is not configured');
  return processor;
};
const reads = (stripeSessionId: string) => s.stripe.requests.filter((r) => r.method === 'GET' && r.path === `/v1/checkout/sessions/${stripeSessionId}`).length;
const cursor = async () => Number((await s.ctx.testDb.database.db('stripe_event_cursors').where({ name: 'events' }).first()).created_through);
/** A session the buyer paid on Stripe whose webhook never arrived. */
async function paidWithoutWebhook(email: string) {
  const session = await s.newSession();
  const stripeId = await s.stripeIdOf(session.id);
  s.stripe.complete(stripeId, { email });
  return { sessionId: session.id, stripeId };
}

describe('the stripe-reconciliation job', () => {
  it('is a worker job paced by STRIPE_RECONCILE_INTERVAL_MS', () => {
    expect(job).toMatchObject({ name: 'stripe-reconciliation', intervalMs: 60_000 });
  });

  it('applies a payment whose webhook was missed; the next pass finds nothing new and reads nothing back', async () => {
    const { sessionId, stripeId } = await paidWithoutWebhook('missed@example.com');
    expect((await s.readSession(sessionId)).status).toBe('CREATED');
    expect(await job.run()).toBe(true);
    const read = await s.readSession(sessionId);
    expect(read).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID' });
    expect(await s.orderEvents(read.orderId)).toEqual(['order.paid']);
    expect(reads(stripeId)).toBe(1);

    expect(await job.run()).toBe(false);
    expect(reads(stripeId)).toBe(1);
    // The webhook, arriving after all, is a duplicate.
    expect((await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeId))).body.outcome).toBe('duplicate');
  });

  it('catches up missed refunds, disputes and declines too', async () => {
    const { orderId, intentId } = await s.paidOrder('catch-up@example.com');
    s.stripe.refundInDashboard(intentId, 400);
    s.stripe.openDispute(intentId);
    const open = await s.newSession();
    s.stripe.declineAttempt(await s.stripeIdOf(open.id), 'expired_card');
    await job.run();
    expect(await s.readOrder(orderId)).toMatchObject({ status: 'PAID', amountRefundedCents: 400, disputed: true });
    expect((await s.readSession(open.id)).lastError).toMatchObject({ code: 'expired_card', operation: 'charge' });
  });

  it('an event whose read-back fails stays ahead of the cursor and is applied on the next pass', async () => {
    await job.run();
    s.ctx.clock.advance(10_000);
    const { sessionId, stripeId } = await paidWithoutWebhook('flaky@example.com');
    const event = s.stripe.lastEvent('checkout.session.completed', stripeId);
    s.stripe.failNext('error500', 3, `/v1/checkout/sessions/${stripeId}`); // the read-back and the SDK's two retries
    expect(await job.run()).toBe(false);
    expect((await s.readSession(sessionId)).status).toBe('CREATED');
    expect(await cursor()).toBeLessThanOrEqual(event.created);
    await job.run();
    expect((await s.readSession(sessionId)).orderStatus).toBe('PAID');
    expect(await cursor()).toBeGreaterThan(event.created);
  });

  it("pages through Stripe's event list (starting_after) and applies every event of every page", async () => {
    const missed = [];
    for (let i = 0; i < 5; i++) missed.push(await paidWithoutWebhook(`page${i}@example.com`));
    const before = s.stripe.requests.length;
    const reconciler = new StripeEventReconciler(createStripeClient(config()), s.ctx.services.stripeEvents!, new KnexStripeEventRepository(s.ctx.testDb.database.db), s.ctx.clock, createLogger({ level: 'silent' }), {
      types: STRIPE_EVENT_TYPES,
      pageSize: 2,
    });
    expect(await reconciler.run()).toBe(true);
    const lists = s.stripe.requests.slice(before).filter((r) => r.path === '/v1/events');
    expect(lists.length).toBeGreaterThanOrEqual(3);
    for (const { sessionId } of missed) expect((await s.readSession(sessionId)).orderStatus).toBe('PAID');
  });

  it('a backlog longer than one window is caught up in several passes, each asking for the next at once', async () => {
    const { orderId, intentId } = await s.paidOrder('backlog@example.com');
    const dispute = s.stripe.openDispute(intentId);
    s.ctx.clock.advance(20 * 3600 * 1000);
    // The worker was down all along: its cursor is still from before the dispute.
    await s.ctx.testDb.database.db('stripe_event_cursors').where({ name: 'events' }).update({ created_through: dispute.created - 60 });
    const answers: boolean[] = [];
    for (let pass = 0; pass < 10 && (answers.length === 0 || answers.at(-1)); pass++) answers.push(await job.run());
    expect(answers.length).toBeGreaterThan(2);
    expect(answers.at(-1)).toBe(false);
    expect(await s.readOrder(orderId)).toMatchObject({ disputed: true });
  });

  it("a worker that died holding the cursor's lease blocks the others only until the lease lapses", async () => {
    const repo = new KnexStripeEventRepository(s.ctx.testDb.database.db);
    const now = s.ctx.clock.now();
    expect(await repo.leaseCursor('events', 'crashed-worker', now, new Date(now.getTime() + 5 * 60_000))).toBeDefined();
    const { sessionId } = await paidWithoutWebhook('after-crash@example.com');
    expect(await job.run()).toBe(false);
    expect((await s.readSession(sessionId)).status).toBe('CREATED');
    s.ctx.clock.advance(5 * 60_000 + 1_000);
    expect(await job.run()).toBe(true);
    expect((await s.readSession(sessionId)).orderStatus).toBe('PAID');
    // The dead worker's late save cannot move the cursor: the lease is no longer its.
    expect(await repo.saveCursor('events', 'crashed-worker', 1, now, now)).toBe(false);
  });

  it('lists only the event types Kassa handles', async () => {
    const before = s.stripe.requests.length;
    await job.run();
    const list = s.stripe.requests.slice(before).find((r) => r.path === '/v1/events')!;
    expect(list.query).toMatchObject({ types: [...STRIPE_EVENT_TYPES], limit: '100' });
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('two workers reconciling at once', 'postgresOnly'), () => {
  it('apply each missed event once (read back once, one order.paid), 10 rounds of 3 payments', async () => {
    const second = await openDatabase({ databaseUrl: s.ctx.testDb.url! });
    try {
      const otherWorker = createServices({ db: second.db, clock: s.ctx.clock, secretBox: new SecretBox(randomBytes(32)), config: s.ctx.config, logger: createLogger({ level: 'silent' }) });
      const otherJob = otherWorker.modules.processors.jobs().find((j) => j.name === 'stripe-reconciliation')!;
      await job.run();
      for (let round = 0; round < 10; round++) {
        const missed = [];
        for (let i = 0; i < 3; i++) missed.push(await paidWithoutWebhook(`race${round}-${i}@example.com`));
        await Promise.all([job.run(), otherJob.run()]);
        await Promise.all([job.run(), otherJob.run()]);
        for (const { sessionId, stripeId } of missed) {
          expect(reads(stripeId)).toBe(1);
          const read = await s.readSession(sessionId);
          expect(read.orderStatus).toBe('PAID');
          expect(await s.orderEvents(read.orderId)).toEqual(['order.paid']);
        }
      }
    } finally {
      await second.close();
    }
  });
});
