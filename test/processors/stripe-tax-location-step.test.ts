/**
 * Tax on the Stripe rail when the merchant does not know the buyer's location (issue 39, item 4;
 * docs/tax.md "On Stripe: the buyer's country on Kassa's page"): the session is created without a
 * Stripe Checkout Session; Kassa's hosted page asks the country (region, tax id), then opens
 * Stripe Checkout (./stripe-server.ts, the official SDK) with fixed tax rates for it. The
 * session's amount and TAX lines equal what Stripe collects. Submitting the step twice reuses the
 * Checkout Session; another country closes it and opens another; two concurrent steps leave one.
 * Kassa no longer sends `dynamic_tax_rates`; a Checkout Session an earlier release sent with them
 * is still read back when it completes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Stripe from 'stripe';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from './stripe-server.js';
import { KASSA_DYNAMIC_TAX_KEY, KASSA_ORG_KEY, KASSA_SESSION_KEY } from '../../src/processors/stripe-processor.js';

const SECRET_KEY = 'sk_test_kassa4242';
const WEBHOOK_SECRET = 'whsec_kassatestsecret';
const EVENTS = '/v1/processors/stripe/events';

let ctx: TestContext;
let stripe: FakeStripe;
let base: string;
let priceId: string;
let planId: string;
let deRate: string;
let frRate: string;
let caRate: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  base = await stripe.start();
  ctx = await createTestContext({
    env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '500', WEBHOOK_ALLOW_LOOPBACK: 'true' },
  });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Ebook' });
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 1999, currency: 'EUR' })).id;
  const plan = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  planId = (await ctx.services.catalog.createPrice(plan.id, { amount: 1250, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  const tax = ctx.services.modules.tax.tax;
  deRate = (await tax.create(ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' })).id;
  frRate = (await tax.create(ctx.orgA.orgId, { displayName: 'TVA', percentage: '20', country: 'FR', inclusive: true })).id;
  caRate = (await tax.create(ctx.orgA.orgId, { displayName: 'Sales tax', percentage: '7.25', country: 'US', region: 'CA' })).id;
  await tax.updateSettings(ctx.orgA.orgId, { merchantCountry: 'DE' });
});
afterAll(async () => {
  await stripe?.stop();
  await ctx?.close();
});

let keys = 0;
const create = (body: object, apiKey = ctx.orgA.apiKey) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', apiKey).set('Idempotency-Key', `stripe-step-${++keys}`).send({ pricingId: priceId, ...body });
const db = () => ctx.testDb.database.db;
const deliver = (event: Stripe.Event) => {
  const signed = stripe.signed(event);
  return ctx.merchant.post(EVENTS).set('Content-Type', 'application/json').set('Stripe-Signature', signed.signature).send(signed.payload);
};
const readSession = async (id: string) => (await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
const order = async (id: string) => (await ctx.merchant.get(`/v1/orders/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
type Line = { kind: string; amountCents: number; tax?: Record<string, unknown> & { taxAmountCents: number } };
const sum = (lines: Line[]) => lines.reduce((s, l) => s + l.amountCents, 0);
const stripeRateOf = async (rateId: string) => (await db()('tax_rates').where({ id: rateId }).first()).stripe_tax_rate_id as string;
const pathOf = (url: string) => new URL(url).pathname;
const createCalls = () => stripe.requests.filter((r) => r.path === '/v1/checkout/sessions' && r.method === 'POST').length;
const stored = async (id: string) => db()('checkout_sessions').where({ id }).first();
/** Kassa's location step, as the buyer's browser posts it. */
const step = (url: string, form: Record<string, string>) => ctx.merchant.post(`${pathOf(url)}/tax`).type('form').send(form);
/** The Stripe Checkout Session a step redirected to (the fake's page is /c/pay/<id>). */
const stripeSessionAt = (location: string) => stripe.sessions.get(location.split('/').at(-1)!)!;

