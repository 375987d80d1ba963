/**
 * A metered plan change on the Stripe rail racing the close of the renewal draft's period
 * (docs/plan-changes.md "Metered prices"), on PostgreSQL (PGlite has one connection): a second
 * Kassa (its own pool and its own clock, past the grace window: another worker process) runs the
 * `stripe-usage-invoices` job that closes the period and adds the usage items, while the API
 * changes the plan (a clock still inside the period) and usage is ingested after the change's
 * second. Every event is billed once and at the price of its part: either the change commits
 * first (the draft's items split at its second) or the close does (the change is refused with
 * 409 and the whole period is the old price's); every event answered ACCEPTED is on the invoice,
 * none answered PERIOD_CLOSED is.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerJobs } from '../../src/jobs.js';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { ManualClock } from '../../src/kernel/clock.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices, type Services } from '../../src/services.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { setExternalId } from '../usage/helpers.js';
import { createStripeContext, type StripeContext } from './stripe-context.js';

const ROUNDS = Number(process.env.KASSA_RACE_ROUNDS ?? 20);
const DAY = 24 * 3600 * 1000;

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('a metered plan change on Stripe racing the renewal close', 'postgresOnly'), () => {
  let s: StripeContext;
  let db: Database;
  let worker: Services;
  const workerClock = new ManualClock();
  let cheap: string;
  let dear: string;
  beforeAll(async () => {
    s = await createStripeContext();
    db = await openDatabase({ databaseUrl: s.ctx.testDb.url! });
    worker = createServices({ db: db.db, clock: workerClock, secretBox: new SecretBox(randomBytes(32)), config: s.ctx.config });
    const meter = await s.ctx.merchant.post('/v1/meters').set('X-API-Key', s.ctx.orgA.apiKey).send({ name: 'Calls', source: 'EVENTS', filter: { eventName: 'call' }, aggregation: 'count' });
    expect(meter.status).toBe(201);
    // The same daily fee, calls at 1 ¢ or 2 ¢: the change is an upgrade with no fee to prorate (Stripe's item update, `none`).
    const price = async (name: string, unit: string) => {
      const product = await s.ctx.services.catalog.createProduct(s.ctx.orgA.orgId, { name });
      const res = await s.ctx.admin.post(`/v1/products/${product.id}/prices`).send({
        amount: 100,
        currency: 'USD',
        pricingType: 'SUBSCRIPTION',
        billingInterval: 'DAY',
        meteredComponents: [{ meterId: meter.body.data.id, pricing: { model: 'PER_UNIT', unitAmountDecimal: unit } }],
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.data.pricingId as string;
    };
    cheap = await price('Cheap calls', '1');
    dear = await price('Dear calls', '2');
  });
  afterAll(async () => {
    await db?.close();
    await s?.close();
  });

  const ingest = async (events: object[]) => {
    const res = await s.ctx.merchant.post('/v1/usage-events').set('X-API-Key', s.ctx.orgA.apiKey).send({ events });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data.results as Array<{ id: string; status: string; reason: { code: string } | null }>;
  };
  const api = (path: string, body: object) => s.ctx.merchant.post(path).set('X-API-Key', s.ctx.orgA.apiKey).send(body);

  it(`bills every event once, at its part's price, when a metered change races the renewal's close (${ROUNDS} rounds)`, async () => {
    const failures: string[] = [];
    const outcomes = new Map<string, number>();
    for (let round = 0; round < ROUNDS; round++) {
      const start = Date.parse('2032-01-01T00:00:00.000Z') + round * 3 * DAY;
      s.ctx.clock.set(new Date(start).toISOString());
      const email = `mcrace${round}@example.com`;
      const created = await s.create({ pricingId: cheap, customerEmail: email });
      expect(created.status).toBe(201);
      const stripeSessionId = await s.stripeIdOf(created.body.data.id);
      s.stripe.complete(stripeSessionId, { email });
      expect((await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeSessionId))).body.outcome).toBe('applied');
      const order = await s.readOrder((await s.readSession(created.body.data.id)).orderId);
      const customer = { externalId: `mcrace_${round}` };
      await setExternalId(s.ctx, order.customerId as string, customer.externalId, s.ctx.orgA.apiKey);
      const stripeSub = s.stripe.subscriptionOf(stripeSessionId);
      const periodEnd = stripeSub.items.data[0]!.current_period_end * 1000;
      const subscriptionId = (await s.ctx.testDb.database.db('subscriptions').where({ processor_subscription_id: stripeSub.id }).first()).id as string;

      s.ctx.clock.set(new Date(start + 3600_000).toISOString());
      expect((await ingest(Array.from({ length: 5 }, (_, i) => ({ id: `mcr_${round}_b${i}`, customer, name: 'call', timestamp: new Date(start + 60_000).toISOString() })))).every((r) => r.status === 'ACCEPTED')).toBe(true);
      // Stripe's renewal draft of the period is recorded and held (its invoice.created delivered in time).
      s.ctx.clock.set(new Date(periodEnd + 1000).toISOString());
      const draft = s.stripe.renewDraft(stripeSub.id);
      expect((await s.deliver(s.stripe.lastEvent('invoice.created', draft.id))).body.outcome).toBe('applied');

      // The API's clock: a minute before the period's end; the worker's: past the grace window.
      const changeAt = periodEnd - 60_000;
      s.ctx.clock.set(new Date(changeAt).toISOString());
      workerClock.set(periodEnd + 3600_000 + 1000);
      const p = await api(`/v1/subscriptions/${subscriptionId}/change/preview`, { priceId: dear });
      expect(p.status, JSON.stringify(p.body)).toBe(200);
      expect(p.body.data.amountDueCents).toBe(0);
      const after = new Date(changeAt + 1000).toISOString();
      const [changed, billed, ...answers] = await Promise.all([
        (async () => {
          await new Promise((r) => setTimeout(r, (round % 3) * 3));
          return api(`/v1/subscriptions/${subscriptionId}/change`, { priceId: dear, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: 0 });
        })(),
        (async () => {
          await new Promise((r) => setTimeout(r, (round % 10) * 8));
          return workerJobs({ services: worker }).find((j) => j.name === 'stripe-usage-invoices')!.run();
        })(),
        ...Array.from({ length: 4 }, (_, b) =>
          (async () => {
            await new Promise((r) => setTimeout(r, b * 5));
            return ingest(Array.from({ length: 3 }, (_, i) => ({ id: `mcr_${round}_a${b}_${i}`, customer, name: 'call', timestamp: after })));
          })(),
        ),
      ]);
      expect(billed, `round ${round}`).toBe(true);
      expect([200, 409], `round ${round}: ${JSON.stringify(changed.body)}`).toContain(changed.status);
      const results = answers.flat();
      const accepted = results.filter((r) => r.status === 'ACCEPTED').length;
      const closed = results.filter((r) => r.reason?.code === 'PERIOD_CLOSED').length;
      const invoice = s.stripe.invoices.get(draft.id)!;
      const items = invoice.lines.data.filter((l) => l.parent?.invoice_item_details).map((l) => l.amount);
      // The change first: 5 calls on the cheap part, the accepted ones after it on the dear part. The close first: all cheap.
      const expected = changed.status === 200 ? [5, 2 * accepted] : [5 + accepted];
      const segments = await s.ctx.testDb.database.db('subscription_usage_segments').where({ subscription_id: subscriptionId });
      const outcome = changed.status === 200 ? 'change first' : `close first (409: ${changed.body.error?.message})`;
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      if (accepted + closed !== 12 || JSON.stringify(items) !== JSON.stringify(expected) || invoice.status !== 'paid' || invoice.amount_paid !== 100 + expected.reduce((a, b) => a + b, 0) || segments.length !== (changed.status === 200 ? 1 : 0)) {
        failures.push(`round ${round} (${outcome}): ${accepted} accepted, ${closed} closed, items ${JSON.stringify(items)} expected ${JSON.stringify(expected)}, ${invoice.status} ${invoice.amount_paid}, ${segments.length} segments`);
      }
    }
    expect(failures, `${failures.length} of ${ROUNDS} rounds; outcomes ${JSON.stringify([...outcomes])}`).toEqual([]);
    console.info(`metered change vs renewal close outcomes: ${JSON.stringify([...outcomes])}`);
  }, 600_000);
});
