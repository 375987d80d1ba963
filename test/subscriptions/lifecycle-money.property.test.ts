/**
 * A subscription's whole life, money to the minor unit (issue 39, "How to prove it"): for random
 * sequences of plan changes, seat changes, coupons and renewals, every order of the subscription
 * adds up (its lines sum to its `amountCents`) and the list of its orders — kinds of lines and
 * amounts — equals an INDEPENDENT recomputation written here from the documented rules
 * (docs/plan-changes.md, docs/discounts.md, docs/tax.md, docs/order-lines.md). Nothing of Kassa's
 * pricing is called: BigInt arithmetic and a half-up rounding of our own.
 *
 * Each run, on the sandbox rail through the merchant API and the hosted page, on the manual clock:
 * one product with 2–3 monthly prices (random amounts, sometimes two equal), a checkout of 1–5
 * seats, optionally a coupon (percent with two decimals or amount off; ONCE, REPEATING n or
 * FOREVER), optionally a buyer location taxed exclusively (19 %, 7.5 %, or 5 % + 9.975 % side by
 * side) or inclusively (20 %, or 9 % + 9 %), and optionally a free trial of 1–20 days; then 1–6
 * steps, each either a renewal (clock to the period's end, processDue) or a change of price and/or
 * seats at a random instant inside the current period (preview, then change with the preview's
 * `prorationDate` and `expectedAmountDueCents`, a second or two later).
 *
 * The rules recomputed:
 *  - periods: the anchor (the payment's instant) + k calendar months, clamped to the month's last day;
 *  - a fee is unit × seats; the stored `amountCents` is the fee plus its exclusive tax (no coupon);
 *  - a change to the same price and seats with nothing scheduled is 400; with a downgrade scheduled
 *    it drops it; a lower fee is scheduled for the period end (unprorated, replaces a scheduled
 *    one); otherwise it applies now, dropping a scheduled one, prorated to the second:
 *    remaining = ⌊end⌋ − ⌊at⌋, length = ⌊end⌋ − ⌊start⌋ (whole seconds), credit −old × remaining /
 *    length and charge new × remaining / length, each rounded half up (away from zero); when the
 *    proration is above 0 an order of those lines is charged (openapi `changeSubscription`);
 *  - coupon: covers periods 0 … n−1 (ONCE: n = 1; FOREVER: all), a change in a covered period too;
 *    percent of the order's charge lines rounded once half up; amount off capped at them;
 *  - tax: each exclusive rate on (charges − discount), rounded once half up; a TAX line per rate;
 *    an inclusive rate's TAX line adds 0 and holds (charges − discount) × p / (100 + Σ p), rounded
 *    once half up (`tax.taxAmountCents`, compared for every TAX line);
 *  - a trial (docs/trials.md): period 0 ends `trialDays` days after the checkout, whose order is one
 *    PRICE line of 0 (and TAX lines of 0); paid periods are `trialEnd` + k calendar months; a change
 *    during the trial applies at once (a downgrade too), unprorated, with no order; a coupon counts
 *    only the periods that charge the fee (period 1 is its first); the session's `amount` is the
 *    first paid period's charge;
 *  - a renewal bills the scheduled plan if any: PRICE (seats × unit), DISCOUNT, TAX, then the
 *    customer's credit balance: CREDIT −min(balance, total) (docs/plan-changes.md "Credit balance");
 *  - a lower fee with `effective: IMMEDIATE` (sent at random on changes) applies now: the two
 *    PRORATION lines (net < 0), then the upgrade's extras computed on |net| with every sign
 *    reversed (DISCOUNT ≥ 0, TAX ≤ 0; inclusive TAX lines hold minus the included tax), then a
 *    BALANCE line of what the mirrored lines total, carried to the balance; the order's total is 0
 *    (no order when the net is 0). The balance (`customerBalanceCents`) is checked at every step;
 *  - an upgrade's order (net > 0) draws the balance too, as a renewal does: CREDIT −min(balance,
 *    total) after its TAX lines (`appliedBalanceCents` in the preview; an order it covers whole is 0).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { as, signUp, type Member } from '../accounts/helpers.js';

let ctx: TestContext;
let owner: Member;

// ---- the independent arithmetic -------------------------------------------------------------

/** n / d rounded to the nearest integer, halves away from zero (d > 0). */
function halfUp(n: bigint, d: bigint): number {
  const sign = n < 0n ? -1n : 1n;
  const a = n < 0n ? -n : n;
  return Number(sign * ((2n * a + d) / (2n * d)));
}

