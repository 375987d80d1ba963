/**
 * Claims whose checkout session was never stored (issue 39, docs/discounts.md "Stripe rail"): on
 * Stripe a redemption is claimed before Stripe's Checkout Session is opened and the Kassa session
 * stored after it. The sweep (src/processors/stripe-redemption-sweep.ts) gives such a claim back
 * after its delay, asking Stripe first:
 * - the crash before Stripe was called (claim written, no session anywhere): given back after the
 *   delay, not before, once;
 * - Stripe made the session (open, never handed out): expired in Stripe, then given back;
 * - Stripe's session was paid (the orphan path refunds it): the redemption stays counted;
 * - PostgreSQL, rounds: the sweep racing a slow create that stores its session late — never a
 *   stored session whose redemption was given back.
 */
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';
import type { DiscountService } from '../../src/discounts/discount.service.js';
import { redemptionSweepDelayMs, StripeRedemptionSweep } from '../../src/processors/stripe-redemption-sweep.js';
import { KnexRedemptionSweepRepository } from '../../src/processors/redemption-sweep.repository.js';
import { KnexStripeEventRepository } from '../../src/processors/stripe-event.repository.js';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { newId } from '../../src/kernel/ids.js';
import { createLogger } from '../../src/kernel/logger.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const DELAY_MS = redemptionSweepDelayMs(2000);

let ctx: TestContext;
let stripe: FakeStripe;
let sdk: Stripe;
let discounts: DiscountService;
let priceId: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = new URL(await stripe.start());
  ctx = await createTestContext({ env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base.toString(), STRIPE_TIMEOUT_MS: '2000' } });
  sdk = new Stripe(SECRET_KEY, { host: base.hostname, port: Number(base.port), protocol: 'http', maxNetworkRetries: 0 });
  discounts = ctx.services.modules.discounts.discounts;
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Ebook' });
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 2000, currency: 'EUR' })).id;
});
afterAll(async () => {
  await stripe?.stop();
  await ctx?.close();
});

const db = () => ctx.testDb.database.db;
const at = (iso: string) => ctx.clock.set(iso);
let keys = 0;
const create = (body: object) => ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `sweep-${++keys}`).send({ pricingId: priceId, ...body });
const timesRedeemed = async (couponId: string) => (await discounts.getCoupon(ctx.orgA.orgId, couponId)).timesRedeemed;
const sweepOn = (database: Database['db'], clock = ctx.clock) =>
  new StripeRedemptionSweep(sdk, new KnexRedemptionSweepRepository(database), new KnexStripeEventRepository(database), clock, createLogger({ level: 'silent' }), { delayMs: DELAY_MS });

/** A claim as create writes it before calling Stripe, for a session id Kassa then never stores (the crash). */
async function crashedClaim(couponId: string) {
  const template = await create({ discounts: [{ coupon: couponId }] });
  expect(template.status).toBe(201);
  const pricing = (await db()('checkout_sessions').where({ id: template.body.data.id }).first()).pricing;
  const discount = (typeof pricing === 'string' ? JSON.parse(pricing) : pricing).discount;
  const sessionId = newId('CS');
  await discounts.claim(ctx.orgA.orgId, sessionId, discount, 'crash@example.com');
  return sessionId;
}

