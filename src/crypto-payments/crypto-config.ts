/**
 * Crypto checkout configuration: the EVM chains Kassa watches and the stablecoins it accepts on
 * each. Parsed by src/config.ts (the only reader of process.env) from CRYPTO_* variables.
 */
import { getAddress, isAddress } from 'viem';

export type StablecoinSymbol = 'USDC' | 'USDT';

export interface TokenConfig {
  symbol: StablecoinSymbol;
  /** EIP-55 contract address. */
  address: `0x${string}`;
  /** Always 6: the API's amounts are in units where one token = 1000000 (spec). */
  decimals: 6;
}

export interface ChainConfig {
  chainId: number;
  name: string;
  rpcUrl: string;
  /** Blocks on top of (and including) the transfer's block before the order is PAID. */
  confirmations: number;
  /** Block explorer base URL; a transaction is `${explorerUrl}/tx/${hash}`. */
  explorerUrl: string;
  /** Most blocks one `eth_getLogs` call covers (public RPCs cap the range). */
  blockRange: number;
  /** Where a never-watched chain starts: this many blocks behind the head at the first pass. */
  initialLookback: number;
  tokens: TokenConfig[];
}

export interface CryptoConfig {
  /** In order of preference: a session uses the first chain with the org's wallet and the token. */
  chains: ChainConfig[];
  /** How long after `expiresAt` a session's quoted amount stays reserved (late payments still match). */
  latePaymentWindowSeconds: number;
  /** Distinct amount offsets (in token units, added to the price) available per price and wallet. */
  amountOffsetRange: number;
  /**
   * Sessions opened anonymously from a payment link: the buyer has this long after the e-mail step
   * (when the amount is issued) to pay; the session's `expiresAt` is brought forward to it.
   */
  linkPaymentWindowSeconds: number;
  /** Their late-payment window (instead of `latePaymentWindowSeconds`): anonymous holds stay short. */
  linkLatePaymentWindowSeconds: number;
  /**
   * Exact amounts that payment-link sessions may hold at once per price, token and wallet; the
   * rest of `amountOffsetRange` stays for sessions the merchant creates through the API.
   */
  linkHoldLimit: number;
  /** A non-exact transfer within this many basis points of exactly one open quote is attributed to it (under/overpayment). */
  matchToleranceBps: number;
  /** Tolerated difference between block timestamps and the server clock. */
  clockSkewSeconds: number;
  /** Pause between two watcher passes when nothing was found. */
  pollIntervalMs: number;
  /**
   * How long a watcher's lease on a chain's cursor lasts without renewal. A pass renews it as it
   * goes, so this bounds how long a crashed worker keeps its chains from the others, not how long
   * a pass may take.
   */
  watcherLeaseSeconds: number;
}