/** Creates a session without a location and takes the step with `form`: the Stripe Checkout Session it opened. */
async function stepped(body: object, form: Record<string, string>) {
  const res = await create(body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const went = await step(res.body.data.url, form);
  expect(went.status, went.text).toBe(303);
  return { id: res.body.data.id as string, url: res.body.data.url as string, stripeSession: stripeSessionAt(went.headers.location!) };
}

/** The buyer pays the Checkout Session on Stripe's page; its completed event is delivered. */
async function pay(kassaId: string, stripeSessionId: string) {
  const paid = stripe.complete(stripeSessionId, { email: 'buyer@example.com' });
  expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
  const session = await readSession(kassaId);
  return { paid, session, order: await order(session.orderId) };
}

describe('Kassa asks the country, then opens Stripe Checkout with fixed rates', () => {
  it('created without customerTax: no Stripe session yet; the step opens one with the country’s rate, and the order equals what Stripe collected', async () => {
    ctx.clock.set('2026-12-01T10:00:00.000Z');
    const before = createCalls();
    const res = await create({ quantity: 3 });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data).toMatchObject({ amount: 5997, url: expect.stringContaining('/checkout/') });
    expect(res.body.data.tax ?? null).toBeNull();
    expect(createCalls()).toBe(before);
    expect((await stored(res.body.data.id)).location_step).toBe(true);

    // The page asks the country; no card field (the card is Stripe's).
    const page = await ctx.merchant.get(pathOf(res.body.data.url));
    expect(page.status).toBe(200);
    expect(page.text).toContain('Where are you buying from?');
    expect(page.text).toContain('Continue to payment');
    expect(page.text).not.toContain('cardNumber');

    const went = await step(res.body.data.url, { country: 'DE', region: '', taxId: '' });
    expect(went.status).toBe(303);
    const opened = stripeSessionAt(went.headers.location!);
    expect(went.headers.location).toBe(opened.url);
    const sent = stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').at(-1)!.body as Record<string, unknown>;
    const item = (sent.line_items as Record<string, unknown>[])[0]!;
    expect(item.tax_rates).toEqual([await stripeRateOf(deRate)]);
    expect(item.dynamic_tax_rates).toBeUndefined();
    expect(sent.billing_address_collection).toBeUndefined();

    // 3 × 19.99 = 59.97; 19 % = 11.3943 → 11.39: the session now shows what Stripe will collect.
    const session = await readSession(res.body.data.id);
    expect(session).toMatchObject({ amount: 7136, tax: { country: 'DE', region: null, reverseCharge: false, rates: [{ rateId: deRate, percentage: '19' }] } });
    expect(opened.amount_total).toBe(7136);
    expect(opened.total_details!.amount_tax).toBe(1139);

    const { paid, order: o } = await pay(res.body.data.id, opened.id);
    expect(o.amountCents).toBe(paid.amount_total);
    expect(o.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 5997], ['TAX', 1139]]);
    expect(o.lines[1].tax).toMatchObject({ rateId: deRate, country: 'DE', percentage: '19', taxAmountCents: paid.total_details!.amount_tax });
    expect(sum(o.lines)).toBe(paid.amount_total);
  });

  it('the step submitted twice (one after the other, and at once) gets the same Stripe session', async () => {
    const { id, url, stripeSession } = await stepped({}, { country: 'DE' });
    const calls = createCalls();
    const again = await step(url, { country: 'DE' });
    expect(again.status).toBe(303);
    expect(again.headers.location).toBe(stripeSession.url);
    expect(createCalls()).toBe(calls);

    // Two submissions racing from a fresh session: Stripe gives both the same Checkout Session (same key).
    const res = await create({});
    const both = await Promise.all([step(res.body.data.url, { country: 'DE' }), step(res.body.data.url, { country: 'DE' })]);
    expect(both.map((r) => r.status)).toEqual([303, 303]);
    expect(both[0]!.headers.location).toBe(both[1]!.headers.location);
    expect((await stored(res.body.data.id)).processor_session_id).toBe(stripeSessionAt(both[0]!.headers.location!).id);
    expect((await readSession(id)).status).toBe('CREATED');
  });

  it('two different countries at once: one Stripe session stays open, and it is the stored one with the stored tax', async () => {
    for (let round = 0; round < 8; round++) {
      const res = await create({});
      const [de, fr] = await Promise.all([step(res.body.data.url, { country: 'DE' }), step(res.body.data.url, { country: 'FR' })]);
      expect([de.status, fr.status], `${de.text}${fr.text}`).toContain(303);
      for (const r of [de, fr]) expect([303, 409]).toContain(r.status);
      const row = await stored(res.body.data.id);
      const open = [...stripe.sessions.values()].filter((s) => s.client_reference_id === res.body.data.id && s.status === 'open');
      expect(open.map((s) => s.id)).toEqual([row.processor_session_id]);
      const rate = row.tax.location.country === 'DE' ? deRate : frRate;
      // DE adds 19 % (2379), FR's 20 % is inclusive (1999): Stripe's total tells which rate it has.
      expect(stripe.sessions.get(row.processor_session_id)!.amount_total).toBe(Number(row.amount));
      expect(row.tax.rates[0].rateId).toBe(rate);
    }
  });

  it('coming back and changing the country: the first Stripe session is expired, a new one opened; its expired event leaves Kassa’s session open', async () => {
    const { id, url, stripeSession: first } = await stepped({}, { country: 'DE' });
    // Back on Kassa's page (the browser's back button, Stripe's back link): the step, with Germany and the tax shown.
    const back = await ctx.merchant.get(pathOf(url));
    expect(back.status).toBe(200);
    expect(back.text).toContain('Tax for Germany');
    expect(back.text).toMatch(/data-testid="tax-lines"/);
    expect(back.text).toContain('<option value="DE" selected>');

    const went = await step(url, { country: 'FR' });
    expect(went.status).toBe(303);
    const second = stripeSessionAt(went.headers.location!);
    expect(second.id).not.toBe(first.id);
    expect(stripe.sessions.get(first.id)!.status).toBe('expired');
    expect(second.amount_total).toBe(1999); // inclusive
    expect(await readSession(id)).toMatchObject({ status: 'CREATED', amount: 1999, tax: { country: 'FR', rates: [{ rateId: frRate }] } });
    // Stripe's event for the session Kassa closed: not the Kassa session's expiry.
    expect((await deliver(stripe.event('checkout.session.expired', stripe.sessions.get(first.id)!))).status).toBe(200);
    expect((await readSession(id)).status).toBe('CREATED');

    // And back to Germany: a third Stripe session (a new key: the previous session is part of it).
    const third = stripeSessionAt((await step(url, { country: 'DE' })).headers.location!);
    expect(new Set([first.id, second.id, third.id]).size).toBe(3);
    expect(stripe.sessions.get(second.id)!.status).toBe('expired');
    const { paid, order: o } = await pay(id, third.id);
    expect(paid.amount_total).toBe(2379); // 19.99 × 19 % = 3.7981 → 3.80
    expect(o.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1999], ['TAX', 380]]);
  });

  it('a buyer who paid the first Stripe session meanwhile: the change is not made, that payment stands', async () => {
    const { id, url, stripeSession: first } = await stepped({}, { country: 'DE' });
    const paid = stripe.complete(first.id, { email: 'tab@example.com' });
    const calls = createCalls();
    const went = await step(url, { country: 'FR' });
    expect(went.status).toBe(303);
    expect(went.headers.location).toBe(`${pathOf(url)}/complete`);
    expect(createCalls()).toBe(calls);
    const processing = await ctx.merchant.get(went.headers.location!);
    expect(processing.text).toContain('processing');
    expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
    const session = await readSession(id);
    expect(session).toMatchObject({ status: 'COMPLETE', amount: 2379, tax: { country: 'DE' } });
    expect((await order(session.orderId)).amountCents).toBe(paid.amount_total);
  });

  it('a US state’s rate; a state without one: no tax and no tax_rates sent', async () => {
    const ca = await stepped({}, { country: 'US', region: 'CA' });
    expect(ca.stripeSession.amount_total).toBe(1999 + 145);
    const { order: o } = await pay(ca.id, ca.stripeSession.id);
    expect(o.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1999], ['TAX', 145]]);
    expect(o.lines[1].tax).toMatchObject({ rateId: caRate, country: 'US', region: 'CA' });

    const ny = await stepped({}, { country: 'US', region: 'NY' });
    const sent = stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').at(-1)!.body as Record<string, Record<string, unknown>[]>;
    expect(sent.line_items![0]!.tax_rates).toBeUndefined();
    expect(ny.stripeSession.amount_total).toBe(1999);
    expect(await readSession(ny.id)).toMatchObject({ amount: 1999, tax: { country: 'US', region: 'NY', rates: [] } });
  });

  it('EU reverse charge from a well-formed VAT id of another member state: no rate sent, a 0 TAX line', async () => {
    const fr = await stepped({}, { country: 'FR', taxId: 'FR40303265045' });
    const sent = stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').at(-1)!.body as Record<string, Record<string, unknown>[]>;
    expect(sent.line_items![0]!.tax_rates).toBeUndefined();
    expect(fr.stripeSession.amount_total).toBe(1999);
    const { order: o } = await pay(fr.id, fr.stripeSession.id);
    expect(o.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1999], ['TAX', 0]]);
    expect(o.lines[1].tax).toMatchObject({ reverseCharge: true, taxId: 'FR40303265045' });
  });

  it('a subscription: default_tax_rates from the step; the first order and the renewal equal Stripe’s invoices', async () => {
    ctx.clock.set('2026-12-01T10:00:00.000Z');
    const { id, stripeSession } = await stepped({ pricingId: planId }, { country: 'DE' });
    const sent = stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').at(-1)!.body as Record<string, Record<string, unknown>>;
    expect(sent.subscription_data!.default_tax_rates).toEqual([await stripeRateOf(deRate)]);
    const paid = stripe.complete(stripeSession.id, { email: 'sub@example.com' });
    expect(paid.amount_total).toBe(1488); // 1250 + 237.5 → 238
    expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
    const row = await db()('subscriptions').where({ checkout_session_id: id }).first();
    expect((await order(row.initial_order_id)).lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1250], ['TAX', 238]]);
    ctx.clock.set('2027-01-01T10:00:00.000Z');
    const invoice = stripe.renew(stripe.subscriptionOf(stripeSession.id).id);
    expect(invoice).toMatchObject({ status: 'paid', amount_paid: 1488 });
    expect((await deliver(stripe.invoiceEvent('invoice.paid', invoice))).status).toBe(200);
    const renewal = await db()('orders').where({ subscription_id: row.id, billing_period: 1 }).first();
    const o = await order(renewal.id);
    expect(o.amountCents).toBe(invoice.amount_paid);
    expect(o.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1250], ['TAX', 238]]);
  });

  it('a payment link (which never knows the location): the link opens the step, no Stripe session before it; the order equals what Stripe collected', async () => {
    const { link } = await ctx.services.catalog.createPaymentLink(priceId, {});
    const before = createCalls();
    const open = await ctx.merchant.get(`${pathOf(ctx.services.catalog.paymentLinkUrl(link))}?merchant_reference=link-tax-1`);
    expect(open.status).toBe(303);
    expect(createCalls()).toBe(before);
    const row = await db()('checkout_sessions').where({ payment_link_id: link.id }).first();
    expect(row).toMatchObject({ location_step: true, processor_session_id: null, merchant_reference: 'link-tax-1', amount: 1999 });
    const page = await ctx.merchant.get(open.headers.location as string);
    expect(page.status).toBe(200);
    expect(page.text).toContain('Where are you buying from?');

    const went = await step(`http://kassa.test${open.headers.location as string}`, { country: 'DE', region: '', taxId: '' });
    expect(went.status, went.text).toBe(303);
    const opened = stripeSessionAt(went.headers.location!);
    const sent = stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').at(-1)!.body as Record<string, unknown>;
    expect((sent.line_items as Record<string, unknown>[])[0]!.tax_rates).toEqual([await stripeRateOf(deRate)]);
    // 19.99 × 19 % = 3.7981 → 3.80.
    expect(opened.amount_total).toBe(2379);
    const { paid, order: o } = await pay(row.id, opened.id);
    expect(o.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1999], ['TAX', 380]]);
    expect(sum(o.lines)).toBe(paid.amount_total);
  });

  it('with customerTax, or for an organization without rates, Stripe’s session opens at creation as before', async () => {
    const before = createCalls();
    const res = await create({ customerTax: { country: 'DE' } });
    expect(res.status).toBe(201);
    expect(createCalls()).toBe(before + 1);
    expect((await stored(res.body.data.id)).location_step).toBe(false);
    const redirect = await ctx.merchant.get(pathOf(res.body.data.url));
    expect(redirect.status).toBe(303);
    expect(redirect.headers.location).toMatch(/\/c\/pay\//);

    const product = await ctx.services.catalog.createProduct(ctx.orgB.orgId, { name: 'Course' });
    const priceB = (await ctx.services.catalog.createPrice(product.id, { amount: 5000, currency: 'EUR' })).id;
    const untaxed = await create({ pricingId: priceB }, ctx.orgB.apiKey);
    expect(untaxed.status).toBe(201);
    expect(createCalls()).toBe(before + 2);
    expect((await ctx.merchant.get(pathOf(untaxed.body.data.url))).status).toBe(303);
  });
});

