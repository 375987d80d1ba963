/**
 * Races on the Stripe rail of metered subscriptions (issue 38 §7, §8), on PostgreSQL (PGlite has
 * one connection), with a second Kassa (its own pool: another worker process) and the local
 * Stripe-shaped server:
 * - the same `invoice.created` delivered several times at once (the same event, and copies with
 *   other event ids) while two workers run the usage job: the draft carries each usage item once
 *   and Stripe collects fee + usage once;
 * - usage ingest racing the close of the held draft's period: every event answered ACCEPTED is
 *   billed (the invoice item's quantity and amount equal the accepted count), none answered
 *   PERIOD_CLOSED is;
 * - the first race with a credit pack: the credits are drawn once (one DRAW entry) and the item
 *   Stripe collects is the line net of them;
 * - the make-up retry job (two workers) racing a late `invoice.paid` (and its redelivery) of a
 *   renewal Stripe finalized without Kassa's items, whose make-up could not be opened before: one
 *   make-up invoice, its usage item once, charged once, nothing left pending;
 * - a cancel now in the grace hour after the period's end racing the renewal draft's
 *   `invoice.created`: whichever is recorded first, the closed period's events and the events
 *   after its end are each on one invoice (the cancel's or the draft), none on two, none on none.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerJobs } from '../../src/jobs.js';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices, type Services } from '../../src/services.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { setExternalId } from '../usage/helpers.js';
import { createStripeContext, type StripeContext } from './stripe-context.js';

const ROUNDS = 20;
const DAY = 24 * 3600 * 1000;

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('races of metered subscriptions billed by Stripe', 'postgresOnly'), () => {
  let s: StripeContext;
  let db: Database;
  let worker: Services;
  let priceId: string;
  let packPriceId: string;
  beforeAll(async () => {
    s = await createStripeContext();
    db = await openDatabase({ databaseUrl: s.ctx.testDb.url! });
    worker = createServices({ db: db.db, clock: s.ctx.clock, secretBox: new SecretBox(randomBytes(32)), config: s.ctx.config });
    const meter = await s.ctx.merchant.post('/v1/meters').set('X-API-Key', s.ctx.orgA.apiKey).send({ name: 'Calls', source: 'EVENTS', filter: { eventName: 'call' }, aggregation: 'count' });
    expect(meter.status).toBe(201);
    const product = await s.ctx.services.catalog.createProduct(s.ctx.orgA.orgId, { name: 'Daily' });
    const price = await s.ctx.admin.post(`/v1/products/${product.id}/prices`).send({
      amount: 100,
      currency: 'USD',
      pricingType: 'SUBSCRIPTION',
      billingInterval: 'DAY',
      meteredComponents: [{ meterId: meter.body.data.id, pricing: { model: 'PER_UNIT', unitAmountDecimal: '1' } }],
    });
    expect(price.status, JSON.stringify(price.body)).toBe(201);
    priceId = price.body.data.pricingId;
    const pack = await s.ctx.admin.post(`/v1/products/${product.id}/prices`).send({ amount: 300, currency: 'USD', grantsUnits: { meterId: meter.body.data.id, units: 3 } });
    expect(pack.status, JSON.stringify(pack.body)).toBe(201);
    packPriceId = pack.body.data.pricingId;
  });
  afterAll(async () => {
    await db?.close();
    await s?.close();
  });

  const jobOf = (services: Services) => workerJobs({ services }).find((j) => j.name === 'stripe-usage-invoices')!;
  const ingest = async (events: object[]) => {
    const res = await s.ctx.merchant.post('/v1/usage-events').set('X-API-Key', s.ctx.orgA.apiKey).send({ events });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data.results as Array<{ id: string; status: string; reason: { code: string } | null }>;
  };
  async function subscribe(email: string, externalId: string) {
    const res = await s.create({ pricingId: priceId, customerEmail: email });
    expect(res.status).toBe(201);
    const stripeSessionId = await s.stripeIdOf(res.body.data.id);
    s.stripe.complete(stripeSessionId, { email });
    expect((await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeSessionId))).body.outcome).toBe('applied');
    const order = await s.readOrder((await s.readSession(res.body.data.id)).orderId);
    await setExternalId(s.ctx, order.customerId as string, externalId, s.ctx.orgA.apiKey);
    const stripeSub = s.stripe.subscriptionOf(stripeSessionId);
    return { stripeSub, periodEnd: stripeSub.items.data[0]!.current_period_end * 1000 };
  }
  const usageItems = (invoiceId: string) => s.stripe.invoices.get(invoiceId)!.lines.data.filter((l) => l.parent?.invoice_item_details);

  it(`adds the usage once when the same invoice.created is delivered concurrently while two workers run (${ROUNDS} rounds)`, async () => {
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const start = Date.parse('2028-01-01T00:00:00.000Z') + round * 3 * DAY;
      s.ctx.clock.set(new Date(start).toISOString());
      const { stripeSub, periodEnd } = await subscribe(`dup${round}@example.com`, `dup_${round}`);
      s.ctx.clock.set(new Date(start + 3600_000).toISOString());
      await ingest(Array.from({ length: 5 }, (_, i) => ({ id: `dup_${round}_${i}`, customer: { externalId: `dup_${round}` }, name: 'call', timestamp: new Date(start + 60_000).toISOString() })));
      // invoice.created arrives after the grace window: each delivery closes and bills at once.
      s.ctx.clock.set(new Date(periodEnd + 3600_000 + 1000).toISOString());
      const draft = s.stripe.renewDraft(stripeSub.id);
      const event = s.stripe.lastEvent('invoice.created', draft.id);
      const answers = await Promise.all([
        s.deliver(event),
        s.deliver(event),
        s.deliver(s.stripe.eventFor('invoice.created', { id: draft.id })),
        s.deliver(s.stripe.eventFor('invoice.created', { id: draft.id })),
        jobOf(worker).run(),
        jobOf(s.ctx.services).run(),
      ]);
      for (const a of answers.slice(0, 4)) expect((a as { status: number }).status, `round ${round}`).toBe(200);
      const items = usageItems(draft.id);
      const invoice = s.stripe.invoices.get(draft.id)!;
      if (items.length !== 1 || invoice.amount_paid !== 105 || invoice.status !== 'paid') failures.push(`round ${round}: ${items.length} usage items, ${invoice.status}, ${invoice.amount_paid} paid`);
    }
    expect(failures, `${failures.length} of ${ROUNDS} rounds`).toEqual([]);
  }, 600_000);

  it(`draws a credit pack once when the same invoice.created is delivered concurrently while two workers run (${ROUNDS} rounds)`, async () => {
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const start = Date.parse('2030-01-01T00:00:00.000Z') + round * 3 * DAY;
      s.ctx.clock.set(new Date(start).toISOString());
      const { stripeSub, periodEnd } = await subscribe(`pack${round}@example.com`, `pack_${round}`);
      const bought = await s.create({ pricingId: packPriceId, customerEmail: `pack${round}@example.com` });
      expect(bought.status).toBe(201);
      const packSession = await s.stripeIdOf(bought.body.data.id);
      s.stripe.complete(packSession, { email: `pack${round}@example.com` });
      expect((await s.deliver(s.stripe.lastEvent('checkout.session.completed', packSession))).body.outcome).toBe('applied');
      s.ctx.clock.set(new Date(start + 3600_000).toISOString());
      await ingest(Array.from({ length: 5 }, (_, i) => ({ id: `pack_${round}_${i}`, customer: { externalId: `pack_${round}` }, name: 'call', timestamp: new Date(start + 60_000).toISOString() })));
      s.ctx.clock.set(new Date(periodEnd + 3600_000 + 1000).toISOString());
      const draft = s.stripe.renewDraft(stripeSub.id);
      const event = s.stripe.lastEvent('invoice.created', draft.id);
      await Promise.all([s.deliver(event), s.deliver(s.stripe.eventFor('invoice.created', { id: draft.id })), jobOf(worker).run(), jobOf(s.ctx.services).run()]);
      // 5 calls, 3 from credit: 100 fee + 2; one DRAW of 3, the balance at 0.
      const invoice = s.stripe.invoices.get(draft.id)!;
      const subscriptionId = (await s.ctx.testDb.database.db('subscriptions').where({ processor_subscription_id: stripeSub.id }).first()).id as string;
      const drawn = await s.ctx.testDb.database.db('usage_credit_entries').where({ subscription_id: subscriptionId, kind: 'DRAW' }).select('units');
      const items = usageItems(draft.id);
      if (items.length !== 1 || invoice.amount_paid !== 102 || drawn.length !== 1 || Number(drawn[0].units) !== -3) {
        failures.push(`round ${round}: ${items.length} usage items, ${invoice.amount_paid} paid, draws ${JSON.stringify(drawn)}`);
      }
    }
    expect(failures, `${failures.length} of ${ROUNDS} rounds`).toEqual([]);
  }, 600_000);

  it(`opens one make-up when the retry job of two workers races a late invoice.paid of the missed renewal (${ROUNDS} rounds)`, async () => {
    const makeupJobOf = (services: Services) => workerJobs({ services }).find((j) => j.name === 'stripe-usage-makeups')!;
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const start = Date.parse('2031-01-01T00:00:00.000Z') + round * 3 * DAY;
      s.ctx.clock.set(new Date(start).toISOString());
      const { stripeSub, periodEnd } = await subscribe(`mkrace${round}@example.com`, `mkrace_${round}`);
      s.ctx.clock.set(new Date(start + 3600_000).toISOString());
      await ingest(Array.from({ length: 5 }, (_, i) => ({ id: `mkrace_${round}_${i}`, customer: { externalId: `mkrace_${round}` }, name: 'call', timestamp: new Date(start + 60_000).toISOString() })));
      s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
      const draft = s.stripe.renewDraft(stripeSub.id);
      s.ctx.clock.set(new Date(periodEnd + 3600_000 + 2000).toISOString());
      s.stripe.finalizeDue();
      // Its invoice.created comes late, while Stripe fails to open the make-up: MISSED, make-up due, none opened.
      s.stripe.failNext('error500', 50, '/v1/subscriptions/');
      try {
        expect((await s.deliver(s.stripe.lastEvent('invoice.created', draft.id))).status).toBe(503);
      } finally {
        (s.stripe as unknown as { failures: unknown[] }).failures.length = 0;
      }
      const paid = s.stripe.lastEvent('invoice.paid', draft.id);
      await Promise.all([
        s.deliver(paid),
        s.deliver(s.stripe.eventFor('invoice.paid', { id: draft.id })),
        makeupJobOf(worker).run(),
        makeupJobOf(s.ctx.services).run(),
      ]);
      const knex = s.ctx.testDb.database.db;
      const subscriptionId = (await knex('subscriptions').where({ processor_subscription_id: stripeSub.id }).first()).id as string;
      const rows = await knex('processor_usage_invoices').where({ subscription_id: subscriptionId, kind: 'MAKEUP' });
      const opened = [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'manual');
      const missed = await knex('processor_usage_invoices').where({ processor_invoice_id: draft.id }).first();
      const items = opened[0] ? usageItems(opened[0].id) : [];
      const renewals = await knex('orders').where({ subscription_id: subscriptionId, billing_period: 1 });
      if (rows.length !== 1 || opened.length !== 1 || opened[0]!.status !== 'paid' || opened[0]!.amount_paid !== 5 || items.length !== 1 || missed.makeup_retry_at !== null || renewals.length !== 1) {
        failures.push(`round ${round}: ${rows.length} MAKEUP rows, ${opened.length} invoices (${opened.map((i) => `${i.status} ${i.amount_paid}`).join(', ')}), ${items.length} items, retry ${missed.makeup_retry_at}, ${renewals.length} renewal orders`);
      }
    }
    expect(failures, `${failures.length} of ${ROUNDS} rounds`).toEqual([]);
  }, 600_000);

  it(`bills every accepted event once when ingest races the close of the held draft (${ROUNDS} rounds, 8 batches)`, async () => {
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const start = Date.parse('2029-01-01T00:00:00.000Z') + round * 3 * DAY;
      s.ctx.clock.set(new Date(start).toISOString());
      const { stripeSub, periodEnd } = await subscribe(`close${round}@example.com`, `close_${round}`);
      s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
      const draft = s.stripe.renewDraft(stripeSub.id);
      expect((await s.deliver(s.stripe.lastEvent('invoice.created', draft.id))).body.outcome).toBe('applied');
      // The close time: the period's end + the grace window; late events of the period race the worker's close.
      s.ctx.clock.set(new Date(periodEnd + 3600_000).toISOString());
      const at = new Date(start + 3600_000).toISOString();
      const send = async (b: number) => {
        await new Promise((r) => setTimeout(r, b * 3));
        return ingest(Array.from({ length: 5 }, (_, i) => ({ id: `cl_${round}_${b}_${i}`, customer: { externalId: `close_${round}` }, name: 'call', timestamp: at })));
      };
      const [billed, ...answers] = await Promise.all([
        (async () => {
          await new Promise((r) => setTimeout(r, (round % 10) * 2));
          return jobOf(worker).run();
        })(),
        ...Array.from({ length: 8 }, (_, b) => send(b)),
      ]);
      expect(billed, `round ${round}`).toBe(true);
      const results = answers.flat();
      const accepted = results.filter((r) => r.status === 'ACCEPTED').length;
      const closed = results.filter((r) => r.reason?.code === 'PERIOD_CLOSED').length;
      expect(accepted + closed, `round ${round}: every event accepted or PERIOD_CLOSED`).toBe(40);
      const items = usageItems(draft.id);
      const stored = await s.ctx.testDb.database.db('processor_usage_invoices').where({ processor_invoice_id: draft.id }).first();
      const quantity = Number((typeof stored.lines === 'string' ? JSON.parse(stored.lines) : stored.lines)[0].quantity);
      if (items.length !== 1 || items[0]!.amount !== accepted || quantity !== accepted) failures.push(`round ${round}: ${accepted} accepted, ${closed} PERIOD_CLOSED, ${quantity} billed (${items[0]?.amount} cents)`);
    }
    expect(failures, `${failures.length} of ${ROUNDS} rounds`).toEqual([]);
  }, 600_000);

  it(`bills every event once when a cancel now in the grace hour races the renewal draft's invoice.created (${ROUNDS} rounds)`, async () => {
    const failures: string[] = [];
    const outcomes = new Map<string, number>();
    for (let round = 0; round < ROUNDS; round++) {
      const start = Date.parse('2030-01-01T00:00:00.000Z') + round * 3 * DAY;
      s.ctx.clock.set(new Date(start).toISOString());
      const { stripeSub, periodEnd } = await subscribe(`grace${round}@example.com`, `grace_${round}`);
      const subscriptionId = (await s.ctx.testDb.database.db('subscriptions').where({ processor_subscription_id: stripeSub.id }).first()).id as string;
      const customer = { externalId: `grace_${round}` };
      s.ctx.clock.set(new Date(start + 3600_000).toISOString());
      await ingest(Array.from({ length: 5 }, (_, i) => ({ id: `gr_${round}_p${i}`, customer, name: 'call', timestamp: new Date(start + 60_000).toISOString() })));
      // The period ends: Stripe drafts the renewal; its invoice.created is not handled yet.
      s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
      const draft = s.stripe.renewDraft(stripeSub.id);
      // In the grace hour: 3 events after the period's end (the period Stripe started).
      s.ctx.clock.set(new Date(periodEnd + 20 * 60_000).toISOString());
      const after = await ingest(Array.from({ length: 3 }, (_, i) => ({ id: `gr_${round}_n${i}`, customer, name: 'call', timestamp: new Date(periodEnd + 5 * 60_000).toISOString() })));
      expect(after.every((r) => r.status === 'ACCEPTED')).toBe(true);
      s.ctx.clock.set(new Date(periodEnd + 30 * 60_000).toISOString());
      const [created, canceled] = await Promise.all([
        (async () => {
          await new Promise((r) => setTimeout(r, (round % 5) * 3));
          return s.deliver(s.stripe.lastEvent('invoice.created', draft.id));
        })(),
        s.ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false }),
      ]);
      expect(created.status, `round ${round}`).toBe(200);
      expect(canceled.status, `round ${round}: ${JSON.stringify(canceled.body)}`).toBe(200);
      // After the grace window the held draft is billed by the worker.
      s.ctx.clock.set(new Date(periodEnd + 3600_000 + 1000).toISOString());
      await jobOf(worker).run();
      const finals = [...s.stripe.invoices.values()].filter((i) => i.parent?.subscription_details?.subscription === stripeSub.id && i.billing_reason === 'manual');
      const finalCalls = finals.flatMap((i) => usageItems(i.id)).reduce((sum, l) => sum + l.amount, 0);
      const draftCalls = usageItems(draft.id).reduce((sum, l) => sum + l.amount, 0);
      const outcome = `cancel's invoice ${finalCalls}, draft ${draftCalls}`;
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      const unpaid = [...finals, s.stripe.invoices.get(draft.id)!].filter((i) => i.status !== 'paid').length;
      if (finals.length > 1 || finalCalls + draftCalls !== 8 || unpaid > 0) failures.push(`round ${round}: ${finals.length} cancel invoices, ${outcome}, ${unpaid} unpaid`);
    }
    expect(failures, `${failures.length} of ${ROUNDS} rounds; outcomes ${JSON.stringify([...outcomes])}`).toEqual([]);
    // Which order of arrival each round drew: the cancel's invoice with all 8 (the draft 0), or 3 beside the draft's 5.
    console.info(`grace-hour cancel vs invoice.created outcomes: ${JSON.stringify([...outcomes])}`);
  }, 600_000);
});
