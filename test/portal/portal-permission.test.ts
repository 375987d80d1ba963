/**
 * Issue 37 §6: a customer portal session that can change subscriptions needs `subscriptions:manage`
 * (an API-key permission now, held by owners, admins and support), and every change made in the
 * portal is audited with the session's creator and the buyer. Migration 0263 gives the permission
 * to existing keys made by the operator, an owner or an admin that held `checkout:write`, never to
 * a developer's.
 */
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { ORIGIN, as, signUp, type Member } from '../accounts/helpers.js';
import * as m0263 from '../../src/db/migrations/0263_subscriptions_manage_keys.js';

let ctx: TestContext;
let subPrice: string;
let owner: Member;
let admin: Member;
let developer: Member;
let support: Member;
let n = 0;

beforeAll(async () => {
  ctx = await createTestContext();
  [owner, admin, developer, support] = await Promise.all([
    signUp(ctx, ctx.orgA.orgId, 'owner'),
    signUp(ctx, ctx.orgA.orgId, 'admin'),
    signUp(ctx, ctx.orgA.orgId, 'developer'),
    signUp(ctx, ctx.orgA.orgId, 'support'),
  ]);
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  subPrice = (await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 })).id;
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

const http = () => supertest(ctx.apps.merchant);
const csrfOf = (html: string) => /name="csrf" value="([0-9a-f]{64})"/.exec(html)?.[1];

/** A paid monthly subscription of org A: its customer and subscription. */
async function subscribe(): Promise<{ customerId: string; subscriptionId: string }> {
  const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `perm-${++n}`).send({ pricingId: subPrice, customerEmail: `perm${n}@example.com` });
  expect(created.status).toBe(201);
  const paid = await http().post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  const order = (await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
  return { customerId: order.customerId, subscriptionId: order.subscriptionId };
}

/** Follows a portal link: the session cookie and the portal's home page. */
async function enter(url: string): Promise<{ cookie: string; home: string }> {
  const path = new URL(url).pathname;
  const entered = await http().post(path).set('Origin', ORIGIN).type('form').send({});
  expect(entered.status).toBe(303);
  const cookie = [entered.headers['set-cookie']].flat().find((c) => c?.startsWith('__Host-kassa_portal='))!.split(';')[0]!;
  const home = await http().get('/portal').set('Cookie', cookie);
  expect(home.status).toBe(200);
  return { cookie, home: home.text };
}

const portalPost = (cookie: string, home: string, path: string, form: object = {}) =>
  http().post(path).set('Cookie', cookie).set('Origin', ORIGIN).type('form').send({ ...form, csrf: csrfOf(home)! });
const cancelAtPeriodEnd = (p: { cookie: string; home: string }, subscriptionId: string) => portalPost(p.cookie, p.home, `/portal/subscriptions/${subscriptionId}/cancel`, { confirm: 'yes' });
const cancelNow = (p: { cookie: string; home: string }, subscriptionId: string) => portalPost(p.cookie, p.home, `/portal/subscriptions/${subscriptionId}/cancel`, { confirm: 'yes', when: 'now' });
const keep = (p: { cookie: string; home: string }, subscriptionId: string) => portalPost(p.cookie, p.home, `/portal/subscriptions/${subscriptionId}/resume`);
const rowOf = (subscriptionId: string) => ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).first();

interface AuditRow {
  actorType: string;
  actorId: string | null;
  action: string;
  targetType: string | null;
  targetId: string | null;
  summary: string;
  clientAddress: string | null;
}
async function auditOf(targetId: string): Promise<AuditRow[]> {
  const log = await as(owner, ctx.merchant.get('/v1/console/audit-log?size=100'));
  expect(log.status).toBe(200);
  return (log.body.data.records as AuditRow[]).filter((r) => r.targetId === targetId).reverse();
}

const keyWith = async (permissions: string[]) => ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: permissions.join(' '), permissions: permissions as never });
const openPortal = (apiKey: string, body: object) => ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', apiKey).send(body);

