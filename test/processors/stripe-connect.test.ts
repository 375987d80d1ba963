/**
 * Stripe Connect with destination charges, end to end over HTTP: organizations bound to connected
 * accounts through the admin API, their card sessions opened on the local Stripe-shaped server
 * (./stripe-server.ts) with the payment transferred to the account, paid through Stripe's signed
 * events, and refunded through the admin API with the transfer reversed.
 */
import { execFile } from 'node:child_process';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { FakeStripe } from './stripe-server.js';
import { nodeEntryArgs, CHILD_COMMAND_TIMEOUT_MS } from '../../tools/node-entry.js';

const SECRET_KEY = 'sk_test_kassaconnect';
const WEBHOOK_SECRET = 'whsec_kassaconnectsecret';
/** The Connect endpoint's own secret ("events on connected accounts" is a separate endpoint in Stripe). */
const CONNECT_WEBHOOK_SECRET = 'whsec_kassaconnectendpoint';
const CONNECT_EVENTS = '/v1/processors/stripe/connect-events';
const EVENTS = '/v1/processors/stripe/events';
const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

let ctx: TestContext;
let stripe: FakeStripe;
let priceA: string;
let priceB: string;
beforeAll(async () => {
  stripe = new FakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET, now: () => ctx.clock.now() });
  const base = await stripe.start();
  ctx = await createTestContext({
    env: { STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_CONNECT_WEBHOOK_SECRET: CONNECT_WEBHOOK_SECRET, STRIPE_API_BASE_URL: base, STRIPE_TIMEOUT_MS: '500' },
  });
  const productA = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Course' });
  priceA = (await ctx.services.catalog.createPrice(productA.id, { amount: 5000, currency: 'USD' })).id;
  const productB = await ctx.services.catalog.createProduct(ctx.orgB.orgId, { name: 'Mug' });
  priceB = (await ctx.services.catalog.createPrice(productB.id, { amount: 1500, currency: 'USD' })).id;
});
afterAll(async () => {
  await stripe?.stop();
  await ctx?.close();
});

const binding = (orgId: string) => ctx.admin.get(`/v1/orgs/${orgId}/stripe-account`);
const bind = (orgId: string, accountId: unknown) => ctx.admin.put(`/v1/orgs/${orgId}/stripe-account`).send({ accountId });
const unbind = (orgId: string) => ctx.admin.delete(`/v1/orgs/${orgId}/stripe-account`);
const storedAccount = async (orgId: string) => (await ctx.testDb.database.db('organizations').where({ id: orgId }).first()).stripe_account_id as string | null;

let keys = 0;
async function newSession(org: { apiKey: string }, pricingId: string) {
  const res = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', org.apiKey).set('Idempotency-Key', `connect-${++keys}`).send({ pricingId });
  expect(res.status).toBe(201);
  const row = await ctx.testDb.database.db('checkout_sessions').where({ id: res.body.data.id }).first();
  return { id: res.body.data.id as string, stripeId: row.processor_session_id as string, accountId: row.processor_account_id as string | null };
}
/** The buyer pays on Stripe's page and Stripe's event reaches Kassa; returns the order and its PaymentIntent. */
async function pay(session: { id: string; stripeId: string }, apiKey: string) {
  const paid = stripe.complete(session.stripeId, { email: 'buyer@example.com' });
  const { signature, payload } = stripe.signed(stripe.event('checkout.session.completed', paid));
  expect((await ctx.merchant.post(EVENTS).set('Content-Type', 'application/json').set('Stripe-Signature', signature).send(payload)).status).toBe(200);
  const read = (await ctx.merchant.get(`/v1/checkout-sessions/${session.id}`).set('X-API-Key', apiKey)).body.data;
  expect(read.orderStatus).toBe('PAID');
  return { orderId: read.orderId as string, intentId: paid.payment_intent as string };
}
/** A Connect event posted to Kassa's Connect endpoint, signed as Stripe signs with that endpoint's secret. */
const deliver = (event: import('stripe').Stripe.Event, secret = CONNECT_WEBHOOK_SECRET) => {
  const { signature, payload } = stripe.signed(event, secret);
  return ctx.merchant.post(CONNECT_EVENTS).set('Content-Type', 'application/json').set('Stripe-Signature', signature).send(payload);
};
const refund = (orderId: string, amount?: number) => ctx.admin.post(`/v1/orders/${orderId}/refund`).send(amount === undefined ? {} : { amount });
const refundRequests = (since: number) => stripe.requests.slice(since).filter((r) => r.path === '/v1/refunds');

