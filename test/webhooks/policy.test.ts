/** The pure rules: retry verdicts, backoff, Retry-After, and the SSRF address policy. */
import dns from 'node:dns';
import { describe, expect, it } from 'vitest';
import { loadConfig, ConfigError } from '../../src/config.js';
import { backoffMs, decide, retryAfterMs, verdict, BACKOFF_CAP_MS, MAX_ATTEMPTS } from '../../src/webhooks/retry-policy.js';
import { UnsafeUrlError, UrlGuard, type Resolve } from '../../src/webhooks/url-guard.js';

const NOW = new Date('2026-11-22T09:00:00.000Z');

describe('retry verdicts', () => {
  it.each([
    [null, 'retry'], [200, 'succeeded'], [201, 'succeeded'], [204, 'succeeded'], [299, 'succeeded'],
    [408, 'retry'], [429, 'retry'], [500, 'retry'], [502, 'retry'], [503, 'retry'], [504, 'retry'], [599, 'retry'],
    [100, 'fail'], [301, 'fail'], [302, 'fail'], [304, 'fail'], [307, 'fail'], [308, 'fail'],
    [400, 'fail'], [401, 'fail'], [403, 'fail'], [404, 'fail'], [409, 'fail'], [410, 'fail'], [413, 'fail'], [422, 'fail'],
  ] as const)('%s → %s', (status, expected) => {
    expect(verdict(status)).toBe(expected);
  });
});

describe('backoff', () => {
  it('doubles from 30 s with ±20% jitter and never exceeds one hour', () => {
    expect([1, 2, 3, 7, 8, 11, 40].map((n) => backoffMs(n, () => 0.5))).toEqual([30_000, 60_000, 120_000, 1_920_000, BACKOFF_CAP_MS, BACKOFF_CAP_MS, BACKOFF_CAP_MS]);
    expect(backoffMs(1, () => 0)).toBe(24_000);
    expect(backoffMs(1, () => 1)).toBe(36_000);
    expect(backoffMs(7, () => 0)).toBe(1_536_000);
    for (let n = 1; n <= MAX_ATTEMPTS; n++) expect(backoffMs(n, () => 1)).toBeLessThanOrEqual(BACKOFF_CAP_MS);
  });

  it('stops after the twelfth attempt', () => {
    expect(decide(11, 500, undefined, NOW, () => 0.5)).toEqual({ status: 'pending', delayMs: BACKOFF_CAP_MS, source: 'backoff' });
    expect(decide(12, 500, undefined, NOW)).toEqual({ status: 'failed', why: 'attempts_exhausted' });
    expect(decide(12, 200, undefined, NOW)).toEqual({ status: 'succeeded' });
    expect(decide(1, 404, undefined, NOW)).toEqual({ status: 'failed', why: 'not_retryable' });
  });
});

describe('Retry-After', () => {
  it('reads delta-seconds and HTTP dates, capped at one hour', () => {
    expect(retryAfterMs('0', NOW)).toBe(0);
    expect(retryAfterMs(' 120 ', NOW)).toBe(120_000);
    expect(retryAfterMs('3601', NOW)).toBe(BACKOFF_CAP_MS);
    expect(retryAfterMs('Sun, 22 Nov 2026 09:10:00 GMT', NOW)).toBe(600_000);
    expect(retryAfterMs('Sun, 22 Nov 2026 08:00:00 GMT', NOW)).toBe(0); // in the past: now
    expect(retryAfterMs('Mon, 23 Nov 2026 09:00:00 GMT', NOW)).toBe(BACKOFF_CAP_MS);
  });

  it('ignores absent or malformed values (the backoff applies)', () => {
    for (const v of [undefined, '', '-5', '1.5', 'soon', '12abc']) expect(retryAfterMs(v, NOW)).toBeUndefined();
    expect(decide(1, 429, 'soon', NOW, () => 0.5)).toEqual({ status: 'pending', delayMs: 30_000, source: 'backoff' });
    expect(decide(1, 503, '90', NOW)).toEqual({ status: 'pending', delayMs: 90_000, source: 'retry-after' });
    expect(decide(1, 502, '90', NOW, () => 0.5)).toEqual({ status: 'pending', delayMs: 30_000, source: 'backoff' });
  });
});

