import { describe, expect, it } from 'vitest';
import { ConfigError, configSecrets, loadConfig } from '../src/config.js';

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

  it('keeps usage events for ever unless USAGE_EVENT_RETENTION_DAYS says otherwise (at least 63 days)', () => {
    expect(loadConfig({}, []).usageEventRetentionDays).toBeUndefined();
    expect(loadConfig({ USAGE_EVENT_RETENTION_DAYS: '400' }, []).usageEventRetentionDays).toBe(400);
    for (const bad of ['62', '0', '-1', '90.5', 'forever']) {
      expect(() => loadConfig({ USAGE_EVENT_RETENTION_DAYS: bad }, [])).toThrow(ConfigError);
    }
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

  describe('read replicas and the direct URL (DATABASE_REPLICA_URL, DATABASE_DIRECT_URL)', () => {
    const primary = 'postgres://kassa:pw@db:5432/kassa';
    it('reads one or more comma-separated replicas, with the lag bound and check interval', () => {
      const config = loadConfig({ DATABASE_URL: primary, DATABASE_REPLICA_URL: 'postgres://kassa:r1@replica-1/kassa, postgresql://kassa:r2@replica-2:6432/kassa', DATABASE_DIRECT_URL: 'postgres://kassa:pw@db-direct/kassa' }, []);
      expect(config.databaseReplicaUrls).toEqual(['postgres://kassa:r1@replica-1/kassa', 'postgresql://kassa:r2@replica-2:6432/kassa']);
      expect(config.databaseDirectUrl).toBe('postgres://kassa:pw@db-direct/kassa');
      expect(config).toMatchObject({ databaseReplicaMaxLagMs: 2000, databaseReplicaCheckIntervalMs: 500 });
      expect(loadConfig({ DATABASE_URL: primary }, []).databaseReplicaUrls).toEqual([]);
    });

    it('blanks the replicas\' and the direct URL\'s passwords in logs', () => {
      const config = loadConfig({ DATABASE_URL: primary, DATABASE_REPLICA_URL: 'postgres://kassa:replica-secret@replica/kassa', DATABASE_DIRECT_URL: 'postgres://kassa:direct-secret@db/kassa' }, []);
      expect(configSecrets(config)).toEqual(expect.arrayContaining(['pw', 'replica-secret', 'direct-secret']));
    });

    it.each([
      [{ DATABASE_REPLICA_URL: 'postgres://replica/kassa' }, /DATABASE_REPLICA_URL needs DATABASE_URL/],
      [{ DATABASE_DIRECT_URL: 'postgres://db/kassa' }, /DATABASE_DIRECT_URL needs DATABASE_URL/],
      [{ DATABASE_URL: primary, DATABASE_REPLICA_URL: 'mysql://replica/kassa' }, /DATABASE_REPLICA_URL \(entry 1\) must be a postgres:\/\//],
      [{ DATABASE_URL: primary, DATABASE_REPLICA_URL: 'postgres://replica/kassa,,postgres://other/kassa' }, /none empty/],
      [{ DATABASE_URL: primary, DATABASE_REPLICA_URL: 'postgres://replica/kassa,postgres://replica/kassa' }, /twice/],
      [{ DATABASE_URL: primary, DATABASE_REPLICA_URL: primary }, /not the primary/],
      [{ DATABASE_URL: primary, DATABASE_DIRECT_URL: 'http://db/kassa' }, /DATABASE_DIRECT_URL must be a postgres:\/\//],
      [{ DATABASE_URL: primary, DATABASE_REPLICA_URL: 'postgres://replica/kassa', DATABASE_REPLICA_MAX_LAG_MS: '0' }, /DATABASE_REPLICA_MAX_LAG_MS/],
      [{ DATABASE_URL: primary, DATABASE_REPLICA_URL: 'postgres://replica/kassa', DATABASE_REPLICA_CHECK_INTERVAL_MS: '2000' }, /must be below DATABASE_REPLICA_MAX_LAG_MS/],
      [{ DATABASE_URL: primary, DATABASE_REPLICA_CHECK_INTERVAL_MS: '10' }, /at least 50/],
    ])('refuses %j', (env, message) => {
      expect(() => loadConfig(env, [])).toThrow(ConfigError);
      expect(() => loadConfig(env, [])).toThrow(message);
    });
  });
});