describe('binding an organization to a Stripe connected account (admin API)', () => {
  it('reads null while unbound, binds a connected account, reads it back, and unbinds it', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Bind me' });
    expect((await binding(org.id)).body.data).toEqual({ orgId: org.id, accountId: null, boundAt: null, state: null });
    const account = stripe.connectAccount();
    const set = await bind(org.id, account.id);
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ success: true, message: 'Stripe account bound', data: { orgId: org.id, accountId: account.id, boundAt: ctx.clock.now().toISOString() } });
    expect((await binding(org.id)).body.data.accountId).toBe(account.id);
    expect(stripe.requests.at(-1)).toMatchObject({ method: 'GET', path: `/v1/accounts/${account.id}` });
    const cleared = await unbind(org.id);
    expect(cleared.status).toBe(200);
    expect(cleared.body.data).toEqual({ orgId: org.id, accountId: null, boundAt: null, state: null });
    expect((await unbind(org.id)).status).toBe(200);
    expect(await storedAccount(org.id)).toBeNull();
  });

  it.each([['acct_'], ['acct_short'.slice(0, 9)], ['acc_1Q2w3E4r5T6y7U8i'], ['acct_1Q2w3E4r5T6y7U8i!'], ['ACCT_1Q2w3E4r5T6y7U8i'], [' acct_1Q2w3E4r5T6y7U8i'], [42], [null]])(
    'refuses a malformed account id %j with 400 and stores nothing',
    async (accountId) => {
      const res = await bind(ctx.orgB.orgId, accountId);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
      expect(await storedAccount(ctx.orgB.orgId)).toBeNull();
    },
  );

  it('refuses with 400 an account Stripe does not know as connected, and one that cannot receive transfers yet', async () => {
    const unknown = await bind(ctx.orgB.orgId, 'acct_1NotConnectedHere');
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toMatch(/not a Stripe account connected to this platform/);
    const pending = stripe.connectAccount('pending');
    const onboarding = await bind(ctx.orgB.orgId, pending.id);
    expect(onboarding.status).toBe(400);
    expect(onboarding.body.error.message).toMatch(/cannot receive transfers yet \(its transfers capability is pending\)/);
    expect(await storedAccount(ctx.orgB.orgId)).toBeNull();
  });

  it('answers 503 and changes nothing when Stripe cannot be reached to check the account', async () => {
    const account = stripe.connectAccount();
    stripe.failNext('error500', 3); // the first attempt and the SDK's two retries
    const res = await bind(ctx.orgB.orgId, account.id);
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(await storedAccount(ctx.orgB.orgId)).toBeNull();
  });

  it('answers 404 for an organization that does not exist, on read, bind and unbind', async () => {
    const account = stripe.connectAccount();
    for (const res of [await binding('ORG_doesnotexist'), await bind('ORG_doesnotexist', account.id), await unbind('ORG_doesnotexist')]) {
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('NOT_FOUND');
    }
  });

  it("is not reachable with a merchant's API key: another tenant's binding is 404 on the merchant API", async () => {
    const res = await ctx.merchant.get(`/v1/orgs/${ctx.orgB.orgId}/stripe-account`).set('X-API-Key', ctx.orgA.apiKey);
    expect(res.status).toBe(404);
    expect(JSON.stringify(res.body)).not.toContain('acct_');
  });

  it('refuses with 409 an account already bound to another organization (one organization per account)', async () => {
    const first = await ctx.services.orgs.createOrganization({ name: 'Owner' });
    const second = await ctx.services.orgs.createOrganization({ name: 'Latecomer' });
    const account = stripe.connectAccount();
    expect((await bind(first.id, account.id)).status).toBe(200);
    expect((await bind(first.id, account.id)).status).toBe(200);
    const taken = await bind(second.id, account.id);
    expect(taken.status).toBe(409);
    expect(taken.body.error.message).toMatch(/bound to another organization/);
    expect(await storedAccount(second.id)).toBeNull();
  });
});