describe('UrlGuard', () => {
  const names: Record<string, string[]> = {
    'public.example': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
    'private.example': ['10.1.2.3'],
    'mixed.example': ['93.184.216.34', '192.168.0.10'],
    'mapped.example': ['::ffff:169.254.169.254'],
    'nat64.example': ['64:ff9b::a00:1'],
    'v6-private.example': ['fd12:3456::1'],
  };
  const resolve: Resolve = async (host) => {
    const found = names[host];
    if (!found) throw Object.assign(new Error('not found'), { code: host === 'flaky.example' ? 'EAI_AGAIN' : 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  const guard = new UrlGuard({ allowLoopback: false, resolve });

  it('accepts public hosts and refuses a name if any of its addresses is forbidden', async () => {
    await expect(guard.check('https://public.example/hooks')).resolves.toBeUndefined();
    for (const host of ['private.example', 'mixed.example', 'mapped.example', 'nat64.example', 'v6-private.example']) {
      await expect(guard.check(`https://${host}/`)).rejects.toMatchObject({ reason: 'forbidden_address' });
    }
  });

  it('tells an unresolvable name from a DNS outage', async () => {
    await expect(guard.check('https://nope.example/')).rejects.toMatchObject({ reason: 'unresolvable' });
    await expect(guard.check('https://flaky.example/')).rejects.toMatchObject({ reason: 'dns_error' });
  });

  it('refuses non-https URLs and credentials even when called directly', () => {
    expect(() => guard.parse('http://public.example/')).toThrow(UnsafeUrlError);
    expect(() => guard.parse('https://u:p@public.example/')).toThrow('credentials');
    expect(() => guard.parse('not a url')).toThrow('not an absolute URL');
  });

  it('classifies addresses', () => {
    for (const ok of ['93.184.216.34', '8.8.8.8', '2606:4700::1111', '100.63.255.255', '172.32.0.1']) expect(guard.refusal(ok)).toBeUndefined();
    for (const bad of ['127.0.0.1', '10.255.255.255', '172.31.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '255.255.255.255', '::1', '::', 'fe80::1', 'fc00::1', 'ff02::1', '::ffff:10.0.0.1', '::ffff:a00:1']) {
      expect(guard.refusal(bad), bad).toBeDefined();
    }
    const dev = new UrlGuard({ allowLoopback: true, resolve });
    expect(dev.refusal('127.0.0.1')).toBeUndefined();
    expect(dev.refusal('::1')).toBeUndefined();
    expect(dev.refusal('::ffff:127.0.0.1')).toBeUndefined();
    expect(dev.refusal('10.0.0.1')).toBeDefined();
  });

  it('judges IPv6 transition forms by the IPv4 address they carry, and refuses IPv6 outside global unicast', () => {
    const refused = {
      'IPv4-compatible loopback': '::7f00:1',
      'IPv4-compatible link-local (metadata)': '::a9fe:a9fe',
      'IPv4-compatible private': '::a00:1',
      'IPv4-compatible unspecified': '::2',
      'IPv4-mapped metadata': '::ffff:a9fe:a9fe',
      'IPv4-translated (RFC 6145) private': '::ffff:0:a00:1',
      'NAT64 well-known prefix, private': '64:ff9b::a00:1',
      'NAT64 well-known prefix, loopback': '64:ff9b::7f00:1',
      'NAT64 local-use /96, metadata': '64:ff9b:1::a9fe:a9fe',
      'NAT64 local-use, longer prefix (IPv4 position unknown)': '64:ff9b:1:5db8:d822::1',
      '6to4 of loopback': '2002:7f00:1::',
      '6to4 of private': '2002:c0a8:101::1',
      'Teredo, loopback client': '2001:0:4136:e378:8000:63bf:80ff:fffe',
      'Teredo, private client': '2001:0:4136:e378:8000:63bf:f5ff:fffe',
      'Teredo, private server': '2001:0:a00:1:8000:63bf:a2f7:f6f7',
      'documentation': '2001:db8::1',
      'benchmarking': '2001:2::1',
      'IETF protocol assignments': '2001:1::1',
      'outside 2000::/3': '4000::1',
      'segment routing': '5f00::1',
      'discard': '100::1',
      'deprecated site-local': 'fec0::1',
      'IPv4 shared address space (CGNAT)': '100.64.0.1',
      'IPv4 benchmarking': '198.18.0.1',
      'IPv4 reserved': '240.0.0.1',
    };
    for (const [why, address] of Object.entries(refused)) expect(guard.refusal(address), `${why}: ${address}`).toBeDefined();
    expect(guard.refusal('::7f00:1')).toBe('::7f00:1 carries the IPv4 address 127.0.0.1, a loopback, private, link-local, reserved or metadata address');
    expect(guard.refusal('::127.0.0.1')).toBe('::127.0.0.1 carries the IPv4 address 127.0.0.1, a loopback, private, link-local, reserved or metadata address');

    // The same forms carrying a public IPv4 address reach that address: accepted.
    const accepted = ['::ffff:808:808', '::ffff:0:808:808', '::808:808', '64:ff9b::808:808', '64:ff9b:1::5db8:d822', '2002:808:808::1', '2001:0:4136:e378:8000:63bf:a2f7:f6f7', '2001:4860:4860::8888'];
    for (const address of accepted) expect(guard.refusal(address), address).toBeUndefined();

    // The development flag lifts loopback as a socket reaches it (127/8, ::1, IPv4-mapped), not through a tunnel or translator.
    const dev = new UrlGuard({ allowLoopback: true, resolve });
    for (const address of ['127.0.0.2', '::1', '::ffff:7f00:1']) expect(dev.refusal(address), address).toBeUndefined();
    for (const address of ['::7f00:1', '::127.0.0.1', '64:ff9b::7f00:1', '2002:7f00:1::', '2001:0:4136:e378:8000:63bf:80ff:fffe', '::a9fe:a9fe']) expect(dev.refusal(address), address).toBeDefined();
  });

  it('is the socket lookup: answers both the single and the all-addresses forms, and fails closed', async () => {
    const lookup = (host: string, options: dns.LookupOptions) =>
      new Promise<unknown>((resolveP, reject) =>
        guard.lookup(host, options, ((err: Error | null, address: unknown, family?: number) => (err ? reject(err) : resolveP(family === undefined ? address : { address, family }))) as never),
      );
    await expect(lookup('public.example', {})).resolves.toEqual({ address: '93.184.216.34', family: 4 });
    await expect(lookup('public.example', { family: 6 })).resolves.toEqual({ address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 });
    await expect(lookup('public.example', { all: true })).resolves.toHaveLength(2);
    await expect(lookup('mixed.example', { all: true })).rejects.toBeInstanceOf(UnsafeUrlError);
  });
});

describe('WEBHOOK_ALLOW_LOOPBACK', () => {
  it('defaults to false, parses booleans and is refused in production', () => {
    expect(loadConfig({}, []).webhookAllowLoopback).toBe(false);
    expect(loadConfig({ WEBHOOK_ALLOW_LOOPBACK: 'true' }, []).webhookAllowLoopback).toBe(true);
    expect(() => loadConfig({ WEBHOOK_ALLOW_LOOPBACK: 'maybe' }, [])).toThrow(ConfigError);
    expect(() => loadConfig({ WEBHOOK_ALLOW_LOOPBACK: 'true', NODE_ENV: 'production' }, [])).toThrow('WEBHOOK_ALLOW_LOOPBACK');
  });
});