describe('the step refuses bad input with a page, never a 500', () => {
  it('a bad country, region or tax id: a 303 to the step’s page, which is a 400 with a human message; nothing opened; the form keeps the country typed', async () => {
    const res = await create({});
    const calls = createCalls();
    for (const [form, kind, message, selected] of [
      [{ country: 'XX' }, 'country', 'Choose your country from the list.', null],
      [{}, 'country', 'Choose your country from the list.', null],
      [{ country: 'US', region: 'C@' }, 'region', 'Enter your state or region as its short code', 'US'],
      [{ country: 'DE', taxId: 'DE123' }, 'taxId', 'does not look right for the country you chose', 'DE'],
    ] as const) {
      // Redirect-after-POST: the browser's back button never lands on a POST result ("Confirm Form Resubmission").
      const posted = await step(res.body.data.url, form as Record<string, string>);
      expect(posted.status, posted.text).toBe(303);
      const location = new URL(posted.headers.location!, 'http://kassa.test');
      expect(location.pathname).toBe(pathOf(res.body.data.url));
      expect(location.searchParams.get('step_error')).toBe(kind);
      // The tax id never goes into the URL.
      expect(location.searchParams.has('taxId')).toBe(false);
      const page = await ctx.merchant.get(posted.headers.location!);
      expect(page.status, page.text).toBe(400);
      expect(page.headers['content-type']).toMatch(/text\/html/);
      expect(page.text).toContain(message);
      expect(page.text).toContain('role="alert"');
      expect(page.text).toMatch(/aria-invalid="true" aria-describedby="[^"]*step-error"/);
      if (selected) expect(page.text).toContain(`<option value="${selected}" selected>`);
    }
    // A kind the page does not know, and text in the query: the plain step, nothing reflected.
    const odd = await ctx.merchant.get(`${pathOf(res.body.data.url)}?step_error=<b>hi</b>&country=<x>`);
    expect(odd.status).toBe(200);
    expect(odd.text).not.toContain('<b>hi</b>');
    expect(odd.text).not.toContain('role="alert"');
    expect(createCalls()).toBe(calls);
    expect((await readSession(res.body.data.id)).tax ?? null).toBeNull();
  });

  it('too many fields, an unknown checkout, an expired one, a Stripe outage', async () => {
    const res = await create({});
    const many = await ctx.merchant.post(`${pathOf(res.body.data.url)}/tax`).type('form').send('a=1&b=2&c=3&d=4&e=5&f=6&g=7&country=DE');
    expect(many.status).toBeGreaterThanOrEqual(400);
    expect(many.status).toBeLessThan(500);
    expect((await ctx.merchant.post('/checkout/nope/tax').type('form').send({ country: 'DE' })).status).toBe(404);
    // The sandbox's card form does not apply here: back to the step, nothing charged or changed.
    // (Promotion codes do: test/processors/stripe-location-promotion-code.test.ts.)
    for (const [path, form] of [['pay', { cardNumber: '4242424242424242', expiry: '12/30', cvc: '123', email: 'a@example.com' }]] as const) {
      const other = await ctx.merchant.post(`${pathOf(res.body.data.url)}/${path}`).type('form').send(form);
      expect(other.status).toBe(303);
      expect(other.headers.location).toBe(pathOf(res.body.data.url));
    }

    stripe.failNext('error500', 5, '/v1/checkout/sessions');
    const down = await step(res.body.data.url, { country: 'DE' });
    expect(down.status).toBe(503);
    expect(down.headers['content-type']).toMatch(/text\/html/);
    expect((await readSession(res.body.data.id)).tax ?? null).toBeNull();
    // Stripe back: the same step goes through.
    expect((await step(res.body.data.url, { country: 'DE' })).status).toBe(303);

    const expiring = await create({ expiresIn: 1800 });
    ctx.clock.set(new Date(ctx.clock.now().getTime() + 1801_000).toISOString());
    const late = await step(expiring.body.data.url, { country: 'DE' });
    expect(late.status).toBe(303);
    expect(late.headers.location).toBe(pathOf(expiring.body.data.url));
    expect((await ctx.merchant.get(late.headers.location!)).status).toBe(410);
  });
});