describe('destination charges', () => {
  it("a bound organization's checkout carries the destination; the paid charge is transferred there; refunds reverse the transfer", async () => {
    const account = stripe.connectAccount();
    expect((await bind(ctx.orgA.orgId, account.id)).status).toBe(200);
    const before = stripe.requests.length;
    const session = await newSession(ctx.orgA, priceA);
    expect(session.accountId).toBe(account.id);
    const create = stripe.requests.slice(before).find((r) => r.path === '/v1/checkout/sessions')!;
    expect(create.body).toMatchObject({ payment_intent_data: { transfer_data: { destination: account.id } } });

    const { orderId, intentId } = await pay(session, ctx.orgA.apiKey);
    expect(stripe.intents.get(intentId)!.transfer_data).toEqual({ destination: account.id });
    expect(stripe.transfers.get(intentId)).toEqual({ destination: account.id, amount: 5000, reversed: 0 });

    const sinceRefunds = stripe.requests.length;
    expect((await refund(orderId, 2000)).body.data).toMatchObject({ status: 'PAID', amountRefundedCents: 2000 });
    expect((await refund(orderId)).body.data).toMatchObject({ status: 'REFUNDED', amountRefundedCents: 5000 });
    expect(refundRequests(sinceRefunds).map((r) => r.body)).toEqual([
      { payment_intent: intentId, amount: '2000', reverse_transfer: 'true' },
      { payment_intent: intentId, amount: '3000', reverse_transfer: 'true' },
    ]);
    expect(stripe.transfers.get(intentId)).toEqual({ destination: account.id, amount: 5000, reversed: 5000 });
    expect([...stripe.refunds.values()].filter((r) => r.payment_intent === intentId).every((r) => r.transfer_reversal?.toString().startsWith('trr_'))).toBe(true);
  });

  it('an unbound organization pays the platform: no transfer_data, and its refunds reverse nothing', async () => {
    const before = stripe.requests.length;
    const session = await newSession(ctx.orgB, priceB);
    expect(session.accountId).toBeNull();
    const create = stripe.requests.slice(before).find((r) => r.path === '/v1/checkout/sessions')!;
    expect(create.body.payment_intent_data).toEqual({ metadata: { kassa_checkout_session_id: session.id, kassa_org_id: ctx.orgB.orgId } });
    const { orderId, intentId } = await pay(session, ctx.orgB.apiKey);
    expect(stripe.intents.get(intentId)!.transfer_data).toBeNull();
    const sinceRefunds = stripe.requests.length;
    expect((await refund(orderId)).status).toBe(200);
    expect(refundRequests(sinceRefunds).map((r) => r.body)).toEqual([{ payment_intent: intentId, amount: '1500' }]);
  });

  it('a change of binding leaves sessions already open on the old account, and their refunds reverse the old transfer', async () => {
    const oldAccount = stripe.connectAccount();
    const newAccount = stripe.connectAccount();
    expect((await bind(ctx.orgA.orgId, oldAccount.id)).status).toBe(200);
    const openBefore = await newSession(ctx.orgA, priceA);
    expect((await bind(ctx.orgA.orgId, newAccount.id)).status).toBe(200);
    const openAfter = await newSession(ctx.orgA, priceA);
    expect([openBefore.accountId, openAfter.accountId]).toEqual([oldAccount.id, newAccount.id]);

    const { orderId, intentId } = await pay(openBefore, ctx.orgA.apiKey);
    expect(stripe.transfers.get(intentId)!.destination).toBe(oldAccount.id);
    // Unbound since: the refund still reverses the transfer its session recorded.
    expect((await unbind(ctx.orgA.orgId)).status).toBe(200);
    const sinceRefunds = stripe.requests.length;
    expect((await refund(orderId)).status).toBe(200);
    expect(refundRequests(sinceRefunds)[0]!.body).toMatchObject({ reverse_transfer: 'true' });
    expect(stripe.transfers.get(intentId)).toMatchObject({ destination: oldAccount.id, reversed: 5000 });

    const unboundNow = await newSession(ctx.orgA, priceA);
    expect(unboundNow.accountId).toBeNull();
  });

  it('a bound account that Stripe no longer accepts as destination makes the create a clear 403, storing nothing', async () => {
    const account = stripe.connectAccount();
    expect((await bind(ctx.orgA.orgId, account.id)).status).toBe(200);
    stripe.restrictAccount(account.id);
    const res = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'restricted-account').send({ pricingId: priceA });
    expect(res.status).toBe(403);
    expect(res.body.error.message).toMatch(/Stripe connected account cannot receive payments/);
    expect(await ctx.testDb.database.db('idempotency_keys').where({ key: 'restricted-account' }).first()).toBeUndefined();
    expect((await unbind(ctx.orgA.orgId)).status).toBe(200);
  });

  it("account.updated: an account losing a capability is recorded when Stripe says so; the operator sees it and card checkout is refused with the cause, until Stripe reports it usable again", async () => {
    const account = stripe.connectAccount();
    expect((await bind(ctx.orgA.orgId, account.id)).status).toBe(200);
    const restricted = stripe.restrictAccount(account.id);
    // Signed with the platform endpoint's secret, it is not the Connect endpoint's: refused, nothing recorded.
    expect((await deliver(restricted, WEBHOOK_SECRET)).status).toBe(400);
    expect((await binding(ctx.orgA.orgId)).body.data.state).toBeNull();
    expect((await deliver(restricted)).body).toEqual({ received: true, outcome: 'applied' });
    // Redelivered: applied once.
    expect((await deliver(restricted)).body.outcome).toBe('duplicate');
    const seen = (await binding(ctx.orgA.orgId)).body.data;
    const problem = `Stripe reports the connected account ${account.id} cannot take payments: charges_enabled is false, its transfers capability is inactive`;
    expect(seen).toMatchObject({ accountId: account.id, state: { chargesEnabled: false, transfers: 'inactive', cardPayments: null, usable: false, problem, checkedAt: ctx.clock.now().toISOString() } });

    // Refused before Stripe is asked: a clear 403 naming the cause, nothing stored.
    const before = stripe.requests.length;
    const res = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'lost-capability').send({ pricingId: priceA });
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'FORBIDDEN', message: expect.stringContaining(`${problem}; card checkout is unavailable`) });
    expect(stripe.requests.slice(before).filter((r) => r.path === '/v1/checkout/sessions')).toEqual([]);
    expect(await ctx.testDb.database.db('idempotency_keys').where({ key: 'lost-capability' }).first()).toBeUndefined();
    // The other organization is not affected.
    expect((await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgB.apiKey).set('Idempotency-Key', 'other-org').send({ pricingId: priceB })).status).toBe(201);

    // card_payments lapsing is a cause too; transfers back alone is not enough.
    await deliver(stripe.updateAccount(account.id, { capabilities: { transfers: 'active', card_payments: 'inactive' }, charges_enabled: true }));
    expect((await binding(ctx.orgA.orgId)).body.data.state).toMatchObject({ usable: false, problem: expect.stringMatching(/its card_payments capability is inactive$/) });

    await deliver(stripe.updateAccount(account.id, { capabilities: { transfers: 'active', card_payments: 'active' }, charges_enabled: true }));
    expect((await binding(ctx.orgA.orgId)).body.data.state).toMatchObject({ usable: true, problem: null });
    expect((await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'usable-again').send({ pricingId: priceA })).status).toBe(201);
    expect((await unbind(ctx.orgA.orgId)).body.data).toEqual({ orgId: ctx.orgA.orgId, accountId: null, boundAt: null, state: null });
  });

  it('account.updated about an account no organization is bound to is acknowledged and ignored', async () => {
    const account = stripe.connectAccount();
    expect((await deliver(stripe.restrictAccount(account.id))).body).toEqual({ received: true, outcome: 'ignored' });
  });
});

