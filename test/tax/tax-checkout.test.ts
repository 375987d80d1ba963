/**
 * Tax rates end to end on the sandbox rail (issue 39, item 4): the console's rate operations and
 * tax settings, the merchant API's list/read, sessions taxed at creation (exclusive, inclusive,
 * region, reverse charge), the hosted page asking the buyer's country (human messages for bad
 * input), orders with TAX lines (lines add up; the order of kinds), receipts' lines, renewals
 * carrying the first order's tax, and 400s naming the field.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { as, signUp, type Member } from '../accounts/helpers.js';

let ctx: TestContext;
let owner: Member;
let viewer: Member;
let ownerB: Member;
let priceId: string;
let planId: string;

beforeAll(async () => {
  ctx = await createTestContext({ env: { TRUST_PROXY: '1' } });
  [owner, viewer, ownerB] = await Promise.all([signUp(ctx, ctx.orgA.orgId, 'owner'), signUp(ctx, ctx.orgA.orgId, 'viewer'), signUp(ctx, ctx.orgB.orgId, 'owner')]);
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Ebook' });
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 1000, currency: 'EUR' })).id;
  const plan = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  planId = (await ctx.services.catalog.createPrice(plan.id, { amount: 2000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

const post = (m: Member, path: string, body?: object) => {
  const req = as(m, ctx.merchant.post(path));
  return body === undefined ? req : req.send(body);
};
const put = (m: Member, path: string, body: object) => as(m, ctx.merchant.put(path)).send(body);
async function rate(body: object, m: Member = owner): Promise<string> {
  const res = await post(m, '/v1/console/tax-rates', body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data.id;
}
let keys = 0;
const createSession = (body: object, apiKey = ctx.orgA.apiKey) =>
  ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', apiKey).set('Idempotency-Key', `tax-${++keys}`).send({ pricingId: priceId, ...body });
const pagePath = (url: string) => new URL(url).pathname;
const pay = (url: string, form: Record<string, string> = {}) =>
  ctx.merchant.post(`${pagePath(url)}/pay`).type('form').send({ email: 'buyer@example.com', cardNumber: '4242 4242 4242 4242', expiry: '12/30', cvc: '123', ...form });
const orderOf = async (sessionId: string) => {
  const s = (await ctx.merchant.get(`/v1/checkout-sessions/${sessionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  return (await ctx.merchant.get(`/v1/orders/${s.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
};
type Line = { kind: string; amountCents: number; description: string; tax?: Record<string, unknown> };
const sumOf = (lines: Line[]) => lines.reduce((s, l) => s + l.amountCents, 0);

let deVat: string;
let frVat: string;
let usCa: string;
describe('tax rates and settings', () => {
  it('are created and archived in the console (catalog:write), read in the merchant API (catalog:read)', async () => {
    deVat = await rate({ displayName: 'VAT', percentage: '19', country: 'de', description: 'German VAT' });
    frVat = await rate({ displayName: 'TVA', percentage: '20.00', country: 'FR', inclusive: true });
    usCa = await rate({ displayName: 'Sales tax', percentage: '7.25', country: 'US', region: 'US-CA' });
    const list = await ctx.merchant.get('/v1/tax-rates').set('X-API-Key', ctx.orgA.apiKey);
    expect(list.status).toBe(200);
    const byId = Object.fromEntries(list.body.data.records.map((r: { id: string }) => [r.id, r]));
    expect(byId[deVat]).toMatchObject({ country: 'DE', percentage: '19', inclusive: false, region: null, status: 'ACTIVE' });
    expect(byId[frVat]).toMatchObject({ percentage: '20', inclusive: true });
    expect(byId[usCa]).toMatchObject({ country: 'US', region: 'CA', percentage: '7.25' });
    expect((await ctx.merchant.get(`/v1/tax-rates/${deVat}`).set('X-API-Key', ctx.orgB.apiKey)).status).toBe(404);
    expect((await post(viewer, '/v1/console/tax-rates', { displayName: 'VAT', percentage: '5', country: 'AT' })).status).toBe(403);
    // Archived: no longer listed as ACTIVE, refused to a viewer, 404 for another organization's rate.
    const atVat = await rate({ displayName: 'USt', percentage: '20', country: 'AT' });
    expect((await post(viewer, `/v1/console/tax-rates/${atVat}/archive`)).status).toBe(403);
    const archived = await post(owner, `/v1/console/tax-rates/${atVat}/archive`);
    expect(archived.status, JSON.stringify(archived.body)).toBe(200);
    expect(archived.body.data).toMatchObject({ id: atVat, status: 'ARCHIVED' });
    expect((await ctx.merchant.get(`/v1/tax-rates/${atVat}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.status).toBe('ARCHIVED');
    // Audited like the catalog's changes.
    const audit = await ctx.testDb.database.db('audit_log').where({ org_id: ctx.orgA.orgId, action: 'tax_rate.create' });
    expect(audit.length).toBe(4);
  });

  it('refuses bad fields with a 400 naming the field', async () => {
    const cases: [object, string][] = [
      [{ displayName: 'VAT', percentage: '0', country: 'DE' }, 'body.percentage'],
      [{ displayName: 'VAT', percentage: '100.5', country: 'DE' }, 'body.percentage'],
      [{ displayName: 'VAT', percentage: '19', country: 'XX' }, 'body.country'],
      [{ displayName: 'VAT', percentage: '19', country: 'US', region: 'California' }, 'body.region'],
      [{ displayName: '   ', percentage: '19', country: 'DE' }, 'body.displayName'],
      [{ displayName: 'VAT', percentage: '19', country: 'FR' }, 'body.inclusive'], // FR's rates are inclusive
    ];
    for (const [body, field] of cases) {
      const res = await post(owner, '/v1/console/tax-rates', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.message ?? JSON.stringify(res.body)).toContain(field);
    }
  });

  it("keep the merchant's country (settings:manage) for reverse charge", async () => {
    expect((await as(owner, ctx.merchant.get('/v1/console/tax-settings'))).body.data).toEqual({ merchantCountry: null });
    expect((await put(owner, '/v1/console/tax-settings', { merchantCountry: 'DX' })).status).toBe(400);
    expect((await put(viewer, '/v1/console/tax-settings', { merchantCountry: 'DE' })).status).toBe(403);
    const res = await put(owner, '/v1/console/tax-settings', { merchantCountry: 'de' });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ merchantCountry: 'DE' });
    expect((await as(ownerB, ctx.merchant.get('/v1/console/tax-settings'))).body.data).toEqual({ merchantCountry: null });
  });
});

describe('taxed checkouts and orders', () => {
  it('exclusive: the session and the order carry a TAX line on top, the lines add up', async () => {
    const res = await createSession({ quantity: 3, customerTax: { country: 'DE' } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    // 3 × 10.00 = 30.00; 19 % = 5.70
    expect(res.body.data.amount).toBe(3570);
    expect(res.body.data.tax).toEqual({ country: 'DE', region: null, taxId: null, reverseCharge: false, rates: [{ rateId: deVat, displayName: 'VAT', percentage: '19', inclusive: false }] });
    const page = await ctx.merchant.get(pagePath(res.body.data.url));
    expect(page.text).toContain('data-testid="tax-lines"');
    expect(page.text).toContain('VAT 19%');
    expect(page.text).toContain('€35.70');
    expect((await pay(res.body.data.url, { amount: '3570' })).status).toBe(303);
    const order = await orderOf(res.body.data.id);
    expect(order.amountCents).toBe(3570);
    expect(order.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 3000], ['TAX', 570]]);
    expect(order.lines[1]).toMatchObject({ description: 'VAT 19%', exactAmountDecimal: '570', tax: { rateId: deVat, inclusive: false, country: 'DE', taxableAmountCents: 3000, taxAmountCents: 570, reverseCharge: false, taxId: null } });
    expect(sumOf(order.lines)).toBe(order.amountCents);
  });

  it('inclusive: the total stays the price, the TAX line adds 0 and shows the tax included', async () => {
    const res = await createSession({ customerTax: { country: 'FR' } });
    expect(res.body.data.amount).toBe(1000);
    await pay(res.body.data.url);
    const order = await orderOf(res.body.data.id);
    expect(order.amountCents).toBe(1000);
    // 1000 × 20 / 120 = 166.67 → 167
    expect(order.lines[1]).toMatchObject({ kind: 'TAX', description: 'TVA 20% (included)', amountCents: 0, tax: { inclusive: true, taxAmountCents: 167, taxableAmountCents: 1000 } });
  });

  it("region: a state's rate applies in that state only", async () => {
    const ca = await createSession({ customerTax: { country: 'US', region: 'ca' } });
    expect(ca.body.data.amount).toBe(1073); // 72.5 → 73
    const ny = await createSession({ customerTax: { country: 'US', region: 'NY' } });
    expect(ny.body.data.amount).toBe(1000);
    expect(ny.body.data.tax.rates).toEqual([]);
  });

  it('EU reverse charge: a well-formed VAT id of another member state pays no tax, with a Reverse charge line', async () => {
    await rate({ displayName: 'VAT', percentage: '21', country: 'NL' });
    const res = await createSession({ customerTax: { country: 'NL', taxId: 'NL004495445B01' } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.amount).toBe(1000);
    expect(res.body.data.tax).toMatchObject({ reverseCharge: true, taxId: 'NL004495445B01', rates: [] });
    await pay(res.body.data.url);
    const order = await orderOf(res.body.data.id);
    expect(order.lines[1]).toMatchObject({ kind: 'TAX', amountCents: 0, tax: { reverseCharge: true, rateId: null, percentage: '0', taxId: 'NL004495445B01' } });
    expect(order.lines[1].description).toContain('Reverse charge');
    // A German buyer with a German VAT id pays German VAT (same state as the merchant).
    const domestic = await createSession({ customerTax: { country: 'DE', taxId: 'DE136695976' } });
    expect(domestic.body.data.amount).toBe(1190);
  });

  it('a bad location is a 400 naming the field, nothing stored', async () => {
    const cases: [object, string][] = [
      [{ country: 'ZZ' }, 'body.customerTax.country'],
      [{ country: 'US', region: 'Calif.' }, 'body.customerTax.region'],
      [{ country: 'DE', taxId: 'DE136695977' }, 'body.customerTax.taxId'],
      [{ country: 'DE', taxId: 'FR40303265045' }, 'body.customerTax.taxId'],
    ];
    for (const [customerTax, field] of cases) {
      const res = await createSession({ customerTax });
      expect(res.status, JSON.stringify(customerTax)).toBe(400);
      expect(res.body.message).toContain(field);
    }
  });

  it('renewals carry the first order’s tax', async () => {
    ctx.clock.set('2026-12-01T00:00:00.000Z');
    const res = await createSession({ pricingId: planId, customerTax: { country: 'DE' } });
    expect(res.body.data.amount).toBe(2380);
    await pay(res.body.data.url);
    const first = await orderOf(res.body.data.id);
    ctx.clock.set('2027-01-01T00:00:01.000Z');
    await ctx.services.subscriptions.processDue();
    const orders = (await ctx.merchant.get(`/v1/orders?subscription_id=${first.subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    const records = (orders.records ?? orders) as { orderId: string; amountCents: number; lines: Line[]; billingPeriod?: number }[];
    const renewal = records.find((o) => o.orderId !== first.orderId);
    expect(renewal, JSON.stringify(records.map((o) => o.orderId))).toBeDefined();
    expect(renewal!.amountCents).toBe(2380);
    expect(renewal!.lines.map((l) => [l.kind, l.amountCents, l.description])).toEqual([['PRICE', 2000, 'Pro plan'], ['TAX', 380, 'VAT 19%']]);
  });

  it('a plan or seat change of a subscription charged with exclusive tax carries the tax: preview = charge, the stored amount keeps its tax, the renewal bills the new seats', async () => {
    // Before (session 15) this was refused with 409 ("not supported yet").
    ctx.clock.set('2027-02-01T00:00:00.000Z');
    const res = await createSession({ pricingId: planId, customerTax: { country: 'DE' } });
    await pay(res.body.data.url);
    const first = await orderOf(res.body.data.id);
    const subId = first.subscriptionId as string;
    ctx.clock.set('2027-02-10T00:00:00.000Z');
    const preview = await ctx.merchant.post(`/v1/subscriptions/${subId}/change/preview`).set('X-API-Key', ctx.orgA.apiKey).send({ quantity: 2 });
    expect(preview.status, JSON.stringify(preview.body)).toBe(200);
    const q = preview.body.data;
    // 19 of February's 28 days remain: −2000·19/28 = −1357.14 → −1357; 4000·19/28 = 2714.29 → 2714;
    // net 1357; VAT 19 % of the net = 257.83 → 258 (rounded once, half up); due 1615.
    expect(q.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRORATION', -1357], ['PRORATION', 2714], ['TAX', 258]]);
    expect(q.lines[2]).toMatchObject({ description: 'VAT 19%', tax: { taxableAmountCents: 1357, taxAmountCents: 258, percentage: '19', inclusive: false } });
    expect(q.amountDueCents).toBe(1615);
    expect(q.from).toMatchObject({ unitAmountCents: 2000, quantity: 1, amountCents: 2000 });
    expect(q.to).toMatchObject({ unitAmountCents: 2000, quantity: 2, amountCents: 4000 });
    expect(q.nextRenewalAmountCents).toBe(4760);
    const change = await ctx.merchant.post(`/v1/subscriptions/${subId}/change`).set('X-API-Key', ctx.orgA.apiKey).send({ quantity: 2, prorationDate: q.prorationDate, expectedAmountDueCents: q.amountDueCents });
    expect(change.status, JSON.stringify(change.body)).toBe(200);
    const order = (await ctx.merchant.get(`/v1/orders/${change.body.data.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(order.amountCents).toBe(1615);
    expect(order.lines).toEqual(q.lines);
    expect(sumOf(order.lines)).toBe(order.amountCents);
    const sub = (await ctx.merchant.get(`/v1/subscriptions/${subId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    // The stored amount keeps its meaning: the fee before any coupon, with the exclusive tax on it.
    expect([sub.amountCents, sub.quantity]).toEqual([4760, 2]);
    ctx.clock.set('2027-03-01T00:00:01.000Z');
    await ctx.services.subscriptions.processDue();
    const orders = (await ctx.merchant.get(`/v1/orders?subscription_id=${subId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    const renewal = ((orders.records ?? orders) as { orderId: string; amountCents: number; lines: Line[] }[]).find((o) => o.orderId !== first.orderId && o.orderId !== order.orderId);
    expect(renewal?.lines.map((l) => [l.kind, l.amountCents, (l as { quantity?: string | null }).quantity ?? null]), JSON.stringify(orders)).toEqual([['PRICE', 4000, '2'], ['TAX', 760, null]]);
    expect(renewal?.amountCents).toBe(4760);
    // A downgrade is scheduled with its tax: 1 seat again at the period end stores 2380.
    ctx.clock.set('2027-03-05T00:00:00.000Z');
    const down = await ctx.merchant.post(`/v1/subscriptions/${subId}/change`).set('X-API-Key', ctx.orgA.apiKey).send({ quantity: 1 });
    expect(down.status, JSON.stringify(down.body)).toBe(200);
    expect(down.body.data.subscription.scheduledChange).toMatchObject({ quantity: 1, amountCents: 2380 });
    expect(down.body.data.preview).toMatchObject({ amountDueCents: 0, nextRenewalAmountCents: 2380, to: { amountCents: 2000 } });
  });
});

describe('the hosted page asks the buyer', () => {
  it('for the country first, with human messages; then shows the total with tax and charges it', async () => {
    const res = await createSession({});
    expect(res.body.data.amount).toBe(1000);
    const url = pagePath(res.body.data.url);
    const first = await ctx.merchant.get(url);
    expect(first.text).toContain('Where are you buying from?');
    expect(first.text).not.toContain('name="cardNumber"');
    // Paying before choosing is refused, nothing charged.
    expect((await pay(res.body.data.url)).status).toBe(400);
    const badCountry = await ctx.merchant.post(`${url}/tax`).type('form').send({ country: 'ZZ' });
    expect(badCountry.status).toBe(400);
    expect(badCountry.text).toContain('Choose your country from the list.');
    const badVat = await ctx.merchant.post(`${url}/tax`).type('form').send({ country: 'DE', taxId: 'DE123' });
    expect(badVat.status).toBe(400);
    expect(badVat.text).toContain('does not look right');
    expect(badVat.text).toContain('value="DE123"');
    const ok = await ctx.merchant.post(`${url}/tax`).type('form').send({ country: 'DE', region: '', taxId: '' });
    expect(ok.status).toBe(303);
    const page = await ctx.merchant.get(url);
    expect(page.text).toContain('€11.90');
    expect(page.text).toContain('name="cardNumber"');
    // The billing country (and tax id), which decides the tax, comes before the card and the pay
    // button in the page's reading order (it came after the pay button).
    const at = (needle: string) => {
      const i = page.text.indexOf(needle);
      expect(i, needle).toBeGreaterThan(-1);
      return i;
    };
    expect(at('id="country"')).toBeLessThan(at('name="cardNumber"'));
    expect(at('id="taxId"')).toBeLessThan(at(`action="${url}/pay"`));
    expect(at('data-testid="tax-form"')).toBeLessThan(at('Pay €11.90</button>'));
    // A page shown before a change of total does not charge the new total.
    expect((await pay(res.body.data.url, { amount: '1000' })).status).toBe(409);
    expect((await pay(res.body.data.url, { amount: '1190' })).status).toBe(303);
    const order = await orderOf(res.body.data.id);
    expect(order.amountCents).toBe(1190);
    expect(order.lines.map((l: Line) => l.kind)).toEqual(['PRICE', 'TAX']);
  });
});

/**
 * Coupons and tax together (merge of coupons39 and tax39): charges → DISCOUNT → TAX on the
 * discounted amount; the hosted page takes both the promotion code and the country; renewals get
 * the coupon while it lasts and the tax every period.
 */
