/**
 * Documented 409s of the admin API that no domain test reached (found by the contract-coverage
 * table): the project cap through the admin API, pausing a subscription that already ended, and
 * two signing-key rotations racing each other (PostgreSQL only: the embedded database runs one
 * statement at a time, so a race cannot happen there).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
import { MAX_PROJECTS_PER_ORG } from '../../src/telemetry/projects.service.js';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

const conflictBody = (message: string | RegExp) => ({
  success: false,
  message: expect.stringMatching(message),
  error: { code: 'CONFLICT', message: expect.stringMatching(message) },
});

describe('admin API conflicts', () => {
  it('createTelemetryProject: the 101st project of an organization is 409, and nothing is created', async () => {
    for (let i = 0; i < MAX_PROJECTS_PER_ORG; i++) await ctx.services.telemetry.projects.create(ctx.orgB.orgId, { name: `Project ${i}` });
    const refused = await ctx.admin.post(`/v1/orgs/${ctx.orgB.orgId}/telemetry-projects`).send({ name: 'One too many' });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual(conflictBody(/100/));
    const listed = await ctx.admin.get(`/v1/orgs/${ctx.orgB.orgId}/telemetry-projects`);
    expect(listed.status).toBe(200);
    const names = (listed.body.data.records ?? listed.body.data).map((p: { name: string }) => p.name);
    expect(names).toHaveLength(MAX_PROJECTS_PER_ORG);
    expect(names).not.toContain('One too many');
  });

  it('pauseSubscription: a subscription that was canceled cannot be paused (409), and stays CANCELED', async () => {
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
    const price = await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 });
    const created = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'pause-conflict')
      .send({ pricingId: price.id, customerEmail: 'pause@example.com' });
    expect(created.status).toBe(201);
    const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
    expect(paid.status).toBe(303);
    const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    const order = (await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    const subscriptionId = order.subscriptionId as string;

    const canceled = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/cancel`).send({ atPeriodEnd: false });
    expect(canceled.status).toBe(200);
    expect(canceled.body.data.status).toBe('CANCELED');
    const refused = await ctx.admin.post(`/v1/subscriptions/${subscriptionId}/pause`);
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual(conflictBody(/CANCELED|cancel/i));
    const after = await ctx.merchant.get(`/v1/subscriptions/${subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(after.body.data.status).toBe('CANCELED');
  });
});

describe.runIf(process.env.TEST_DATABASE_URL)(skippedUnless('signing-key rotations racing each other', 'postgresOnly'), () => {
  it('rotateWebhookSigningKey: one wins (201), the other is 409 and changes nothing', async () => {
    const db = ctx.testDb.database.db;
    const before = (await ctx.platform.get('/v1/webhooks/signing-key')).body.data.keyId as string;
    // Hold the current key's row so both rotations are inside their UPDATE when it is released.
    const holder = await db.transaction();
    await holder('webhook_signing_keys').whereNull('retired_at').forUpdate();
    const first = Promise.resolve(ctx.admin.post('/v1/webhooks/signing-key/rotate').send({}));
    const second = Promise.resolve(ctx.admin.post('/v1/webhooks/signing-key/rotate').send({}));
    for (let waited = 0; ; waited += 50) {
      const { rows } = await db.raw(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE 'update "webhook_signing_keys"%'`);
      if (rows[0].n >= 2) break;
      if (waited > 20_000) throw new Error('the two rotations never both waited on the lock');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await holder.commit();
    const answers = await Promise.all([first, second]);
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
    const lost = answers.find((a) => a.status === 409)!;
    expect(lost.body).toEqual(conflictBody(/same time/));
    const won = answers.find((a) => a.status === 201)!;
    const published = (await ctx.platform.get('/v1/webhooks/signing-key')).body.data;
    expect(published.keyId).not.toBe(before);
    expect(published.keyId).toBe(won.body.data.keyId);
    expect(published.keys.map((k: { kid: string }) => k.kid)).toContain(before);
    const current = await db('webhook_signing_keys').whereNull('retired_at');
    expect(current).toHaveLength(1);
  });
});