/** A decimal text ("9.975", "12.5") as an integer numerator over 10^scale. */
function decimal(text: string, scale: number): bigint {
  const [whole, frac = ''] = text.split('.');
  return BigInt(whole!) * 10n ** BigInt(scale) + BigInt((frac + '0'.repeat(scale)).slice(0, scale));
}

/** anchor + k calendar months in UTC, the day clamped to the month's last day. */
function plusMonths(anchor: Date, k: number): Date {
  const y = anchor.getUTCFullYear();
  const m = anchor.getUTCMonth() + k;
  const lastDay = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  return new Date(Date.UTC(y, m, Math.min(anchor.getUTCDate(), lastDay), anchor.getUTCHours(), anchor.getUTCMinutes(), anchor.getUTCSeconds(), anchor.getUTCMilliseconds()));
}
const sec = (ms: number) => BigInt(Math.floor(ms / 1000));

type Coupon = { percent: string | null; amountOff: number | null; duration: 'ONCE' | 'REPEATING' | 'FOREVER'; periods: number | null };
type TaxChoice = { country: string; region?: string; percents: string[]; inclusive?: boolean } | null;
/** [kind, amount, TAX: its percentage, TAX: the tax it holds (`tax.taxAmountCents`)]. */
type L = [string, number, string?, number?];

function covers(c: Coupon | null, period: number): boolean {
  if (!c) return false;
  if (c.duration === 'FOREVER') return true;
  return period < (c.duration === 'ONCE' ? 1 : c.periods!);
}

/** The lines after the charges: DISCOUNT (when the coupon covers the period and takes something), TAX per rate. */
function extras(charges: number, coupon: Coupon | null, period: number, tax: TaxChoice): L[] {
  const out: L[] = [];
  let discount = 0;
  if (covers(coupon, period) && charges > 0) {
    discount = coupon!.percent !== null ? halfUp(BigInt(charges) * decimal(coupon!.percent, 2), 100n * 100n) : Math.min(coupon!.amountOff!, charges);
    discount = Math.min(discount, charges);
    if (discount > 0) out.push(['DISCOUNT', -discount]);
  }
  const taxable = Math.max(0, charges - discount);
  if (tax?.inclusive) {
    // Inclusive: the line adds 0 and shows the tax the amount holds, taxable × p / (100 + Σ p).
    const sum = tax.percents.reduce((s, p) => s + decimal(p, 4), 0n);
    for (const p of tax.percents) out.push(['TAX', 0, p, halfUp(BigInt(taxable) * decimal(p, 4), 100n * 10_000n + sum)]);
    return out;
  }
  for (const p of tax?.percents ?? []) {
    const amount = halfUp(BigInt(taxable) * decimal(p, 4), 100n * 10_000n);
    out.push(['TAX', amount, p, amount]);
  }
  return out;
}
const total = (lines: L[]) => lines.reduce((s, l) => s + l[1], 0);
const taxOn = (fee: number, tax: TaxChoice) => (tax?.inclusive ? [] : tax?.percents ?? []).reduce((s, p) => s + halfUp(BigInt(fee) * decimal(p, 4), 1_000_000n), 0);
/** An API order line as [kind, amount, TAX: percentage and the tax it holds]. */
const asL = (l: { kind: string; amountCents: number; tax?: { percentage: string; taxAmountCents: number } }): L => (l.kind === 'TAX' ? [l.kind, l.amountCents, l.tax!.percentage, l.tax!.taxAmountCents] : [l.kind, l.amountCents]);
/** Tax lines in a stable order (several rates apply side by side). */
const normal = (lines: L[]) => [...lines.filter((l) => l[0] !== 'TAX'), ...lines.filter((l) => l[0] === 'TAX').sort((a, b) => a[2]!.localeCompare(b[2]!))];

