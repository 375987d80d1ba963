/**
 * The relayer's nonces (src/crypto-payments/relayer.ts) on a local chain: concurrent submissions
 * of one relayer key, in one instance and in two instances with their own database pools (as two
 * `--role api` processes), on automine and on interval mining; and recovery: a transaction the
 * node lost is broadcast again with the same hash, one that cannot be gives its nonce to the next
 * submission, and a node that says "nonce too low" makes the submission take the next free one.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, http, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { openDatabase, type Database } from '../../src/db/knex.js';
import { ManualClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';
import { KnexRelayerNonceRepository } from '../../src/crypto-payments/relayer.repository.js';
import { RelayerNonces, nonceRefusal, viemRelayer, type RelayerNode } from '../../src/crypto-payments/relayer.js';
import type { ChainConfig } from '../../src/crypto-payments/crypto-config.js';
import { startLocalChain, type LocalChain } from '../crypto-payments/chain.js';
import { droppingProxy } from './dropping-proxy.js';
import { freshDatabase, type TestDatabase } from '../harness/database.js';

const ROUNDS = Number(process.env.KASSA_RELAYER_ROUNDS ?? 6);
/** Generous: a loaded machine (the suite's two workers, other jobs) makes each round several times slower. */
const ROUNDS_TIMEOUT = 60_000 + ROUNDS * 30_000;

let chain: LocalChain;
let testDb: TestDatabase;
let chainConfig: ChainConfig;
const clock = new ManualClock();
const logger = createLogger({ level: 'silent' });
const sink = '0x000000000000000000000000000000000000dEaD' as const;

const nonces = (db = testDb.database.db) => new RelayerNonces(new KnexRelayerNonceRepository(db), clock, logger);

async function fundedKey(): Promise<Hex> {
  const key = generatePrivateKey();
  await chain.rpc('hardhat_setBalance', [privateKeyToAccount(key).address, '0x56BC75E2D63100000']);
  return key;
}

const pub = () => createPublicClient({ transport: http(chain.url, { retryCount: 0 }) });
const receiptOf = (hash: Hex) => pub().waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });

/** `n` submissions at once through `relayers` (round robin): their hashes, all mined successfully with distinct nonces. */
async function submitConcurrently(relayers: Array<ReturnType<typeof viemRelayer>>, key: Hex, n: number): Promise<Hex[]> {
  const results = await Promise.allSettled(Array.from({ length: n }, (_, i) => relayers[i % relayers.length]!.submit(key, sink, '0x')));
  const refused = results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason).split('\n')[0]);
  expect(refused, `${refused.length} of ${n} submissions refused`).toEqual([]);
  const hashes = results.map((r) => (r as PromiseFulfilledResult<Hex>).value);
  const receipts = await Promise.all(hashes.map(receiptOf));
  expect(receipts.map((r) => r.status)).toEqual(Array(n).fill('success'));
  const txs = await Promise.all(hashes.map((hash) => pub().getTransaction({ hash })));
  expect(new Set(txs.map((t) => t.nonce)).size).toBe(n);
  return hashes;
}

beforeAll(async () => {
  [chain, testDb] = await Promise.all([startLocalChain(), freshDatabase()]);
  chainConfig = { chainId: chain.chainId, name: 'Hardhat', rpcUrl: chain.url, confirmations: 1, explorerUrl: 'https://explorer.test', blockRange: 100, initialLookback: 100, tokens: [] } as unknown as ChainConfig;
}, 300_000);

afterAll(async () => {
  await testDb?.drop();
  await chain?.close();
});

afterEach(async () => {
  await chain.rpc('evm_setIntervalMining', [0]);
  await chain.rpc('evm_setAutomine', [true]);
});

