/**
 * The HTTP layer tells the database layer which organization is writing (src/http/openapi-app.ts,
 * `writes`): every authenticated request but GET/HEAD/OPTIONS, from its authentication until its
 * response is done. The read router keeps that organization's lag-tolerant reads on the primary
 * meanwhile and until a replica has replayed the write (test/db/read-replicas.test.ts).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
const events: string[] = [];

beforeAll(async () => {
  ctx = await createTestContext();
  // The apps hold the router itself; its `begin` is looked up at each request.
  ctx.deps.database.reads.begin = (caller: string) => {
    events.push(`begin ${caller}`);
    return () => events.push(`end ${caller}`);
  };
});

afterAll(async () => {
  await ctx?.close();
});

it("a write request marks its organization from authentication to the response's end; a read marks nothing", async () => {
  const created = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', ctx.orgA.apiKey)
    .set('Idempotency-Key', 'write-tracking-1')
    .send({ pricingData: { amount: 1500, currency: 'USD', productData: { name: 'Tracked' } } });
  expect(created.status).toBe(201);
  expect(events).toEqual([`begin ${ctx.orgA.orgId}`, `end ${ctx.orgA.orgId}`]);

  events.length = 0;
  expect((await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).status).toBe(200);
  expect((await ctx.merchant.post('/v1/checkout-sessions').send({})).status).toBe(401);
  expect(events).toEqual([]);
});
