/** CRYPTO_* configuration: defaults for Base and Base Sepolia, overrides, and start-time errors naming the variable. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

const load = (env: Record<string, string>) => loadConfig({ NODE_ENV: 'test', ...env }, []).crypto;

describe('crypto configuration', () => {
  it('defaults to Base then Base Sepolia with their stablecoin contracts', () => {
    const crypto = load({});
    expect(crypto.chains.map((c) => [c.chainId, c.name, c.tokens.map((t) => `${t.symbol}:${t.address}`)])).toEqual([
      [8453, 'Base', ['USDC:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', 'USDT:0xfde4C96c8593536E31F229EA8f37b2ADa2699bb2']],
      [84532, 'Base Sepolia', ['USDC:0x036CbD53842c5426634e7929541eC2318f3dCF7e']],
    ]);
    expect(crypto.chains[0]).toMatchObject({ rpcUrl: 'https://mainnet.base.org', confirmations: 10, explorerUrl: 'https://basescan.org' });
    expect(crypto).toMatchObject({ latePaymentWindowSeconds: 86400, amountOffsetRange: 10000, matchToleranceBps: 1000, watcherLeaseSeconds: 30 });
  });

  it('keeps payment-link holds short and bounded: 15 min + 1 h, at most half the offset range by default', () => {
    expect(load({})).toMatchObject({ linkPaymentWindowSeconds: 900, linkLatePaymentWindowSeconds: 3600, linkHoldLimit: 5000 });
    expect(load({ CRYPTO_AMOUNT_OFFSET_RANGE: '3' }).linkHoldLimit).toBe(1);
    expect(load({ CRYPTO_AMOUNT_OFFSET_RANGE: '1' }).linkHoldLimit).toBe(1);
    expect(load({ CRYPTO_LINK_HOLD_LIMIT: '10000', CRYPTO_LINK_PAYMENT_WINDOW_SECONDS: '60', CRYPTO_LINK_LATE_PAYMENT_WINDOW_SECONDS: '0' })).toMatchObject({
      linkHoldLimit: 10000,
      linkPaymentWindowSeconds: 60,
      linkLatePaymentWindowSeconds: 0,
    });
    for (const [env, message] of [
      [{ CRYPTO_LINK_HOLD_LIMIT: '10001' }, /CRYPTO_LINK_HOLD_LIMIT must be an integer 1-10000/],
      [{ CRYPTO_LINK_HOLD_LIMIT: '0' }, /CRYPTO_LINK_HOLD_LIMIT/],
      [{ CRYPTO_LINK_PAYMENT_WINDOW_SECONDS: '59' }, /CRYPTO_LINK_PAYMENT_WINDOW_SECONDS must be an integer 60-86400/],
    ] as const) {
      expect(() => load(env)).toThrow(ConfigError);
      expect(() => load(env)).toThrow(message);
    }
  });

  it('takes the watcher lease from CRYPTO_WATCHER_LEASE_SECONDS, 10 s to an hour', () => {
    expect(load({ CRYPTO_WATCHER_LEASE_SECONDS: '10' }).watcherLeaseSeconds).toBe(10);
    expect(load({ CRYPTO_WATCHER_LEASE_SECONDS: '3600' }).watcherLeaseSeconds).toBe(3600);
    expect(load({ CRYPTO_WATCHER_LEASE_SECONDS: '' }).watcherLeaseSeconds).toBe(30);
  });

  it('lets a known chain override only some fields, and replaces the list', () => {
    const crypto = load({ CRYPTO_CHAINS: JSON.stringify([{ chainId: 84532, rpcUrl: 'https://node.example/sepolia', confirmations: 2 }]), CRYPTO_LATE_PAYMENT_WINDOW_SECONDS: '3600' });
    expect(crypto.chains).toHaveLength(1);
    expect(crypto.chains[0]).toMatchObject({ chainId: 84532, name: 'Base Sepolia', rpcUrl: 'https://node.example/sepolia', confirmations: 2, explorerUrl: 'https://sepolia.basescan.org' });
    expect(crypto.latePaymentWindowSeconds).toBe(3600);
    // Lowercase token addresses are checksummed.
    const local = load({ CRYPTO_CHAINS: JSON.stringify([{ chainId: 31337, name: 'Local', rpcUrl: 'http://127.0.0.1:8545', confirmations: 1, explorerUrl: 'http://x.test', blockRange: 10, initialLookback: 0, tokens: { USDC: '0x5fbdb2315678afecb367f032d93f642f64180aa3' } }]) });
    expect(local.chains[0]!.tokens[0]!.address).toBe('0x5FbDB2315678afecb367f032d93F642f64180aa3');
  });

  it.each([
    ['not JSON', { CRYPTO_CHAINS: '{oops' }, /CRYPTO_CHAINS must be JSON/],
    ['an unknown chain without its fields', { CRYPTO_CHAINS: JSON.stringify([{ chainId: 1 }]) }, /CRYPTO_CHAINS\[0\]\.rpcUrl/],
    ['an unknown field', { CRYPTO_CHAINS: JSON.stringify([{ chainId: 8453, rpc: 'x' }]) }, /unknown field "rpc"/],
    ['a token without 6 decimals', { CRYPTO_CHAINS: JSON.stringify([{ chainId: 8453, tokens: [{ symbol: 'USDC', address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', decimals: 18 }] }]) }, /decimals must be 6/],
    ['another token', { CRYPTO_CHAINS: JSON.stringify([{ chainId: 8453, tokens: { DAI: '0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb' } }]) }, /symbol must be USDC or USDT/],
    ['a duplicate chain', { CRYPTO_CHAINS: JSON.stringify([{ chainId: 8453 }, { chainId: 8453 }]) }, /chainId twice/],
    ['a non-http RPC', { CRYPTO_CHAINS: JSON.stringify([{ chainId: 8453, rpcUrl: 'ws://node' }]) }, /rpcUrl must be http/],
    ['a bad window', { CRYPTO_LATE_PAYMENT_WINDOW_SECONDS: '-1' }, /CRYPTO_LATE_PAYMENT_WINDOW_SECONDS/],
    ['a watcher lease under 10 s', { CRYPTO_WATCHER_LEASE_SECONDS: '9' }, /CRYPTO_WATCHER_LEASE_SECONDS must be an integer 10-3600, got "9"/],
    ['a watcher lease over an hour', { CRYPTO_WATCHER_LEASE_SECONDS: '3601' }, /CRYPTO_WATCHER_LEASE_SECONDS must be an integer 10-3600/],
    ['a watcher lease that is not an integer', { CRYPTO_WATCHER_LEASE_SECONDS: '30s' }, /CRYPTO_WATCHER_LEASE_SECONDS must be an integer/],
  ])('refuses %s at start', (_name, env, message) => {
    expect(() => load(env as Record<string, string>)).toThrow(ConfigError);
    expect(() => load(env as Record<string, string>)).toThrow(message);
  });
});
