/**
 * Metered plans on Stripe for the plan-change tests (stripe-metered-plan-change.test.ts,
 * stripe-metered-edges.test.ts): Kassa with Stripe as the card processor (./stripe-context.ts), two
 * meters (tokens, requests) and the plans below as prices, and helpers that subscribe a buyer
 * through Stripe Checkout, ingest usage, change the plan from a preview and run Stripe's renewal —
 * with the independent recomputation (BigInt, ../subscriptions/metered-recompute.ts) of the USAGE
 * lines a period split into parts should carry.
 */
import type Stripe from 'stripe';
import { afterAll, beforeAll, expect } from 'vitest';
import { workerJobs } from '../../src/jobs.js';
import { setExternalId } from '../usage/helpers.js';
import { createStripeContext, type StripeContext } from './stripe-context.js';
import { day, halfUp, usageCents, type Pricing } from '../subscriptions/metered-recompute.js';

export type Plan = 'basic' | 'pro' | 'plain';
type Component = { meter: 'tokens' | 'requests'; includedUnits: number; pricing: Pricing };
/** Basic: 10.00 a month, tokens 0.004 ¢ each over 10,000, requests graduated. Pro: 30.00, tokens 0.002 ¢ over 50,000, requests 0.25 ¢. Plain: 50.00, no meters. */
export const COMPONENTS: Record<Plan, Component[]> = {
  basic: [
    { meter: 'tokens', includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } },
    { meter: 'requests', includedUnits: 0, pricing: { model: 'GRADUATED', tiers: [{ upTo: 100, unitAmountDecimal: '1' }, { upTo: null, unitAmountDecimal: '0.5', flatAmountCents: 10 }] } },
  ],
  pro: [
    { meter: 'tokens', includedUnits: 50_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.002' } },
    { meter: 'requests', includedUnits: 0, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.25' } },
  ],
  plain: [],
};
export const FEES: Record<Plan, number> = { basic: 1000, pro: 3000, plain: 5000 };
const NAMES: Record<Plan, string> = { basic: 'Basic', pro: 'Pro', plain: 'Plain' };

const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);
export interface Part {
  plan: Plan;
  from: string;
  to: string;
  usage: { tokens: number; requests: number };
}
/** The USAGE lines of a period [start, end) split into parts (one part: full included units, plain descriptions). */
export function expectedUsage(parts: Part[], start: string, end: string) {
  const period = BigInt(seconds(end) - seconds(start));
  return parts.flatMap((part, i) =>
    COMPONENTS[part.plan].map((c) => {
      const partSeconds = () => BigInt(seconds(i === parts.length - 1 ? end : part.to) - seconds(part.from));
      const included = parts.length === 1 ? BigInt(c.includedUnits) : BigInt(halfUp(BigInt(c.includedUnits) * partSeconds(), period));
      const name = c.meter === 'tokens' ? 'Tokens' : 'Requests';
      const description = parts.length === 1 ? name : `${name} on ${NAMES[part.plan]} ${i < parts.length - 1 ? `until ${day(part.to)}` : `from ${day(part.from)}`}`;
      return { description, quantity: String(part.usage[c.meter]), includedUnits: Number(included), amountCents: usageCents(BigInt(part.usage[c.meter]), included, c.pricing) };
    }),
  );
}
export const total = (lines: Array<{ amountCents: number }>) => lines.reduce((t, l) => t + l.amountCents, 0);
export const usageItems = (invoice: Stripe.Invoice) => invoice.lines.data.filter((l) => l.parent?.invoice_item_details);
export const feeLines = (invoice: Stripe.Invoice) => invoice.lines.data.filter((l) => !l.parent?.invoice_item_details);
export const orderUsage = (order: Record<string, any>) =>
  (order.lines as Array<Record<string, any>>).filter((l) => l.kind === 'USAGE').map((l) => ({ description: l.description, quantity: l.quantity, includedUnits: l.usage.includedUnits, amountCents: l.amountCents }));
export const sum = (order: Record<string, any>) => total(order.lines as Array<{ amountCents: number }>);

/**
 * Registers the file's beforeAll/afterAll: the context, the meters and a price per plan in `plans`
 * (and Basic with a 7-day trial as `basicTrial` when asked). `tag` names the buyers, their
 * externalIds and event ids apart from other files'.
 */