describe('concurrent submissions of one relayer key', () => {
  it('8 at once, automine, one instance: every one mined, each with its own nonce', async () => {
    const key = await fundedKey();
    const relayer = viemRelayer(chainConfig, nonces());
    for (let round = 0; round < ROUNDS; round++) await submitConcurrently([relayer], key, 8);
  }, ROUNDS_TIMEOUT);

  it('8 at once, interval mining (several per block), one instance', async () => {
    const key = await fundedKey();
    await chain.rpc('evm_setAutomine', [false]);
    await chain.rpc('evm_setIntervalMining', [500]);
    const relayer = viemRelayer(chainConfig, nonces());
    for (let round = 0; round < ROUNDS; round++) await submitConcurrently([relayer], key, 8);
  }, ROUNDS_TIMEOUT);

  describe.skipIf(!process.env.TEST_DATABASE_URL)('two instances with their own database pools (as two API processes), PostgreSQL', () => {
    let second: Database;
    beforeAll(async () => {
      second = await openDatabase({ databaseUrl: testDb.url!, poolMax: 4 });
    });
    afterAll(async () => {
      await second?.close();
    });

    it('8 at once over both, automine and interval mining', async () => {
      const key = await fundedKey();
      const relayers = [viemRelayer(chainConfig, nonces()), viemRelayer(chainConfig, nonces(second.db))];
      for (let round = 0; round < ROUNDS; round++) await submitConcurrently(relayers, key, 8);
      await chain.rpc('evm_setAutomine', [false]);
      await chain.rpc('evm_setIntervalMining', [500]);
      for (let round = 0; round < ROUNDS; round++) await submitConcurrently(relayers, key, 8);
    }, 2 * ROUNDS_TIMEOUT);
  });
});