describe('the admin CLI on Stripe', () => {
  const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  let server: Server;
  let adminUrl: string;
  beforeAll(async () => {
    server = await new Promise<Server>((resolve) => {
      const s = http.createServer(ctx.apps.admin).listen(0, '127.0.0.1', () => resolve(s));
    });
    adminUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  /** `scripts/admin.ts` as a child process, as users run it. */
  const cli = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const env: NodeJS.ProcessEnv = { ...process.env, ADMIN_URL: adminUrl, ADMIN_TOKEN: ctx.adminToken };
      for (const name of ['ADMIN_HOST', 'ADMIN_PORT', 'DATA_DIR']) delete env[name];
      execFile(process.execPath, [...nodeEntryArgs('scripts/admin.ts'), ...args], { cwd: repoRoot, env, timeout: CHILD_COMMAND_TIMEOUT_MS }, (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
      });
    });

  it('org set-stripe-account binds a connected account checked with Stripe, refuses an unknown one (exit 1, the 400), and org remove-stripe-account unbinds', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'CLI platform merchant' });
    const unknown = await cli(['org', 'set-stripe-account', '--org', org.id, '--account', 'acct_1UnknownToStripe']);
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stderr)).toMatchObject({ error: { code: 'VALIDATION_ERROR', status: 400 } });
    const account = stripe.connectAccount();
    const bound = await cli(['org', 'set-stripe-account', '--org', org.id, '--account', account.id]);
    expect(bound.stderr).toBe('');
    expect(JSON.parse(bound.stdout)).toMatchObject({ orgId: org.id, accountId: account.id });
    expect(JSON.parse((await cli(['org', 'stripe-account', '--org', org.id])).stdout).accountId).toBe(account.id);
    expect(JSON.parse((await cli(['org', 'remove-stripe-account', '--org', org.id])).stdout)).toEqual({ orgId: org.id, accountId: null, boundAt: null, state: null });
  });
});

describe.skipIf(!onPostgres)(skippedUnless('binding races', 'postgresOnly'), () => {
  it('two organizations binding one account at once: one wins, the other is 409 (20 rounds)', async () => {
    for (let round = 0; round < 20; round++) {
      const orgs = await Promise.all([ctx.services.orgs.createOrganization({ name: `r${round}a` }), ctx.services.orgs.createOrganization({ name: `r${round}b` })]);
      const account = stripe.connectAccount();
      const answers = await Promise.all(orgs.map((org) => bind(org.id, account.id)));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
      const bound = await ctx.testDb.database.db('organizations').where({ stripe_account_id: account.id });
      expect(bound).toHaveLength(1);
    }
  });
});