export function meteredPlansOnStripe(options: { tag: string; plans: Plan[]; basicTrial?: boolean }) {
  let s: StripeContext | undefined;
  const meters = { tokens: '', requests: '' };
  const prices: Record<Plan | 'basicTrial', string> = { basic: '', pro: '', plain: '', basicTrial: '' };
  const ctx = () => s!;
  const db = () => ctx().ctx.testDb.database.db;
  const api = (method: 'get' | 'post', path: string) => ctx().ctx.merchant[method](path).set('X-API-Key', ctx().ctx.orgA.apiKey);
  const job = (name: string) => workerJobs({ services: ctx().ctx.services }).find((j) => j.name === name)!;

  beforeAll(async () => {
    s = await createStripeContext();
    const meter = async (body: object) => {
      const res = await api('post', '/v1/meters').send(body);
      expect(res.status).toBe(201);
      return res.body.data.id as string;
    };
    meters.tokens = await meter({ name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
    meters.requests = await meter({ name: 'Requests', source: 'EVENTS', filter: { eventName: 'request' }, aggregation: 'count' });
    for (const plan of options.plans) {
      const product = await s.ctx.services.catalog.createProduct(s.ctx.orgA.orgId, { name: NAMES[plan] });
      const meteredComponents = COMPONENTS[plan].map((c) => ({ meterId: meters[c.meter], includedUnits: c.includedUnits, pricing: c.pricing }));
      const price = (extra: object) =>
        s!.ctx.admin.post(`/v1/products/${product.id}/prices`).send({ amount: FEES[plan], currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', ...(meteredComponents.length > 0 && { meteredComponents }), ...extra });
      const res = await price({});
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      prices[plan] = res.body.data.pricingId;
      if (plan === 'basic' && options.basicTrial) {
        const trial = await price({ trialDays: 7 });
        expect(trial.status, JSON.stringify(trial.body)).toBe(201);
        prices.basicTrial = trial.body.data.pricingId;
      }
    }
  });
  afterAll(async () => {
    await s?.close();
  });

  let customers = 0;
  /** A buyer subscribed to `pricingId` through Stripe Checkout at `start`, with an externalId for usage. */
  async function subscribe(pricingId: string, start: string, body: object = {}) {
    const c = ctx();
    c.ctx.clock.set(start);
    const n = ++customers;
    const email = `${options.tag}-${n}@example.com`;
    const res = await c.create({ pricingId, customerEmail: email, quantity: 1, ...body });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const stripeSessionId = await c.stripeIdOf(res.body.data.id);
    c.stripe.complete(stripeSessionId, { email });
    expect((await c.deliver(c.stripe.lastEvent('checkout.session.completed', stripeSessionId))).body.outcome).toBe('applied');
    const order = await c.readOrder((await c.readSession(res.body.data.id)).orderId);
    const externalId = `${options.tag}_${n}`;
    expect((await setExternalId(c.ctx, order.customerId as string, externalId, c.ctx.orgA.apiKey)).status).toBe(200);
    const subscriptionId = (await db()('subscriptions').where({ checkout_session_id: res.body.data.id }).first()).id as string;
    const stripeSub = c.stripe.subscriptionOf(stripeSessionId);
    return { subscriptionId, stripeSub, externalId, periodEnd: new Date(stripeSub.items.data[0]!.current_period_end * 1000).toISOString() };
  }
  let events = 0;
  /** Ingests `tokens` and `requests` events at `ts` (the clock set just after it). */
  async function use(externalId: string, ts: string, usage: { tokens?: number; requests?: number }) {
    ctx().ctx.clock.set(new Date(Date.parse(ts) + 1000).toISOString());
    const list: object[] = [];
    if (usage.tokens) list.push({ id: `${options.tag}-e${++events}`, customer: { externalId }, name: 'llm_tokens', timestamp: ts, properties: { tokens: usage.tokens } });
    for (let i = 0; i < (usage.requests ?? 0); i++) list.push({ id: `${options.tag}-e${++events}`, customer: { externalId }, name: 'request', timestamp: ts, properties: {} });
    const res = await api('post', '/v1/usage-events').send({ events: list });
    expect(res.status).toBe(200);
    expect(res.body.data.results.map((r: { status: string }) => r.status)).not.toContain('REJECTED');
  }
  /** A plan change at `at`, previewed then confirmed with the preview's second and amount; the change's answer is `status`. */
  async function changeAt(subscriptionId: string, at: string, body: object, status = 200) {
    ctx().ctx.clock.set(at);
    const p = await api('post', `/v1/subscriptions/${subscriptionId}/change/preview`).send(body);
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    const c = await api('post', `/v1/subscriptions/${subscriptionId}/change`).send({ ...body, prorationDate: p.body.data.prorationDate, expectedAmountDueCents: p.body.data.amountDueCents });
    expect(c.status, JSON.stringify(c.body)).toBe(status);
    return { preview: p.body.data as Record<string, any>, change: c.body.data as Record<string, any> };
  }
  /** Stripe's renewal at the period's end: the draft held, the grace hour, Kassa's items, finalized, `invoice.paid` → Kassa's order. */
  async function renew(stripeSubId: string, subscriptionId: string, periodEnd: string, period: number) {
    const c = ctx();
    c.ctx.clock.set(new Date(Date.parse(periodEnd) + 1000).toISOString());
    const draft = c.stripe.renewDraft(stripeSubId);
    expect((await c.deliver(c.stripe.lastEvent('invoice.created', draft.id))).body.outcome).toBe('applied');
    c.ctx.clock.set(new Date(Date.parse(periodEnd) + 3600_000 + 1000).toISOString());
    expect(await job('stripe-usage-invoices').run()).toBe(true);
    const invoice = c.stripe.invoices.get(draft.id)!;
    expect(invoice.status).toBe('paid');
    expect((await c.deliver(c.stripe.lastEvent('invoice.paid', draft.id))).body.outcome).toBe('applied');
    const row = await db()('orders').where({ subscription_id: subscriptionId, billing_period: period }).first();
    expect(row, `the order of period ${period}`).toBeDefined();
    return { invoice, order: (await c.readOrder(row.id)) as Record<string, any> };
  }
  return {
    get s() {
      return ctx();
    },
    meters,
    prices,
    db,
    api,
    job,
    subscribe,
    use,
    changeAt,
    renew,
  };
}