describe('recovery', () => {
  it('a transaction the node lost is broadcast again by the next submission, with the same hash', async () => {
    const key = await fundedKey();
    const relayer = viemRelayer(chainConfig, nonces());
    await chain.rpc('evm_setAutomine', [false]);
    const lost = await relayer.submit(key, sink, '0x');
    expect(await chain.rpc('hardhat_dropTransaction', [lost])).toBe(true);
    expect(await relayer.node.known(lost)).toBe(false);
    const next = await relayer.submit(key, sink, '0x');
    expect(await relayer.node.known(lost)).toBe(true);
    await chain.mine();
    const [a, b] = await Promise.all([receiptOf(lost), receiptOf(next)]);
    expect([a.status, b.status]).toEqual(['success', 'success']);
    const [ta, tb] = await Promise.all([pub().getTransaction({ hash: lost }), pub().getTransaction({ hash: next })]);
    expect(tb.nonce).toBe(ta.nonce + 1);
  });

  it('one that cannot be broadcast again gives its nonce to the next submission (a re-sync); nothing waits behind a gap', async () => {
    const key = await fundedKey();
    let refuseRebroadcast: Hex | undefined;
    const base = viemRelayer(chainConfig, nonces());
    const node: RelayerNode = {
      ...base.node,
      sendRaw: async (raw) => {
        if (raw === refuseRebroadcast) throw new Error('max fee per gas less than block base fee');
        return base.node.sendRaw(raw);
      },
    };
    const relayer = nonces();
    const account = privateKeyToAccount(key);
    const sign = (value: bigint) => async (nonce: number) =>
      account.signTransaction({ chainId: chain.chainId, type: 'eip1559', to: sink, value, nonce, gas: 21_000n, maxFeePerGas: 100_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n });
    await chain.rpc('evm_setAutomine', [false]);
    const lost = await relayer.send(chain.chainId, account.address, node, sign(1n));
    refuseRebroadcast = (await sign(1n)((await pub().getTransaction({ hash: lost })).nonce)) as Hex;
    expect(await chain.rpc('hardhat_dropTransaction', [lost])).toBe(true);
    const next = await relayer.send(chain.chainId, account.address, node, sign(2n));
    await chain.mine();
    expect((await receiptOf(next)).status).toBe('success');
    expect(await base.node.known(lost)).toBe(false);
    const mined = await pub().getTransaction({ hash: next });
    expect(mined.nonce).toBe(0);
    // The following one continues after it.
    await chain.rpc('evm_setAutomine', [true]);
    const after = await relayer.send(chain.chainId, account.address, node, sign(3n));
    expect((await pub().getTransaction({ hash: after })).nonce).toBe(1);
  });

  it('a node that says the nonce is used (another sender of the key, a node behind another) gets the next free nonce', async () => {
    const key = await fundedKey();
    const account = privateKeyToAccount(key);
    const base = viemRelayer(chainConfig, nonces());
    // Someone else sends with the relayer key between Kassa's count and its broadcast.
    let interfere = true;
    const node: RelayerNode = {
      ...base.node,
      sendRaw: async (raw) => {
        if (interfere) {
          interfere = false;
          const nonce = await pub().getTransactionCount({ address: account.address, blockTag: 'pending' });
          await base.node.sendRaw(await account.signTransaction({ chainId: chain.chainId, type: 'eip1559', to: sink, value: 5n, nonce, gas: 21_000n, maxFeePerGas: 100_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n }));
        }
        return base.node.sendRaw(raw);
      },
    };
    const hash = await nonces().send(chain.chainId, account.address, node, (nonce) =>
      account.signTransaction({ chainId: chain.chainId, type: 'eip1559', to: sink, value: 1n, nonce, gas: 21_000n, maxFeePerGas: 100_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n }),
    );
    expect((await receiptOf(hash)).status).toBe('success');
    expect((await pub().getTransaction({ hash })).nonce).toBe(1);
  });

  // The money bug: the node takes the transaction, then the connection drops before its answer.
  // The submission used to count it as not sent: viem's retry of the same bytes met "nonce too low"
  // (its own transaction, mined), the relayer took the next nonce and sent the transfer again (an
  // x402 claim then saw that copy revert and was FAILED while the first transfer was mined), or,
  // without a retry, the error failed the claim. The relayer now asks the node for these very
  // bytes' transaction before it decides that a broadcast failed.
  it('a broadcast whose answer is lost (connection dropped after the node took it) is the transaction sent: its hash, no second transaction', async () => {
    const key = await fundedKey();
    const account = privateKeyToAccount(key);
    const proxy = await droppingProxy(() => chain.url);
    try {
      const relayer = viemRelayer({ ...chainConfig, rpcUrl: proxy.url }, nonces());
      const hash = await relayer.submit(key, sink, '0x');
      expect(proxy.dropped).toBe(1);
      expect((await receiptOf(hash)).status).toBe('success');
      expect((await pub().getTransaction({ hash })).nonce).toBe(0);
      // One transaction of the relayer, not a second copy.
      expect(await pub().getTransactionCount({ address: account.address, blockTag: 'latest' })).toBe(1);
    } finally {
      await proxy.close();
    }
  });

  it('a transport error after the node took the bytes (no retry) is the transaction sent, not a failure; a refusal with nothing sent still fails', async () => {
    const key = await fundedKey();
    const account = privateKeyToAccount(key);
    const base = viemRelayer(chainConfig, nonces());
    let mode: 'lose-answer' | 'refuse' = 'lose-answer';
    const node: RelayerNode = {
      ...base.node,
      sendRaw: async (raw) => {
        if (mode === 'refuse') throw new Error('socket hang up');
        await base.node.sendRaw(raw);
        throw Object.assign(new TypeError('fetch failed'), { cause: new Error('other side closed') });
      },
    };
    const sign = (value: bigint) => (nonce: number) =>
      account.signTransaction({ chainId: chain.chainId, type: 'eip1559', to: sink, value, nonce, gas: 21_000n, maxFeePerGas: 100_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n });
    const hash = await nonces().send(chain.chainId, account.address, node, sign(1n));
    expect((await receiptOf(hash)).status).toBe('success');
    mode = 'refuse';
    await expect(nonces().send(chain.chainId, account.address, node, sign(2n))).rejects.toThrow('socket hang up');
    expect(await pub().getTransactionCount({ address: account.address, blockTag: 'latest' })).toBe(1);
  });

  it('reads the refusals of Hardhat and geth', () => {
    expect(nonceRefusal(new Error('Nonce too low. Expected nonce to be 5 but got 4.'))).toBe('used');
    expect(nonceRefusal({ name: 'NonceTooLowError', message: 'x', cause: { details: 'nonce too low' } })).toBe('used');
    expect(nonceRefusal(new Error('replacement transaction underpriced'))).toBe('used');
    expect(nonceRefusal({ message: 'RPC error', cause: { details: 'already known' } })).toBe('known');
    expect(nonceRefusal(new Error('Known transaction: 0xabc'))).toBe('known');
    expect(nonceRefusal(new Error("Nonce too high. Expected nonce to be 1 but got 3. Note that transactions can't be queued when automining."))).toBe('ahead');
    expect(nonceRefusal(new Error('insufficient funds for gas * price + value'))).toBeUndefined();
  });
});