describe('a promotion code and a taxed country together', () => {
  const couponApi = async (path: string, body: object) => {
    const res = await ctx.merchant.post(path).set('X-API-Key', ctx.orgA.apiKey).send(body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.data as { id: string; code: string };
  };

  it('on the hosted page: code on the country step, then the country; DISCOUNT, then TAX on the discounted amount', async () => {
    const c = await couponApi('/v1/coupons', { name: 'Spring', duration: 'ONCE', percentOff: '12.5' });
    await couponApi('/v1/promotion-codes', { couponId: c.id, code: 'SPRING-TAX' });
    const res = await createSession({ quantity: 3, customerEmail: 'both@example.com' });
    expect(res.body.data.amount).toBe(3000);
    const url = pagePath(res.body.data.url);
    const first = await ctx.merchant.get(url);
    // The country step offers the promotion-code form too, and no payment form yet.
    expect(first.text).toContain('Where are you buying from?');
    expect(first.text).toContain('Add a promotion code');
    expect(first.text).not.toContain('name="cardNumber"');
    const applied = await ctx.merchant.post(`${url}/promotion-code`).type('form').send({ code: 'spring-tax' });
    expect(applied.status, applied.text).toBe(200);
    expect(applied.text).toContain('SPRING-TAX applied.');
    expect(applied.text).toContain('Where are you buying from?');
    // 3 × 10.00 = 30.00; 12.5 % off = 3.75 → 26.25
    expect(applied.text).toContain('€26.25');
    expect((await ctx.merchant.post(`${url}/tax`).type('form').send({ country: 'DE' })).status).toBe(303);
    const page = await ctx.merchant.get(url);
    // Both on the payment page: the code (to remove), the tax lines, the changeable country.
    expect(page.text).toContain('data-testid="remove-promotion-code"');
    expect(page.text).toContain('data-testid="discount"');
    expect(page.text).toContain('data-testid="tax-lines"');
    expect(page.text).toContain('data-testid="tax-form"');
    // 19 % of 26.25 = 4.9875 → 4.99 (half up once); total 31.24. The subtotal is after the discount.
    expect(page.text).toMatch(/Subtotal<\/span><span>€26\.25/);
    expect(page.text).toContain('€31.24');
    // Removing and re-applying the code reprices with the tax: 30.00 + 5.70, then 31.24 again.
    const removed = await ctx.merchant.post(`${url}/promotion-code`).type('form').send({ remove: '1' });
    expect(removed.text).toContain('€35.70');
    const again = await ctx.merchant.post(`${url}/promotion-code`).type('form').send({ code: 'SPRING-TAX' });
    expect(again.text).toContain('€31.24');
    // A page shown at the old total does not charge.
    expect((await pay(res.body.data.url, { amount: '3570' })).status).toBe(409);
    expect((await pay(res.body.data.url, { amount: '3124' })).status).toBe(303);
    const order = await orderOf(res.body.data.id);
    expect(order.amountCents).toBe(3124);
    expect(order.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 3000], ['DISCOUNT', -375], ['TAX', 499]]);
    expect(order.lines[2].tax).toMatchObject({ taxableAmountCents: 2625, taxAmountCents: 499, rateId: deVat });
    expect(sumOf(order.lines)).toBe(order.amountCents);
  });

  it('a 100 % code then the country: a free order with a TAX line of 0, not an amount error', async () => {
    const c = await couponApi('/v1/coupons', { name: 'Free', duration: 'ONCE', percentOff: '100' });
    await couponApi('/v1/promotion-codes', { couponId: c.id, code: 'FREE-TAX' });
    const res = await createSession({ customerEmail: 'free-tax@example.com' });
    const url = pagePath(res.body.data.url);
    expect((await ctx.merchant.post(`${url}/promotion-code`).type('form').send({ code: 'FREE-TAX' })).status).toBe(200);
    const located = await ctx.merchant.post(`${url}/tax`).type('form').send({ country: 'DE' });
    expect(located.status, located.text).toBe(303);
    expect((await ctx.merchant.get(url)).text).toContain('€0.00');
    expect((await pay(res.body.data.url, { amount: '0' })).status).toBe(303);
    const order = await orderOf(res.body.data.id);
    expect(order.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 1000], ['DISCOUNT', -1000], ['TAX', 0]]);
  });

  it('the country cannot change once the payment has started (the amount being charged is fixed)', async () => {
    const c = await couponApi('/v1/coupons', { name: 'Ten', duration: 'ONCE', percentOff: '10' });
    await couponApi('/v1/promotion-codes', { couponId: c.id, code: 'TEN-TAX' });
    const res = await createSession({ customerEmail: 'started@example.com', customerTax: { country: 'DE' } });
    const url = pagePath(res.body.data.url);
    expect((await ctx.merchant.post(`${url}/promotion-code`).type('form').send({ code: 'TEN-TAX' })).status).toBe(200);
    // The payment starts (redemption claimed, paymentStarted) and the card is declined: still payable.
    expect((await pay(res.body.data.url, { amount: '1071', cardNumber: '4000 0000 0000 0002' })).status).toBe(402);
    const before = await ctx.testDb.database.db('checkout_sessions').where({ id: res.body.data.id }).first();
    expect(before.amount).toBe(1071);
    expect((await ctx.merchant.get(url)).text).not.toContain('data-testid="tax-form"');
    await ctx.merchant.post(`${url}/tax`).type('form').send({ country: 'FR' });
    const after = await ctx.testDb.database.db('checkout_sessions').where({ id: res.body.data.id }).first();
    expect(after.amount).toBe(1071);
    expect(typeof after.tax === 'string' ? JSON.parse(after.tax) : after.tax).toMatchObject({ location: { country: 'DE' } });
  });

  it('renewals: the coupon for its periods, the tax every period (API discount + customerTax)', async () => {
    const c = await couponApi('/v1/coupons', { name: 'Quarter off', duration: 'REPEATING', durationInPeriods: 2, percentOff: '25' });
    ctx.clock.set('2027-03-01T00:00:00.000Z');
    const res = await createSession({ pricingId: planId, customerEmail: 'renew-both@example.com', customerTax: { country: 'DE' }, discounts: [{ coupon: c.id }] });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    // 20.00 − 25 % = 15.00; + 19 % = 2.85 → 17.85
    expect(res.body.data.amount).toBe(1785);
    expect((await pay(res.body.data.url, { amount: '1785' })).status).toBe(303);
    const first = await orderOf(res.body.data.id);
    expect(first.lines.map((l: Line) => [l.kind, l.amountCents])).toEqual([['PRICE', 2000], ['DISCOUNT', -500], ['TAX', 285]]);
    const sub = (await ctx.merchant.get(`/v1/subscriptions/${first.subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    // The subscription's amount is the fee before the coupon, tax included.
    expect(sub.amountCents).toBe(2380);
    // The renewals in period order (billing_period is not in the API).
    const renewals = async () => {
      const rows = await ctx.testDb.database.db('orders').where({ subscription_id: first.subscriptionId }).whereNot({ id: first.orderId }).orderBy('billing_period');
      return Promise.all(rows.map(async (r: { id: string }) => (await ctx.merchant.get(`/v1/orders/${r.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data as { amountCents: number; lines: Line[] }));
    };
    ctx.clock.set('2027-04-01T00:00:01.000Z');
    await ctx.services.subscriptions.processDue();
    ctx.clock.set('2027-05-01T00:00:01.000Z');
    await ctx.services.subscriptions.processDue();
    const [second, third] = await renewals();
    // Period 1: still discounted (2 periods), taxed on the discounted amount.
    expect(second!.lines.map((l) => [l.kind, l.amountCents])).toEqual([['PRICE', 2000], ['DISCOUNT', -500], ['TAX', 285]]);
    expect(second!.amountCents).toBe(1785);
    // Period 2: the coupon has ended; the full fee and its tax.
    expect(third!.lines.map((l) => [l.kind, l.amountCents])).toEqual([['PRICE', 2000], ['TAX', 380]]);
    expect(third!.amountCents).toBe(2380);
  });
});
