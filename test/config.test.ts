import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

describe('config', () => {
  it('has working defaults: ports 3000/3001/3002, admin on loopback, embedded database', () => {
    const config = loadConfig({}, []);
    expect(config).toMatchObject({
      merchantPort: 3000,
      apiPort: 3001,
      adminPort: 3002,
      adminHost: '127.0.0.1',
      publicBaseUrl: 'http://localhost:3000',
      publicApiUrl: 'http://localhost:3001',
      databaseUrl: undefined,
      role: 'all',
      seedDemo: true,
    });
  });

  it('derives public URLs from the ports unless PUBLIC_* say otherwise', () => {
    expect(loadConfig({ MERCHANT_PORT: '8080' }, []).publicBaseUrl).toBe('http://localhost:8080');
    expect(loadConfig({ PUBLIC_API_URL: 'https://api.kassa.example/' }, []).publicApiUrl).toBe('https://api.kassa.example');
  });

  it.each([
    [{ MERCHANT_PORT: 'abc' }, /MERCHANT_PORT/],
    [{ API_PORT: '70000' }, /API_PORT/],
    [{ PUBLIC_BASE_URL: 'not a url' }, /PUBLIC_BASE_URL/],
    [{ ENCRYPTION_KEY: 'c2hvcnQ=' }, /ENCRYPTION_KEY/],
    [{ ADMIN_TOKEN: 'short' }, /ADMIN_TOKEN/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL/],
    [{ KASSA_SEED_DEMO: 'maybe' }, /KASSA_SEED_DEMO/],
    [{ KASSA_ROLE: 'boss' }, /KASSA_ROLE/],
    [{ TRUST_PROXY: 'maybe' }, /TRUST_PROXY must be true, false or the number of proxies/],
    [{ HOSTED_RATE_LIMIT_PER_MINUTE: '-1' }, /HOSTED_RATE_LIMIT_PER_MINUTE/],
    [{ HOSTED_WRITE_RATE_LIMIT_PER_MINUTE: 'lots' }, /HOSTED_WRITE_RATE_LIMIT_PER_MINUTE/],
  ])('fails fast on bad configuration %o', (env, message) => {
    expect(() => loadConfig(env as Record<string, string>, [])).toThrow(ConfigError);
    expect(() => loadConfig(env as Record<string, string>, [])).toThrow(message);
  });

  it('rate-limits hosted pages per client address by default (120 requests, 30 writes a minute)', () => {
    expect(loadConfig({}, [])).toMatchObject({ hostedRateLimitPerMinute: 120, hostedWriteRateLimitPerMinute: 30 });
    expect(loadConfig({ HOSTED_RATE_LIMIT_PER_MINUTE: '0', HOSTED_WRITE_RATE_LIMIT_PER_MINUTE: '5' }, [])).toMatchObject({ hostedRateLimitPerMinute: 0, hostedWriteRateLimitPerMinute: 5 });
  });

  it('reads TRUST_PROXY as a number of trusted proxies: true is one load balancer, never "all"', () => {
    expect(loadConfig({}, []).trustProxy).toBe(0);
    expect(loadConfig({ TRUST_PROXY: 'false' }, []).trustProxy).toBe(0);
    expect(loadConfig({ TRUST_PROXY: 'true' }, []).trustProxy).toBe(1);
    expect(loadConfig({ TRUST_PROXY: '2' }, []).trustProxy).toBe(2);
  });

  it('takes the role from --role', () => {
    expect(loadConfig({}, ['--role', 'worker']).role).toBe('worker');
  });
});