// ---- the random lives -----------------------------------------------------------------------

const couponArb: fc.Arbitrary<Coupon | null> = fc.option(
  fc.record({
    off: fc.oneof(
      fc.integer({ min: 1, max: 10_000 }).map((h) => ({ percent: (h / 100).toFixed(2).replace(/\.?0+$/, ''), amountOff: null })),
      fc.integer({ min: 1, max: 4000 }).map((a) => ({ percent: null, amountOff: a })),
    ),
    duration: fc.constantFrom<'ONCE' | 'REPEATING' | 'FOREVER'>('ONCE', 'REPEATING', 'FOREVER'),
    periods: fc.integer({ min: 1, max: 4 }),
  }).map(({ off, duration, periods }) => ({ ...off, duration, periods: duration === 'REPEATING' ? periods : null })),
  { freq: 3 },
);
const TAXES: TaxChoice[] = [
  null,
  { country: 'DE', percents: ['19'] },
  { country: 'NG', percents: ['7.5'] },
  { country: 'CA', region: 'QC', percents: ['5', '9.975'] },
  // Inclusive: the prices hold the tax (one rate, and two side by side).
  { country: 'GB', percents: ['20'], inclusive: true },
  { country: 'IN', region: 'KA', percents: ['9', '9'], inclusive: true },
];
const stepArb = fc.oneof(
  { weight: 1, arbitrary: fc.constant({ kind: 'renew' as const }) },
  {
    weight: 2,
    arbitrary: fc
      .record({ fraction: fc.integer({ min: 0, max: 1_000_000 }), price: fc.option(fc.integer({ min: 0, max: 2 }), { freq: 3 }), quantity: fc.option(fc.integer({ min: 1, max: 8 }), { freq: 2 }), wait: fc.integer({ min: 0, max: 3 }), immediate: fc.boolean() })
      .filter((s) => s.price !== null || s.quantity !== null)
      .map((s) => ({ kind: 'change' as const, ...s })),
  },
);
const lifeArb = fc.record({
  amounts: fc.array(fc.integer({ min: 50, max: 9_999 }), { minLength: 2, maxLength: 3 }),
  /** Sometimes two prices of the same amount (a change between them prorates to 0: no order). */
  sameAmounts: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
  quantity: fc.integer({ min: 1, max: 5 }),
  coupon: couponArb,
  tax: fc.constantFrom(...TAXES),
  /** The checkout's instant: days after the run's start (days 28–31 of months included) and milliseconds. */
  startDay: fc.integer({ min: 0, max: 60 }),
  startMs: fc.integer({ min: 0, max: 86_399_999 }),
  steps: fc.array(stepArb, { minLength: 1, maxLength: 6 }),
  /** A free trial of the checkout (days), sometimes. */
  trialDays: fc.option(fc.integer({ min: 1, max: 20 }), { freq: 3 }),
});
type Life = typeof lifeArb extends fc.Arbitrary<infer T> ? T : never;

// ---- the harness ---------------------------------------------------------------------------

