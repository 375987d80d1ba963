/** The production-readiness settings: defaults and the values refused at start. */
import { randomBytes } from 'node:crypto';
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

describe('the admin listener in production (issue 27, item 8)', () => {
  // A production start that is otherwise valid: the sandbox on purpose, a generated admin token.
  const STRONG = 'f3b1c0e9d2a4b7c8e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8';
  const prod = (env: Record<string, string>) => load({ NODE_ENV: 'production', KASSA_ALLOW_SANDBOX_IN_PRODUCTION: 'true', ...env });

  it.each(['aaaaaaaaaaaaaaaaaaaaaaaa', 'a'.repeat(64), 'changeme-changeme-changeme-changeme', '0123456789abcdef'.repeat(4), 'correct-horse-battery-staple'])(
    'refuses the low-entropy ADMIN_TOKEN %j and says how to generate one',
    (token) => {
      expect(() => prod({ ADMIN_TOKEN: token })).toThrow(ConfigError);
      expect(() => prod({ ADMIN_TOKEN: token })).toThrow(/ADMIN_TOKEN .*128 bits.*openssl rand -hex 32/);
    },
  );

  it('accepts a generated ADMIN_TOKEN (openssl rand -hex 32, -base64 32) and no ADMIN_TOKEN (generated into DATA_DIR)', () => {
    expect(prod({ ADMIN_TOKEN: STRONG }).adminToken).toBe(STRONG);
    for (let i = 0; i < 200; i++) {
      expect(() => prod({ ADMIN_TOKEN: randomBytes(32).toString('hex') })).not.toThrow();
      expect(() => prod({ ADMIN_TOKEN: randomBytes(32).toString('base64') })).not.toThrow();
    }
    expect(prod({}).adminToken).toBeUndefined();
  });

  it('outside production keeps accepting any token of 24 characters or more', () => {
    expect(load({ ADMIN_TOKEN: 'aaaaaaaaaaaaaaaaaaaaaaaa' }).adminToken).toBe('aaaaaaaaaaaaaaaaaaaaaaaa');
    expect(() => load({ ADMIN_TOKEN: 'short' })).toThrow(/at least 24 characters/);
  });

  it.each(['0.0.0.0', '::', '10.0.0.5', 'admin.internal'])('refuses ADMIN_HOST=%s without ADMIN_TLS_TERMINATED=true', (host) => {
    expect(() => prod({ ADMIN_TOKEN: STRONG, ADMIN_HOST: host })).toThrow(ConfigError);
    expect(() => prod({ ADMIN_TOKEN: STRONG, ADMIN_HOST: host })).toThrow(/ADMIN_HOST .* ADMIN_TLS_TERMINATED=true/);
  });

  it('accepts a non-loopback ADMIN_HOST when ADMIN_TLS_TERMINATED=true, and every loopback host without it', () => {
    expect(prod({ ADMIN_TOKEN: STRONG, ADMIN_HOST: '0.0.0.0', ADMIN_TLS_TERMINATED: 'true' })).toMatchObject({ adminHost: '0.0.0.0', adminTlsTerminated: true });
    for (const host of ['127.0.0.1', '127.0.0.2', '::1', 'localhost']) {
      expect(prod({ ADMIN_TOKEN: STRONG, ADMIN_HOST: host })).toMatchObject({ adminHost: host, adminTlsTerminated: false });
    }
    // Development: any bind, as before.
    expect(load({ ADMIN_HOST: '0.0.0.0' }).adminHost).toBe('0.0.0.0');
  });

  it('refuses ADMIN_TLS_TERMINATED values that are not true or false', () => {
    expect(() => prod({ ADMIN_TLS_TERMINATED: 'maybe' })).toThrow(/ADMIN_TLS_TERMINATED must be true or false/);
  });
});
