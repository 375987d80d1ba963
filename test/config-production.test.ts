/** The production-readiness settings: defaults and the values refused at start. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

const load = (env: Record<string, string>) => loadConfig(env, []);

describe('production settings', () => {
  it('have documented defaults', () => {
    const config = load({});
    expect(config).toMatchObject({
      databasePoolMax: 10,
      databasePreparedStatements: true,
      merchantRateLimitPerMinute: 6000,
      webhookLeaseSeconds: 60,
      webhookBatchSize: 50,
      webhookPollMs: 100,
    });
  });

  it('take their environment variables', () => {
    const config = load({
      DATABASE_POOL_MAX: '25',
      DATABASE_PREPARED_STATEMENTS: 'false',
      MERCHANT_RATE_LIMIT_PER_MINUTE: '0',
      WEBHOOK_DELIVERY_LEASE_SECONDS: '15',
      WEBHOOK_DELIVERY_BATCH_SIZE: '8',
      WEBHOOK_DELIVERY_POLL_MS: '20',
    });
    expect(config).toMatchObject({ databasePoolMax: 25, databasePreparedStatements: false, merchantRateLimitPerMinute: 0, webhookLeaseSeconds: 15, webhookBatchSize: 8, webhookPollMs: 20 });
  });

  it.each([
    [{ DATABASE_POOL_MAX: '1' }, /DATABASE_POOL_MAX must be at least 2/],
    [{ DATABASE_POOL_MAX: 'ten' }, /DATABASE_POOL_MAX must be a positive integer/],
    [{ MERCHANT_RATE_LIMIT_PER_MINUTE: '-1' }, /MERCHANT_RATE_LIMIT_PER_MINUTE must be a non-negative integer/],
    [{ WEBHOOK_DELIVERY_LEASE_SECONDS: '14' }, /WEBHOOK_DELIVERY_LEASE_SECONDS must be at least 15/],
    [{ WEBHOOK_DELIVERY_BATCH_SIZE: '0' }, /WEBHOOK_DELIVERY_BATCH_SIZE must be a positive integer/],
    [{ WEBHOOK_DELIVERY_POLL_MS: '1.5' }, /WEBHOOK_DELIVERY_POLL_MS must be a positive integer/],
    [{ DATABASE_PREPARED_STATEMENTS: 'sometimes' }, /DATABASE_PREPARED_STATEMENTS must be true or false/],
  ])('refuse %j', (env, message) => {
    expect(() => load(env)).toThrow(ConfigError);
    expect(() => load(env)).toThrow(message);
  });
});