beforeAll(async () => {
  ctx = await createTestContext();
  owner = await signUp(ctx, ctx.orgA.orgId, 'owner');
  for (const body of [
    { displayName: 'VAT', percentage: '19', country: 'DE' },
    { displayName: 'VAT', percentage: '7.5', country: 'NG' },
    { displayName: 'GST', percentage: '5', country: 'CA' },
    { displayName: 'QST', percentage: '9.975', country: 'CA', region: 'CA-QC' },
    { displayName: 'VAT', percentage: '20', country: 'GB', inclusive: true },
    { displayName: 'CGST', percentage: '9', country: 'IN', inclusive: true },
    { displayName: 'SGST', percentage: '9', country: 'IN', region: 'IN-KA', inclusive: true },
  ]) {
    const res = await as(owner, ctx.merchant.post('/v1/console/tax-rates')).send(body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  }
}, 120_000);
afterAll(async () => {
  await ctx?.close();
});

const api = (method: 'get' | 'post', path: string) => ctx.merchant[method](path).set('X-API-Key', ctx.orgA.apiKey);
const db = () => ctx.testDb.database.db;
/** The clock only moves forward across runs: each run starts after the last one's end. */
let cursor = Date.parse('2027-01-01T00:00:00.000Z');
let runNo = 0;

type Expected = { what: string; amount: number; lines: L[] };

async function live(life: Life): Promise<void> {
  const run = ++runNo;
  const amounts = life.sameAmounts ? [life.amounts[0]!, ...life.amounts.slice(1, -1), life.amounts[0]!] : life.amounts;
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: `Plan ${run}` });
  const prices: string[] = [];
  for (const amount of amounts) prices.push((await ctx.services.catalog.createPrice(product.id, { amount, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id);
  const c = life.coupon;
  let couponId: string | undefined;
  if (c) {
    const res = await api('post', '/v1/coupons').send({
      name: `Coupon ${run}`,
      ...(c.percent !== null ? { percentOff: c.percent } : { amountOff: c.amountOff, currency: 'EUR' }),
      duration: c.duration,
      ...(c.periods !== null ? { durationInPeriods: c.periods } : {}),
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    couponId = res.body.data.id;
  }
  const tax = life.tax;

  // The checkout: period 0 starts at the payment's instant.
  const anchor = new Date(cursor + life.startDay * 86_400_000 + life.startMs);
  ctx.clock.set(anchor.toISOString());
  const created = await api('post', '/v1/checkout-sessions')
    .set('Idempotency-Key', `life-${run}-${anchor.getTime()}`)
    .send({
      pricingId: prices[0],
      customerEmail: `life${run}-${anchor.getTime()}@example.com`,
      quantity: life.quantity,
      ...(couponId ? { discounts: [{ coupon: couponId }] } : {}),
      ...(life.trialDays ? { trialDays: life.trialDays } : {}),
      // Untaxed: a country without rates (the organization has rates, so the page would ask for one).
      customerTax: tax ? { country: tax.country, ...(tax.region ? { region: tax.region } : {}) } : { country: 'JP' },
    });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/99', cvc: '123', amount: String(created.body.data.amount) });
  expect(paid.status, paid.text.replace(/<style>[\s\S]*?<\/style>/, "").replace(/<[^>]+>/g, " ").replace(/\s+/g, " ").slice(0, 600)).toBe(303);
  const subscriptionId = (await db()('orders').where({ checkout_session_id: created.body.data.id }).first()).subscription_id as string;

  const state = { price: 0, quantity: life.quantity, scheduled: null as null | { price: number; quantity: number }, period: 0, last: anchor.getTime(), balance: 0 };
  const fee = (price: number, quantity: number) => amounts[price]! * quantity;
  // A trial is period 0, ending `trialDays` days after the checkout; paid periods are anchored on its
  // end (docs/trials.md), and a coupon counts only the periods that charge the fee (docs/discounts.md).
  const trialEnd = life.trialDays ? new Date(anchor.getTime() + life.trialDays * 86_400_000) : null;
  const periodStart = (k: number) => (trialEnd ? (k === 0 ? anchor : plusMonths(trialEnd, k - 1)) : plusMonths(anchor, k));
  const periodEnd = (k: number) => (trialEnd ? plusMonths(trialEnd, k) : plusMonths(anchor, k + 1));
  const couponPeriod = (k: number) => (trialEnd ? k - 1 : k);
  const inTrial = () => trialEnd !== null && state.period === 0;
  const renewalLines = (): L[] => {
    const f = fee(state.price, state.quantity);
    return [['PRICE', f], ...extras(f, c, couponPeriod(state.period), tax)];
  };
  const expected: Expected[] = [];
  // The trial's order: one PRICE line at unit 0 (and its taxes of 0) — nothing is charged.
  const first = inTrial() ? [['PRICE', 0] as L, ...extras(0, null, 0, tax)] : renewalLines();
  expected.push({ what: 'checkout', amount: total(first), lines: first });
  // With a trial the session's `amount` is the first paid period's charge (openapi: "stays the recurring charge").
  const firstFee = fee(0, life.quantity);
  expect(created.body.data.amount).toBe(trialEnd ? total([['PRICE', firstFee], ...extras(firstFee, c, 0, tax)]) : total(first));
  const log: string[] = [`amounts ${amounts.join('/')}, ${life.quantity} seats, coupon ${JSON.stringify(c)}, tax ${JSON.stringify(tax)}, trial ${life.trialDays ?? 0} days, start ${anchor.toISOString()}`];

  try {
    for (const step of life.steps) {
      const start = periodStart(state.period);
      const end = periodEnd(state.period);
      // The subscription as the API shows it: the documented period and the stored amount.
      const s = (await api('get', `/v1/subscriptions/${subscriptionId}`)).body.data;
      expect(s, log.join('\n')).toMatchObject({
        currentPeriodEnd: end.toISOString(),
        priceId: prices[state.price],
        quantity: state.quantity,
        amountCents: fee(state.price, state.quantity) + taxOn(fee(state.price, state.quantity), tax),
      });
      expect(s.scheduledChange?.priceId ?? null).toBe(state.scheduled ? prices[state.scheduled.price] : null);
      expect(s.customerBalanceCents, log.join('\n')).toBe(state.balance);

      if (step.kind === 'renew') {
        ctx.clock.set(end.toISOString());
        await ctx.services.subscriptions.processDue();
        if (state.scheduled) Object.assign(state, state.scheduled, { scheduled: null });
        state.period++;
        state.last = end.getTime();
        const lines = renewalLines();
        // The customer's credit balance pays what it can, after tax (a CREDIT line).
        const drawn = Math.min(state.balance, total(lines));
        if (drawn > 0) lines.push(['CREDIT', -drawn]);
        state.balance -= drawn;
        expected.push({ what: `renewal ${state.period}`, amount: total(lines), lines });
        log.push(`renew → period ${state.period}: ${JSON.stringify(lines)}`);
        continue;
      }

      // A change at a random instant of what remains of the period (at least a second after the last action).
      const from = Math.max(state.last + 1000, start.getTime());
      const room = end.getTime() - 1000 - step.wait * 1000 - from;
      if (room < 0) continue;
      const at = from + Math.floor((room * step.fraction) / 1_000_000);
      const changeAt = at + step.wait * 1000;
      const body = {
        ...(step.price !== null ? { priceId: prices[Math.min(step.price, amounts.length - 1)] } : {}),
        ...(step.quantity !== null ? { quantity: step.quantity } : {}),
        ...(step.immediate ? { effective: 'IMMEDIATE' } : {}),
      };
      const toPrice = step.price !== null ? Math.min(step.price, amounts.length - 1) : state.price;
      const toQuantity = step.quantity ?? state.quantity;
      const oldFee = fee(state.price, state.quantity);
      const newFee = fee(toPrice, toQuantity);
      ctx.clock.set(new Date(at).toISOString());
      const p = await api('post', `/v1/subscriptions/${subscriptionId}/change/preview`).send(body);
      state.last = changeAt;
      const what = `change at ${new Date(at).toISOString()} ${JSON.stringify(body)} (fee ${oldFee} → ${newFee})`;
      log.push(what);
      if (toPrice === state.price && toQuantity === state.quantity && !state.scheduled) {
        expect(p.status, `${what}\n${log.join('\n')}`).toBe(400);
        ctx.clock.set(new Date(changeAt).toISOString());
        expect((await api('post', `/v1/subscriptions/${subscriptionId}/change`).send(body)).status).toBe(400);
        continue;
      }
      expect(p.status, `${what}: ${JSON.stringify(p.body)}\n${log.join('\n')}`).toBe(200);
      let lines: L[] = [];
      if (toPrice === state.price && toQuantity === state.quantity) {
        state.scheduled = null; // back to the current plan: the scheduled change is dropped
      } else if (inTrial()) {
        // Nothing was paid: any change (a downgrade too) applies at once, unprorated, no order.
        Object.assign(state, { price: toPrice, quantity: toQuantity, scheduled: null });
        expect(p.body.data.effective).toBe('IMMEDIATE');
      } else if (newFee < oldFee && !step.immediate) {
        state.scheduled = { price: toPrice, quantity: toQuantity };
        expect(p.body.data.effective).toBe('PERIOD_END');
      } else if (newFee < oldFee) {
        // An immediate downgrade: the credit to the balance, its order of 0.
        const remaining = sec(end.getTime()) - sec(at);
        const length = sec(end.getTime()) - sec(start.getTime());
        const credit = halfUp(-BigInt(oldFee) * remaining, length);
        const charge = halfUp(BigInt(newFee) * remaining, length);
        const net = credit + charge;
        if (net < 0) {
          const mirrored = extras(-net, c, couponPeriod(state.period), tax);
          const negated: L[] = mirrored.map(([kind, amount, percent, held]) => (kind === 'TAX' ? [kind, -amount || 0, percent, -held! || 0] : [kind, -amount || 0]));
          const toBalance = -net + total(mirrored);
          lines = [['PRORATION', credit], ['PRORATION', charge], ...negated, ...(toBalance > 0 ? [['BALANCE', toBalance] as L] : [])];
          state.balance += toBalance;
        }
        Object.assign(state, { price: toPrice, quantity: toQuantity, scheduled: null });
        expect(p.body.data.effective).toBe('IMMEDIATE');
      } else {
        const remaining = sec(end.getTime()) - sec(at);
        const length = sec(end.getTime()) - sec(start.getTime());
        const credit = halfUp(-BigInt(oldFee) * remaining, length);
        const charge = halfUp(BigInt(newFee) * remaining, length);
        if (credit + charge > 0) {
          lines = [['PRORATION', credit], ['PRORATION', charge], ...extras(credit + charge, c, couponPeriod(state.period), tax)];
          // The customer's credit balance pays what it can of the upgrade's order, after tax (a CREDIT line).
          const drawn = Math.min(state.balance, total(lines));
          if (drawn > 0) lines.push(['CREDIT', -drawn]);
          state.balance -= drawn;
        }
        Object.assign(state, { price: toPrice, quantity: toQuantity, scheduled: null });
        expect(p.body.data.effective).toBe('IMMEDIATE');
      }
      const previewLines = normal(p.body.data.lines.map(asL));
      const toBalance = lines.find((l) => l[0] === 'BALANCE')?.[1] ?? 0;
      const applied = -(lines.find((l) => l[0] === 'CREDIT')?.[1] ?? 0) || 0;
      expect({ amountDue: p.body.data.amountDueCents, credit: p.body.data.balanceCreditCents, applied: p.body.data.appliedBalanceCents, lines: previewLines }, `preview of ${what}\n${log.join('\n')}`).toEqual({ amountDue: total(lines), credit: toBalance, applied, lines: normal(lines) });
      ctx.clock.set(new Date(changeAt).toISOString());
      const done = await api('post', `/v1/subscriptions/${subscriptionId}/change`).send({ ...body, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents, expectedBalanceCreditCents: p.body.data.balanceCreditCents });
      expect(done.status, `${what}: ${JSON.stringify(done.body)}\n${log.join('\n')}`).toBe(200);
      if (lines.length > 0) expected.push({ what, amount: total(lines), lines });
      log.push(`  → ${JSON.stringify(lines)}`);
    }

    // Every order of the subscription, in the order they were written, against the recomputation.
    const rows = await db()('orders').where({ subscription_id: subscriptionId }).orderBy([{ column: 'created_at' }, { column: 'billing_period' }]);
    const orders = [];
    for (const row of rows) orders.push((await api('get', `/v1/orders/${row.id}`)).body.data);
    for (const o of orders) {
      expect(o.status).toBe('PAID');
      expect(o.lines.reduce((sum: number, l: { amountCents: number }) => sum + l.amountCents, 0), `order ${o.orderId}`).toBe(o.amountCents);
    }
    const got = orders.map((o) => ({ amount: o.amountCents as number, lines: normal(o.lines.map(asL)) }));
    expect(got, log.join('\n')).toEqual(expected.map((e) => ({ amount: e.amount, lines: normal(e.lines) })));
    // The balance is the ledger's sum, and what the recomputation carried less what it drew.
    const s = (await api('get', `/v1/subscriptions/${subscriptionId}`)).body.data;
    expect(s.customerBalanceCents, log.join('\n')).toBe(state.balance);
  } finally {
    // Ends the run's subscription so later runs' renewal passes leave it alone; the next run starts after it.
    await ctx.services.subscriptions.cancel(subscriptionId, { atPeriodEnd: false }).catch(() => undefined);
    cursor = Math.max(cursor, state.last, periodEnd(state.period).getTime()) + 86_400_000;
  }
}

describe('a subscription’s life, money to the minor unit', () => {
  it('orders of random plan changes, seat changes, coupons, tax and renewals equal the recomputation', async () => {
    const runs = Number(process.env.KASSA_LIFECYCLE_RUNS ?? 20);
    // Always run first: the case that found the missing order of an upgrade the coupon covers whole
    // (53 → 8 × 53 with 16.81 off FOREVER: −53 + 424 − 371 = 0; Kassa applied the upgrade and wrote
    // no order, against the documented "an order of those lines"; seed 1222569045, path 6).
    const examples: [Life][] = [
      [{ amounts: [53, 4547], sameAmounts: false, quantity: 1, coupon: { percent: null, amountOff: 1681, duration: 'FOREVER', periods: null }, tax: null, startDay: 2, startMs: 79_079_674, steps: [{ kind: 'change', fraction: 840, price: null, quantity: 8, wait: 2, immediate: false }, { kind: 'renew' }, { kind: 'change', fraction: 564_926, price: 0, quantity: 2, wait: 0, immediate: false }, { kind: 'renew' }], trialDays: null }],
      // Immediate downgrades (issue 39's credit balance): a percent coupon and 19 % exclusive, the
      // credit drawn over renewals; an amount off and inclusive 9 % + 9 %, a downgrade and back up.
      [{ amounts: [4000, 1500], sameAmounts: false, quantity: 2, coupon: { percent: '25', amountOff: null, duration: 'FOREVER', periods: null }, tax: { country: 'DE', percents: ['19'] }, startDay: 3, startMs: 1_234_567, steps: [{ kind: 'change', fraction: 300_000, price: 1, quantity: 1, wait: 1, immediate: true }, { kind: 'renew' }, { kind: 'renew' }], trialDays: null }],
      [{ amounts: [2999, 999, 4999], sameAmounts: false, quantity: 3, coupon: { percent: null, amountOff: 700, duration: 'REPEATING', periods: 2 }, tax: { country: 'IN', region: 'KA', percents: ['9', '9'], inclusive: true }, startDay: 5, startMs: 7_654_321, steps: [{ kind: 'change', fraction: 100_000, price: 1, quantity: null, wait: 0, immediate: true }, { kind: 'change', fraction: 500_000, price: 2, quantity: 1, wait: 2, immediate: true }, { kind: 'renew' }, { kind: 'change', fraction: 900_000, price: 1, quantity: 1, wait: 0, immediate: true }, { kind: 'renew' }], trialDays: null }],
    ];
    await fc.assert(fc.asyncProperty(lifeArb, live), { numRuns: runs, examples, endOnFailure: true, ...(process.env.KASSA_LIFECYCLE_SEED ? { seed: Number(process.env.KASSA_LIFECYCLE_SEED) } : {}) });
  }, 240_000);
});