describe('claims of checkout sessions never stored', () => {
  it('the crash before Stripe was called: given back after the delay (not before), once', async () => {
    at('2026-03-01T10:00:00.000Z');
    const coupon = await discounts.createCoupon(ctx.orgA.orgId, { name: 'Crash', percentOff: '10', duration: 'ONCE', maxRedemptions: 5 });
    const orphan = await crashedClaim(coupon.id);
    expect(await timesRedeemed(coupon.id)).toBe(2);
    const sweep = sweepOn(db());
    at(new Date(Date.parse('2026-03-01T10:00:00.000Z') + DELAY_MS - 1000).toISOString());
    expect(await sweep.run()).toBe(0);
    expect(await timesRedeemed(coupon.id)).toBe(2);
    at(new Date(Date.parse('2026-03-01T10:00:00.000Z') + DELAY_MS + 1000).toISOString());
    expect(await sweep.run()).toBe(1);
    expect(await timesRedeemed(coupon.id)).toBe(1);
    expect((await db()('discount_redemptions').where({ checkout_session_id: orphan }).first()).released_at).not.toBeNull();
    // Once; and the stored session's claim is not touched.
    expect(await sweep.run()).toBe(0);
    expect(await timesRedeemed(coupon.id)).toBe(1);
  });

  it('Stripe made the session but Kassa never stored it: expired in Stripe, then given back; a paid one stays counted', async () => {
    at('2026-03-02T10:00:00.000Z');
    const coupon = await discounts.createCoupon(ctx.orgA.orgId, { name: 'Orphans', percentOff: '10', duration: 'ONCE' });
    const open = await crashedClaim(coupon.id);
    const paidId = await crashedClaim(coupon.id);
    expect(await timesRedeemed(coupon.id)).toBe(4);
    const made = (id: string) =>
      sdk.checkout.sessions.create({ mode: 'payment', client_reference_id: id, metadata: { kassa_checkout_session_id: id, kassa_org_id: ctx.orgA.orgId }, line_items: [{ quantity: 1, price_data: { currency: 'eur', unit_amount: 1800, product_data: { name: 'Ebook' } } }], success_url: 'http://x.test/ok', cancel_url: 'http://x.test/no' });
    const openStripe = await made(open);
    const paidStripe = await made(paidId);
    stripe.complete(paidStripe.id, { email: 'crash@example.com' });
    at(new Date(Date.parse('2026-03-02T10:00:00.000Z') + DELAY_MS + 1000).toISOString());
    expect(await sweepOn(db()).run()).toBe(2);
    expect(stripe.sessions.get(openStripe.id)!.status).toBe('expired');
    expect(await timesRedeemed(coupon.id)).toBe(3);
    const rows = await db()('discount_redemptions').whereIn('checkout_session_id', [open, paidId]);
    const byId = Object.fromEntries(rows.map((r: any) => [r.checkout_session_id, r]));
    expect(byId[open].released_at).not.toBeNull();
    expect(byId[paidId].released_at).toBeNull();
    expect(byId[paidId].orphan_kept_at).not.toBeNull();
    expect(await sweepOn(db()).run()).toBe(0);
  });
});

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);
describe.skipIf(!onPostgres)('race on PostgreSQL: the sweep and a slow create storing late', () => {
  let second: Database;
  beforeAll(async () => {
    second = await openDatabase({ databaseUrl: ctx.testDb.url! });
  });
  afterAll(async () => {
    await second?.close();
  });

  it('rounds: a stored session always keeps a counted redemption', async () => {
    const ROUNDS = 12;
    let bad = 0;
    for (let round = 0; round < ROUNDS; round++) {
      at(new Date(Date.parse('2026-04-01T00:00:00.000Z') + round * 86400_000).toISOString());
      const coupon = await discounts.createCoupon(ctx.orgA.orgId, { name: `Race ${round}`, percentOff: '10', duration: 'ONCE', maxRedemptions: 1 });
      // The sweep's clock is past the delay: it may take the claim while Stripe is slow to answer.
      const later = { now: () => new Date(ctx.clock.now().getTime() + DELAY_MS + 1000) };
      const sweep = sweepOn(second.db, later as typeof ctx.clock);
      stripe.failNext(`delay:${20 + (round % 4) * 60}`, 1, '/v1/checkout/sessions');
      let done = false;
      const creating = (async () => await create({ discounts: [{ coupon: coupon.id }] }))().finally(() => (done = true));
      const sweeping = (async () => {
        while (!done) {
          await sweep.run();
          await new Promise((r) => setTimeout(r, 5 + (round % 3) * 10));
        }
      })();
      const [res] = await Promise.all([creating, sweeping]);
      const count = await timesRedeemed(coupon.id);
      if (res.status === 201) {
        const claim = await db()('discount_redemptions').where({ checkout_session_id: res.body.data.id }).first();
        if (!claim || claim.released_at !== null || count !== 1) bad++;
      } else {
        expect(res.status).toBe(409);
        if (count !== 0) bad++;
      }
    }
    expect(bad).toBe(0);
  });
});
