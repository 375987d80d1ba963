/** Which card processor a deployment runs (src/config.ts cardProcessor, docs/card-processors.md). */
import { describe, expect, it } from 'vitest';
import { ConfigError, configSecrets, loadConfig } from '../../src/config.js';

const STRIPE = { STRIPE_SECRET_KEY: 'sk_test_abc123', STRIPE_WEBHOOK_SECRET: 'whsec_abc123' };

describe('card processor selection', () => {
  it('is the sandbox by default (the two-command start needs no setup)', () => {
    expect(loadConfig({}, []).cardProcessor).toEqual({ kind: 'sandbox' });
  });

  it('is Stripe when both Stripe secrets are set, with a 10 s timeout per attempt by default', () => {
    expect(loadConfig(STRIPE, []).cardProcessor).toEqual({ kind: 'stripe', secretKey: 'sk_test_abc123', webhookSecret: 'whsec_abc123', apiBaseUrl: undefined, timeoutMs: 10_000, reconcileIntervalMs: 60_000 });
    expect(loadConfig({ ...STRIPE, STRIPE_SECRET_KEY: 'rk_live_xyz', NODE_ENV: 'production' }, []).cardProcessor.kind).toBe('stripe');
  });

  it('refuses the sandbox under NODE_ENV=production unless opted in explicitly', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' }, [])).toThrow(ConfigError);
    expect(() => loadConfig({ NODE_ENV: 'production' }, [])).toThrow(/KASSA_ALLOW_SANDBOX_IN_PRODUCTION=true/);
    expect(() => loadConfig({ NODE_ENV: 'production', KASSA_ALLOW_SANDBOX_IN_PRODUCTION: 'false' }, [])).toThrow(ConfigError);
    expect(loadConfig({ NODE_ENV: 'production', KASSA_ALLOW_SANDBOX_IN_PRODUCTION: 'true' }, []).cardProcessor).toEqual({ kind: 'sandbox' });
  });

  it.each([
    [{ STRIPE_SECRET_KEY: 'sk_test_abc123' }, /set together/],
    [{ STRIPE_WEBHOOK_SECRET: 'whsec_abc123' }, /set together/],
    [{ ...STRIPE, STRIPE_SECRET_KEY: 'pk_test_abc123' }, /STRIPE_SECRET_KEY must be a Stripe secret or restricted key/],
    [{ ...STRIPE, STRIPE_WEBHOOK_SECRET: 'abc' }, /STRIPE_WEBHOOK_SECRET must be/],
    [{ ...STRIPE, STRIPE_API_BASE_URL: 'not a url' }, /STRIPE_API_BASE_URL must be an absolute URL/],
    [{ ...STRIPE, STRIPE_API_BASE_URL: 'http://127.0.0.1:12111', NODE_ENV: 'production' }, /STRIPE_API_BASE_URL is for development and tests only/],
    [{ STRIPE_API_BASE_URL: 'http://127.0.0.1:12111' }, /without STRIPE_SECRET_KEY/],
    [{ ...STRIPE, STRIPE_TIMEOUT_MS: '0' }, /STRIPE_TIMEOUT_MS/],
  ])('fails fast on %o', (env, message) => {
    expect(() => loadConfig(env as Record<string, string>, [])).toThrow(ConfigError);
    expect(() => loadConfig(env as Record<string, string>, [])).toThrow(message);
  });

  it('counts both Stripe secrets as secrets the logger blanks by value', () => {
    expect(configSecrets(loadConfig(STRIPE, []))).toEqual(expect.arrayContaining(['sk_test_abc123', 'whsec_abc123']));
  });
});
