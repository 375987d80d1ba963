/**
 * The deployment's test clock (TEST_CLOCK=true, admin API advanceTestClock): it moves every "now"
 * forward and never back, answers 404 on a deployment without it, and production refuses it.
 * (test/examples.test.ts runs usage-billing.ts against a server started with it, to a renewal.)
 */
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminApp } from '../../src/apps.js';
import { loadConfig } from '../../src/config.js';
import { ShiftedClock } from '../../src/kernel/clock.js';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

describe('test clock', () => {
  it('moves forward only, the shift adding to the running system clock', () => {
    const clock = new ShiftedClock();
    const before = Date.now();
    clock.advance(3_600_000);
    expect(clock.now().getTime()).toBeGreaterThanOrEqual(before + 3_600_000);
    expect(clock.shiftMs).toBe(3_600_000);
    expect(() => clock.advance(0)).toThrow(RangeError);
    expect(() => clock.advance(-1)).toThrow(RangeError);
  });

  it('TEST_CLOCK=true is refused in production, off by default', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', TEST_CLOCK: 'true' }, [])).toThrow(/TEST_CLOCK=true is for development and tests only/);
    expect(loadConfig({ NODE_ENV: 'test' }, []).testClock).toBe(false);
    expect(loadConfig({ NODE_ENV: 'test', TEST_CLOCK: 'true' }, []).testClock).toBe(true);
  });

  it('advanceTestClock: 200 with the clock moved, 400 naming seconds, 401 without the token, 404 without a test clock', async () => {
    const clock = new ShiftedClock();
    const admin = supertest(await createAdminApp({ ...ctx.deps, clock }));
    const auth = { Authorization: `Bearer ${ctx.adminToken}` };
    const moved = await admin.post('/v1/test-clock/advance').set(auth).send({ seconds: 86_400 });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    expect(moved.body.data.shiftSeconds).toBe(86_400);
    expect(Date.parse(moved.body.data.now)).toBeGreaterThanOrEqual(Date.now() + 86_400_000 - 5_000);
    expect(clock.now().getTime()).toBeGreaterThanOrEqual(Date.now() + 86_399_000);

    const zero = await admin.post('/v1/test-clock/advance').set(auth).send({ seconds: 0 });
    expect(zero.status).toBe(400);
    expect(JSON.stringify(zero.body)).toContain('seconds');
    expect((await admin.post('/v1/test-clock/advance').send({ seconds: 1 })).status).toBe(401);
    // The harness runs on a manual clock, as a deployment without TEST_CLOCK on the system clock.
    const off = await ctx.admin.post('/v1/test-clock/advance').send({ seconds: 1 });
    expect(off.status).toBe(404);
    expect(off.body.message ?? off.body.error?.message ?? JSON.stringify(off.body)).toMatch(/TEST_CLOCK=true/);
  });
});
