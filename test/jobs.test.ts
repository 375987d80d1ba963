/** The job registry (src/jobs.ts): every domain's background job, each exactly once. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './harness/context.js';
import { workerJobs } from '../src/jobs.js';

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

describe('job registry', () => {
  it('lists the background job of every domain once, with its pause', () => {
    const jobs = workerJobs(ctx.deps);
    expect(Object.fromEntries(jobs.map((job) => [job.name, job.intervalMs]))).toEqual({
      'webhook-delivery': expect.any(Number),
      'webhook-retention': 60_000,
      'checkout-session-expiry': 5_000,
      'sandbox-settlement': 1_000,
      'subscription-renewals': 5_000,
      'subscription-trial-reminders': 60_000,
      'telemetry-retention': 60_000,
      'telemetry-partitions': 3_600_000,
      'telemetry-group-changes': 1_000,
      'commerce-rollups': 1_000,
      'crypto-chain-watcher': ctx.config.crypto.pollIntervalMs,
      'x402-settlement-finisher': 30_000,
      'portal-session-cleanup': 15 * 60_000,
      'account-retention': 3_600_000,
      'usage-meter-rollups': 1_000,
      'usage-meter-fold': 500,
      // usage-event-retention runs only with USAGE_EVENT_RETENTION_DAYS (test/usage/event-partitions.test.ts).
      'usage-event-partitions': 3_600_000,
    });
    expect(new Set(jobs.map((job) => job.name)).size).toBe(jobs.length);
  });

  it('runs each job once on an idle database without error', async () => {
    for (const job of workerJobs(ctx.deps)) {
      await job.run();
      await job.drain?.();
    }
  });
});