describe('Checkout Sessions an earlier release sent with dynamic tax rates', () => {
  it('are still read back when they complete: the order carries the rate Stripe chose', async () => {
    const res = await create({ quantity: 3 });
    const client = new (await import('stripe')).default(SECRET_KEY, { host: '127.0.0.1', port: Number(new URL(base).port), protocol: 'http' });
    const old = await client.checkout.sessions.create({
      mode: 'payment',
      line_items: [{ quantity: 3, price_data: { currency: 'eur', unit_amount: 1999, product_data: { name: 'Ebook' } }, dynamic_tax_rates: [await stripeRateOf(deRate), await stripeRateOf(caRate)] } as Stripe.Checkout.SessionCreateParams.LineItem],
      billing_address_collection: 'required',
      client_reference_id: res.body.data.id,
      metadata: { [KASSA_SESSION_KEY]: res.body.data.id, [KASSA_ORG_KEY]: ctx.orgA.orgId, [KASSA_DYNAMIC_TAX_KEY]: 'true' },
      success_url: 'https://example.com/ok',
    });
    // As the earlier release stored it: opened at creation, no location step.
    await db()('checkout_sessions').where({ id: res.body.data.id }).update({ processor_session_id: old.id, processor_url: old.url, location_step: false });
    const paid = stripe.complete(old.id, { email: 'old@example.com', address: { country: 'DE' } });
    expect((await deliver(stripe.event('checkout.session.completed', paid))).body.outcome).toBe('applied');
    const session = await readSession(res.body.data.id);
    expect(session).toMatchObject({ status: 'COMPLETE', amount: 7136, tax: { country: 'DE' } });
    const o = await order(session.orderId);
    expect(o.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 5997], ['TAX', 1139]]);
    expect(o.amountCents).toBe(paid.amount_total);
  });
});