export const DEFAULT_CRYPTO_CHAINS: readonly ChainConfig[] = [
  {
    chainId: 8453,
    name: 'Base',
    rpcUrl: 'https://mainnet.base.org',
    confirmations: 10,
    explorerUrl: 'https://basescan.org',
    blockRange: 1000,
    initialLookback: 600,
    tokens: [
      { symbol: 'USDC', address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', decimals: 6 },
      { symbol: 'USDT', address: '0xfde4C96c8593536E31F229EA8f37b2ADa2699bb2', decimals: 6 },
    ],
  },
  {
    chainId: 84532,
    name: 'Base Sepolia',
    rpcUrl: 'https://sepolia.base.org',
    confirmations: 5,
    explorerUrl: 'https://sepolia.basescan.org',
    blockRange: 1000,
    initialLookback: 600,
    tokens: [{ symbol: 'USDC', address: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', decimals: 6 }],
  },
];

export class CryptoConfigError extends Error {}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new CryptoConfigError(`${name} must be an integer ${min}-${max}, got "${raw}"`);
  return value;
}

const CHAIN_KEYS = new Set(['chainId', 'name', 'rpcUrl', 'confirmations', 'explorerUrl', 'blockRange', 'initialLookback', 'tokens']);

function chainEntry(raw: unknown, index: number): ChainConfig {
  const where = `CRYPTO_CHAINS[${index}]`;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new CryptoConfigError(`${where} must be an object`);
  const entry = raw as Record<string, unknown>;
  for (const key of Object.keys(entry)) if (!CHAIN_KEYS.has(key)) throw new CryptoConfigError(`${where} has an unknown field "${key}"`);
  const chainId = entry.chainId;
  if (typeof chainId !== 'number' || !Number.isSafeInteger(chainId) || chainId < 1) throw new CryptoConfigError(`${where}.chainId must be a positive integer`);
  // Known chains inherit their defaults: {"chainId": 8453, "rpcUrl": "https://my-node"} is enough.
  const base = DEFAULT_CRYPTO_CHAINS.find((c) => c.chainId === chainId);
  const pick = <T>(key: keyof ChainConfig, check: (v: unknown) => v is T, what: string): T => {
    const value = entry[key] ?? base?.[key];
    if (!check(value)) throw new CryptoConfigError(`${where}.${key} must be ${what}`);
    return value;
  };
  const isString = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
  const isCount = (min: number) => (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= min;
  const rpcUrl = pick('rpcUrl', isString, 'an http(s) URL');
  const explorerUrl = pick('explorerUrl', isString, 'an http(s) URL');
  for (const [key, value] of [['rpcUrl', rpcUrl], ['explorerUrl', explorerUrl]] as const) {
    // An RPC URL is not quoted back: providers put their API key in its path or query.
    const shown = key === 'rpcUrl' ? '' : `, got "${value}"`;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new CryptoConfigError(`${where}.${key} must be an absolute URL${shown}`);
    }
    if (!['http:', 'https:'].includes(url.protocol)) throw new CryptoConfigError(`${where}.${key} must be http(s)${shown || `, got ${url.protocol}`}`);
  }
  const tokensRaw = entry.tokens ?? base?.tokens;
  if (!Array.isArray(tokensRaw) && (typeof tokensRaw !== 'object' || tokensRaw === null)) {
    throw new CryptoConfigError(`${where}.tokens must be an array of {symbol, address, decimals} or an object {"USDC": "0x…"}`);
  }
  const list = Array.isArray(tokensRaw)
    ? (tokensRaw as unknown[])
    : Object.entries(tokensRaw as Record<string, unknown>).map(([symbol, address]) => ({ symbol, address, decimals: 6 }));
  const tokens: TokenConfig[] = list.map((t, i) => {
    const token = t as { symbol?: unknown; address?: unknown; decimals?: unknown };
    if (token.symbol !== 'USDC' && token.symbol !== 'USDT') throw new CryptoConfigError(`${where}.tokens[${i}].symbol must be USDC or USDT`);
    if (typeof token.address !== 'string' || !isAddress(token.address, { strict: false })) throw new CryptoConfigError(`${where}.tokens[${i}].address must be an EVM address`);
    if ((token.decimals ?? 6) !== 6) throw new CryptoConfigError(`${where}.tokens[${i}].decimals must be 6 (amounts are in millionths of a token)`);
    return { symbol: token.symbol, address: getAddress(token.address), decimals: 6 };
  });
  if (new Set(tokens.map((t) => t.symbol)).size !== tokens.length) throw new CryptoConfigError(`${where}.tokens lists a symbol twice`);
  return {
    chainId,
    name: pick('name', isString, 'a non-empty string'),
    rpcUrl,
    confirmations: pick('confirmations', isCount(1), 'an integer ≥ 1'),
    explorerUrl: explorerUrl.replace(/\/+$/, ''),
    blockRange: pick('blockRange', isCount(1), 'an integer ≥ 1'),
    initialLookback: pick('initialLookback', isCount(0), 'an integer ≥ 0'),
    tokens,
  };
}

/**
 * CRYPTO_CHAINS (JSON array) replaces the default chain list (Base, Base Sepolia); entries for
 * those two chain ids only need the fields they change. `[]` disables crypto checkout.
 */
export function parseCryptoConfig(env: Env): CryptoConfig {
  let chains: ChainConfig[] = DEFAULT_CRYPTO_CHAINS.map((c) => ({ ...c, tokens: [...c.tokens] }));
  const raw = env.CRYPTO_CHAINS;
  if (raw !== undefined && raw !== '') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      throw new CryptoConfigError('CRYPTO_CHAINS must be JSON: [{"chainId": 8453, "rpcUrl": "https://…"}, …]');
    }
    if (!Array.isArray(parsed)) throw new CryptoConfigError('CRYPTO_CHAINS must be a JSON array of chains');
    chains = parsed.map(chainEntry);
    if (new Set(chains.map((c) => c.chainId)).size !== chains.length) throw new CryptoConfigError('CRYPTO_CHAINS lists a chainId twice');
  }
  const amountOffsetRange = int(env, 'CRYPTO_AMOUNT_OFFSET_RANGE', 10_000, 1, 1_000_000);
  return {
    chains,
    latePaymentWindowSeconds: int(env, 'CRYPTO_LATE_PAYMENT_WINDOW_SECONDS', 86_400, 0, 30 * 86_400),
    amountOffsetRange,
    linkPaymentWindowSeconds: int(env, 'CRYPTO_LINK_PAYMENT_WINDOW_SECONDS', 900, 60, 86_400),
    linkLatePaymentWindowSeconds: int(env, 'CRYPTO_LINK_LATE_PAYMENT_WINDOW_SECONDS', 3_600, 0, 30 * 86_400),
    linkHoldLimit: int(env, 'CRYPTO_LINK_HOLD_LIMIT', Math.max(1, Math.floor(amountOffsetRange / 2)), 1, amountOffsetRange),
    matchToleranceBps: int(env, 'CRYPTO_MATCH_TOLERANCE_BPS', 1_000, 0, 5_000),
    clockSkewSeconds: int(env, 'CRYPTO_CLOCK_SKEW_SECONDS', 600, 0, 86_400),
    pollIntervalMs: int(env, 'CRYPTO_POLL_INTERVAL_MS', 4_000, 100, 3_600_000),
    // A running pass renews its lease on a timer (every third), so the length only bounds how long
    // a crashed worker keeps its chains from the others; below 10 s a slow database round trip
    // during a renewal could let it lapse under a live pass.
    watcherLeaseSeconds: int(env, 'CRYPTO_WATCHER_LEASE_SECONDS', 30, 10, 3_600),
  };
}
