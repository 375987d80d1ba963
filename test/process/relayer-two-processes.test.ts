/**
 * Two `--role api` processes (real child processes of `src/main.ts`) on one PostgreSQL share one
 * x402 relayer key (issue 27, item 3): concurrent settles spread over both processes must each get
 * a nonce of their own, on automine and on interval mining. Before the relayer's nonces were
 * allocated under the database row lock, most of them failed (`invalid_exact_evm_transaction_failed`).
 * Rounds: KASSA_RELAYER_ROUNDS (default 6 per mining mode). Runs only with TEST_DATABASE_URL.
 * The processes start on a copy of the run's migrated database: two starts migrating an empty one
 * under CI's load took longer than the 90 s readiness wait (the first start is scale-out's subject).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createPublicClient, createWalletClient, getAddress, http as viemHttp, type Abi } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
import { migratedDatabase } from '../harness/migrated-data-dir.js';
import { REPO_ROOT, http, newDeployment, provisionMerchant, setReceivingWallet, startKassa, type KassaProcess, type ThrowAwayDatabase } from '../../tools/cluster.js';
import { cryptoChainsEnv, startLocalChain, USDC, type LocalChain } from '../crypto-payments/chain.js';
import { fundedPayers, signedPayment, type PaymentTerms } from '../x402/payers.js';

const serverUrl = process.env.TEST_DATABASE_URL;
const ROUNDS = Number(process.env.KASSA_RELAYER_ROUNDS ?? 6);
const PAYERS = 8;
/** Generous: a loaded machine makes each round several times slower. */
const ROUNDS_TIMEOUT = 60_000 + ROUNDS * 40_000;
const TOKEN_ARTIFACT = JSON.parse(readFileSync(path.join(REPO_ROOT, 'test/x402/fixtures/Eip3009Token.json'), 'utf8')) as { abi: Abi; bytecode: `0x${string}` };

describe.skipIf(!serverUrl)(skippedUnless('two API processes sharing one x402 relayer on one PostgreSQL', 'postgresOnly'), () => {
  let db: ThrowAwayDatabase;
  let chain: LocalChain;
  let apis: KassaProcess[] = [];
  let merchant: { orgId: string; apiKey: string };
  let terms: PaymentTerms;
  let payers: PrivateKeyAccount[];
  let balanceOf: (owner: `0x${string}`) => Promise<bigint>;

  beforeAll(async () => {
    [db, chain] = await Promise.all([migratedDatabase(serverUrl!, 'kassa_relayer'), startLocalChain({ initialDate: new Date().toISOString() })]);
    const transport = viemHttp(chain.url, { retryCount: 0 });
    const chainDef = { id: chain.chainId, name: 'hardhat', nativeCurrency: { name: 'ETH', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [chain.url] } } };
    const pub = createPublicClient({ transport, chain: chainDef });
    const deployer = createWalletClient({ account: chain.accounts[0]!, transport, chain: chainDef });
    const hash = await deployer.deployContract({ abi: TOKEN_ARTIFACT.abi, bytecode: TOKEN_ARTIFACT.bytecode, args: ['USD Coin', 'USDC'] } as never);
    const token = getAddress((await pub.waitForTransactionReceipt({ hash, pollingInterval: 20 })).contractAddress!);
    balanceOf = async (owner) => (await pub.readContract({ address: token, abi: TOKEN_ARTIFACT.abi, functionName: 'balanceOf', args: [owner] })) as bigint;

    const deployment = newDeployment(db.url, {
      MERCHANT_RATE_LIMIT_PER_MINUTE: '0',
      LOG_LEVEL: 'warn',
      CRYPTO_CHAINS: cryptoChainsEnv(chain, token, { confirmations: 1, blockRange: 100 }),
    });
    apis = await Promise.all([startKassa(deployment, { role: 'api', name: 'api-1' }), startKassa(deployment, { role: 'api', name: 'api-2' })]);
    merchant = await provisionMerchant(apis[0]!.adminUrl, deployment.adminToken, 'Relayer merchant');
    const payTo = chain.accounts[2]!;
    await setReceivingWallet(apis[1]!.adminUrl, deployment.adminToken, merchant.orgId, chain.chainId, payTo);
    const relayer = await http('POST', `${apis[0]!.adminUrl}/v1/x402/relayer`, { headers: { Authorization: `Bearer ${deployment.adminToken}` } });
    expect(relayer.status, relayer.text).toBe(201);
    await chain.rpc('hardhat_setBalance', [relayer.json.data.address, '0x56BC75E2D63100000']);
    terms = { chainId: chain.chainId, network: `eip155:${chain.chainId}`, token, payTo, amount: 10_000n };
    payers = await fundedPayers({ rpcUrl: chain.url, chainId: chain.chainId, token, abi: TOKEN_ARTIFACT.abi, minter: chain.accounts[0]!, count: PAYERS, units: USDC(100) });
  }, 300_000);

  afterAll(async () => {
    await Promise.all(apis.map((p) => p.stop()));
    await chain?.close();
    await db?.drop();
  });

  /** ROUNDS rounds of PAYERS settles at once, alternating between the two processes; the failures. */
  async function settleRounds(): Promise<string[]> {
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const validBefore = BigInt(Math.floor(Date.now() / 1000) + 3600);
      const outcomes = await Promise.all(
        payers.map(async (payer, i) => {
          const res = await http('POST', `${apis[i % 2]!.merchantUrl}/v1/x402/settle`, {
            headers: { 'X-API-Key': merchant.apiKey },
            body: await signedPayment(payer, terms, validBefore),
            timeoutMs: 60_000,
          });
          return res.status === 200 && res.json.success ? 'ok' : `${res.status} ${res.json?.errorReason ?? res.text.slice(0, 200)}`;
        }),
      );
      failures.push(...outcomes.filter((o) => o !== 'ok'));
    }
    return failures;
  }

  async function expectAllSettled() {
    const before = await balanceOf(terms.payTo);
    const failures = await settleRounds();
    expect(failures, `${failures.length} of ${PAYERS * ROUNDS} settles failed: ${[...new Set(failures)].join(', ')}`).toEqual([]);
    expect(await balanceOf(terms.payTo)).toBe(before + terms.amount * BigInt(PAYERS * ROUNDS));
  }

  it('8 concurrent settles over both processes all succeed, automine', async () => {
    await expectAllSettled();
  }, ROUNDS_TIMEOUT);

  it('8 concurrent settles over both processes all succeed, interval mining (a block a second)', async () => {
    await chain.rpc('evm_setAutomine', [false]);
    await chain.rpc('evm_setIntervalMining', [1000]);
    try {
      await expectAllSettled();
    } finally {
      await chain.rpc('evm_setIntervalMining', [0]);
      await chain.rpc('evm_setAutomine', [true]);
    }
  }, ROUNDS_TIMEOUT);
});