describe('a key with checkout:write only (issue 37 §6)', () => {
  it('opens a portal that shows the subscription but cannot cancel or keep it; allowCancelNow is refused with 403', async () => {
    const { customerId, subscriptionId } = await subscribe();
    const key = await keyWith(['checkout:write']);
    const refused = await openPortal(key.key, { customerId, allowCancelNow: true });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('FORBIDDEN');
    expect(refused.body.error.message).toMatch(/allowCancelNow needs the permission "subscriptions:manage"/);

    const opened = await openPortal(key.key, { customerId });
    expect(opened.status).toBe(201);
    const portal = await enter(opened.body.data.url);
    expect(portal.home).toContain('data-testid="no-changes"');
    expect(portal.home).not.toContain(`data-testid="cancel-${subscriptionId}"`);
    const cancel = await cancelAtPeriodEnd(portal, subscriptionId);
    // The portal's refusal page (400, as for "cancel now" where it is not offered).
    expect(cancel.status).toBe(400);
    expect(cancel.text).toContain('Changing subscriptions is not offered here; ask the merchant');
    expect((await rowOf(subscriptionId)).cancel_at_period_end).toBe(false);
    expect((await ctx.testDb.database.db('customer_portal_sessions').where({ id: opened.body.data.id }).first()).created_by).toBe(`key:${key.id}`);
    expect((await auditOf(subscriptionId)).filter((r) => r.action.startsWith('portal.'))).toEqual([]);
  });
});

describe('a key with subscriptions:manage', () => {
  it('cancels at period end and keeps through its portal; cancels now where allowed; each change is audited with the key and the buyer', async () => {
    const { customerId, subscriptionId } = await subscribe();
    const key = await keyWith(['checkout:write', 'subscriptions:manage']);
    const opened = await openPortal(key.key, { customerId, allowCancelNow: true });
    expect(opened.status).toBe(201);
    const portal = await enter(opened.body.data.url);
    expect(portal.home).toContain(`data-testid="cancel-${subscriptionId}"`);
    expect((await cancelAtPeriodEnd(portal, subscriptionId)).status).toBe(200);
    expect((await rowOf(subscriptionId)).cancel_at_period_end).toBe(true);
    expect((await keep(portal, subscriptionId)).status).toBe(200);
    expect((await rowOf(subscriptionId)).cancel_at_period_end).toBe(false);
    expect((await cancelNow(portal, subscriptionId)).status).toBe(200);
    expect((await rowOf(subscriptionId)).status).toBe('CANCELED');

    const entries = (await auditOf(subscriptionId)).filter((r) => r.action.startsWith('portal.'));
    // The test clock stands still: the entries share one time, so their order is not asserted.
    expect(entries.map((e) => e.action).sort()).toEqual(['portal.subscription.cancel_at_period_end', 'portal.subscription.cancel_now', 'portal.subscription.keep']);
    for (const e of entries) {
      expect(e).toMatchObject({ actorType: 'api_key', actorId: key.id, targetType: 'subscription', targetId: subscriptionId });
      expect(e.summary).toContain(`customer ${customerId}`);
      expect(e.summary).toContain(`portal session ${opened.body.data.id} opened by key:${key.id}`);
    }
    // The session's creation is audited too (the merchant API's audit of state changes).
    const log = (await as(owner, ctx.merchant.get('/v1/console/audit-log?size=100'))).body.data.records as AuditRow[];
    expect(log.find((r) => r.action === 'createCustomerPortalSession' && r.targetId === opened.body.data.id)).toMatchObject({ actorType: 'api_key', actorId: key.id });
  });

  it('GET /v1/me lists subscriptions:manage for a key made without a list (the owner\'s default key holds every key permission)', async () => {
    const me = await ctx.merchant.get('/v1/me').set('X-API-Key', ctx.orgA.apiKey);
    expect(me.body.data.permissions).toContain('subscriptions:manage');
  });
});

describe('members opening portals from the console, by role', () => {
  const openAs = (m: Member, body: object) => as(m, ctx.merchant.post('/v1/customer-portal-sessions')).send(body);

  it('an owner and an admin open portals that change subscriptions, audited as the member', async () => {
    for (const member of [owner, admin]) {
      const { customerId, subscriptionId } = await subscribe();
      const opened = await openAs(member, { customerId, allowCancelNow: true });
      expect(opened.status, opened.text).toBe(201);
      const portal = await enter(opened.body.data.url);
      expect((await cancelAtPeriodEnd(portal, subscriptionId)).status).toBe(200);
      const [entry] = (await auditOf(subscriptionId)).filter((r) => r.action.startsWith('portal.'));
      expect(entry).toMatchObject({ actorType: 'user', actorId: member.userId, action: 'portal.subscription.cancel_at_period_end' });
      expect(entry!.summary).toContain(`opened by user:${member.userId}`);
      expect(entry!.summary).toContain(`customer ${customerId}`);
    }
  });

  it('a developer opens a portal that cannot change subscriptions, is refused allowCancelNow, and cannot make a key with subscriptions:manage', async () => {
    const { customerId, subscriptionId } = await subscribe();
    const refused = await openAs(developer, { customerId, allowCancelNow: true });
    expect(refused.status).toBe(403);
    const opened = await openAs(developer, { customerId });
    expect(opened.status).toBe(201);
    const portal = await enter(opened.body.data.url);
    const cancel = await cancelAtPeriodEnd(portal, subscriptionId);
    expect(cancel.status).toBe(400);
    expect(cancel.text).toContain('Changing subscriptions is not offered here; ask the merchant');
    expect((await rowOf(subscriptionId)).cancel_at_period_end).toBe(false);

    const key = await as(developer, ctx.merchant.post('/v1/console/api-keys')).send({ name: 'cancel', permissions: ['checkout:write', 'subscriptions:manage'] });
    expect(key.status).toBe(403);
    // "Every permission my role allows" leaves it out.
    const all = await as(developer, ctx.merchant.post('/v1/console/api-keys')).send({ name: 'all' });
    expect(all.status, all.text).toBe(201);
    expect(all.body.data.permissions).not.toContain('subscriptions:manage');
  });

  it('support (subscriptions:manage, no checkout:write) cannot open portals', async () => {
    const { customerId } = await subscribe();
    expect((await openAs(support, { customerId })).status).toBe(403);
  });
});

describe('a portal the buyer opened alone (paid checkout page)', () => {
  it("keeps the buyer's own rights (cancel at period end, keep), audited with the buyer as the actor", async () => {
    const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `perm-${++n}`).send({ pricingId: subPrice, customerEmail: `alone${n}@example.com` });
    const page = new URL(created.body.data.url).pathname;
    expect((await http().post(`${page}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' })).status).toBe(303);
    const opened = await http().post(`${page}/portal`).set('Origin', ORIGIN).type('form').send({});
    expect(opened.status).toBe(303);
    const cookie = [opened.headers['set-cookie']].flat().find((c) => c?.startsWith('__Host-kassa_portal='))!.split(';')[0]!;
    const home = (await http().get('/portal').set('Cookie', cookie)).text;
    const subscriptionId = /\/portal\/subscriptions\/(SUB_[0-9A-Za-z]+)\/cancel/.exec(home)![1]!;
    expect((await cancelAtPeriodEnd({ cookie, home }, subscriptionId)).status).toBe(200);
    expect((await keep({ cookie, home }, subscriptionId)).status).toBe(200);
    const customerId = (await rowOf(subscriptionId)).customer_id as string;
    const entries = (await auditOf(subscriptionId)).filter((r) => r.action.startsWith('portal.'));
    expect(entries.map((e) => e.action).sort()).toEqual(['portal.subscription.cancel_at_period_end', 'portal.subscription.keep']);
    for (const e of entries) {
      expect(e).toMatchObject({ actorType: 'customer', actorId: customerId });
      expect(e.summary).toContain('opened by the buyer (paid checkout page)');
    }
  });
});

describe('migration 0263: existing keys', () => {
  it('gives subscriptions:manage to live checkout:write keys of the operator, owners and admins — never a developer\'s — and audits each', async () => {
    const db = ctx.testDb.database.db;
    const operatorKey = await keyWith(['checkout:write', 'orders:read']);
    const readOnly = await keyWith(['orders:read']);
    const revoked = await keyWith(['checkout:write']);
    await ctx.services.orgs.revokeApiKey(revoked.id);
    const memberKey = async (m: Member) => {
      const res = await as(m, ctx.merchant.post('/v1/console/api-keys')).send({ name: 'old', permissions: ['checkout:write'] });
      expect(res.status, res.text).toBe(201);
      return res.body.data.apiKeyId as string;
    };
    const [ownerKey, adminKey, developerKey] = [await memberKey(owner), await memberKey(admin), await memberKey(developer)];
    const ids = [operatorKey.id, readOnly.id, revoked.id, ownerKey, adminKey, developerKey];
    // As before the migration: no key held it.
    await db.raw(`UPDATE api_keys SET permissions = array_remove(permissions, 'subscriptions:manage') WHERE id = ANY (?)`, [ids]);
    await m0263.up(db);
    const held = async (id: string) => ((await db('api_keys').where({ id }).first()).permissions as string[]).includes('subscriptions:manage');
    expect(await held(operatorKey.id)).toBe(true);
    expect(await held(ownerKey)).toBe(true);
    expect(await held(adminKey)).toBe(true);
    expect(await held(developerKey)).toBe(false);
    expect(await held(readOnly.id)).toBe(false);
    expect(await held(revoked.id)).toBe(false);
    const entries = await db('audit_log').where({ action: 'api_key.permission_added' }).whereIn('target_id', ids);
    expect(entries.map((e) => e.target_id).sort()).toEqual([operatorKey.id, ownerKey, adminKey].sort());
    expect(entries.every((e) => e.actor_type === 'system' && e.org_id === ctx.orgA.orgId)).toBe(true);
  });
});
