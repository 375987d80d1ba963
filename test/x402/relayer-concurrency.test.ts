/**
 * Concurrent x402 payments share one relayer (issue 27, item 3): N payers whose settlements are
 * in flight at once must all succeed, whether the chain mines one block per transaction
 * (automine) or on an interval (Hardhat `evm_setIntervalMining`, as a real chain does). Before
 * the relayer allocated its nonces, two submissions read the same pending nonce and all but one
 * were refused (`invalid_exact_evm_transaction_failed`). Payments go both through Kassa's own
 * paywall URL (PAYMENT-SIGNATURE) and through the facilitator API (`POST /v1/x402/settle`).
 * Rounds: KASSA_RELAYER_ROUNDS (default 6 per case). Runs on PGlite and on PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodePaymentSignatureHeader } from '@x402/core/http';
import type { PrivateKeyAccount } from 'viem/accounts';
import { createPrice, createProduct } from '../catalog/fixtures.js';
import { fundedPayers, signedPayment, type PaymentTerms } from './payers.js';
import { startX402World, TOKEN_ARTIFACT, USDC, type X402World } from './harness.js';

const ROUNDS = Number(process.env.KASSA_RELAYER_ROUNDS ?? 6);
const PRICE_UNITS = 10_000n;
/** Generous: a loaded machine (the suite's two workers, other jobs) makes each round several times slower. */
const ROUNDS_TIMEOUT = 60_000 + ROUNDS * 40_000;

let world: X402World;
let payers: PrivateKeyAccount[];
let terms: PaymentTerms;
let pricingId: string;

const validBefore = () => BigInt(Math.floor(world.ctx.clock.now().getTime() / 1000) + 86_400);

/** One payment through Kassa's paywall URL: the outcome as a short string ('ok' or why not). */
async function payPaywall(payer: PrivateKeyAccount): Promise<string> {
  const { paymentPayload } = await signedPayment(payer, terms, validBefore());
  const res = await fetch(`${world.merchantUrl}/x402/prices/${pricingId}`, {
    headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader({ ...paymentPayload, resource: { url: `${world.merchantUrl}/x402/prices/${pricingId}`, description: '', mimeType: '' } } as never) },
  });
  if (res.status === 200) return 'ok';
  return `${res.status} ${JSON.parse(await res.text()).error ?? ''}`;
}

/** One payment through the facilitator API, as a merchant's @x402/express settles it. */
async function settleViaApi(payer: PrivateKeyAccount): Promise<string> {
  const request = await signedPayment(payer, terms, validBefore());
  const res = await fetch(`${world.merchantUrl}/v1/x402/settle`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': world.ctx.orgA.apiKey },
    body: JSON.stringify(request),
  });
  const body = (await res.json()) as { success?: boolean; errorReason?: string };
  return res.status === 200 && body.success ? 'ok' : `${res.status} ${body.errorReason ?? ''}`;
}

/** `rounds` rounds of `n` concurrent payments; every outcome that was not a success. */
async function rounds(n: number, pay: (payer: PrivateKeyAccount) => Promise<string>): Promise<{ failedRounds: number; failures: string[] }> {
  const failures: string[] = [];
  let failedRounds = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const outcomes = await Promise.all(payers.slice(0, n).map((payer) => pay(payer)));
    const failed = outcomes.filter((o) => o !== 'ok');
    if (failed.length) failedRounds++;
    failures.push(...failed);
  }
  return { failedRounds, failures };
}

async function expectAllPaid(n: number, pay: (payer: PrivateKeyAccount) => Promise<string>) {
  const before = await world.balanceOf(world.payTo);
  const { failedRounds, failures } = await rounds(n, pay);
  const summary = `${failures.length} of ${n * ROUNDS} payments failed in ${failedRounds} of ${ROUNDS} rounds: ${[...new Set(failures)].join(', ')}`;
  expect(failures, summary).toEqual([]);
  expect(await world.balanceOf(world.payTo)).toBe(before + PRICE_UNITS * BigInt(n * ROUNDS));
}

beforeAll(async () => {
  world = await startX402World();
  const product = await createProduct(world.ctx, world.ctx.orgA.orgId, { name: 'Tick' });
  pricingId = (await createPrice(world.ctx, product.productId, { amount: Number(PRICE_UNITS), currency: 'USDC', provider: 'CRYPTO' })).pricingId;
  expect((await world.ctx.merchant.put(`/v1/x402/paywalls/${pricingId}`).set('X-API-Key', world.ctx.orgA.apiKey).send({})).status).toBe(200);
  terms = { chainId: world.chain.chainId, network: world.network, token: world.token, payTo: world.payTo, amount: PRICE_UNITS };
  payers = await fundedPayers({ rpcUrl: world.chain.url, chainId: world.chain.chainId, token: world.token, abi: TOKEN_ARTIFACT.abi, minter: world.chain.accounts[0]!, count: 8, units: USDC(100) });
}, 300_000);

afterAll(async () => {
  await world?.close();
});

describe('concurrent x402 payments share one relayer', () => {
  describe('automine (one block per transaction)', () => {
    it('4 concurrent paywall payments all succeed, round after round', async () => {
      await expectAllPaid(4, payPaywall);
    }, ROUNDS_TIMEOUT);

    it('8 concurrent settles through the facilitator API all succeed', async () => {
      await expectAllPaid(8, settleViaApi);
    }, ROUNDS_TIMEOUT);
  });

  describe('interval mining (a block every second, several transactions per block)', () => {
    beforeAll(async () => {
      await world.chain.rpc('evm_setAutomine', [false]);
      await world.chain.rpc('evm_setIntervalMining', [1000]);
    });
    afterAll(async () => {
      await world.chain.rpc('evm_setIntervalMining', [0]);
      await world.chain.rpc('evm_setAutomine', [true]);
    });

    it('4 concurrent paywall payments all succeed', async () => {
      await expectAllPaid(4, payPaywall);
    }, ROUNDS_TIMEOUT);

    it('8 concurrent settles through the facilitator API all succeed', async () => {
      await expectAllPaid(8, settleViaApi);
    }, ROUNDS_TIMEOUT);
  });

  describe('a transaction the node lost', () => {
    beforeAll(async () => {
      await world.chain.rpc('evm_setAutomine', [false]);
    });
    afterAll(async () => {
      await world.chain.rpc('evm_setAutomine', [true]);
    });

    const submitted = async (n: number) => {
      for (let i = 0; i < 400; i++) {
        const rows = (await world.ctx.testDb.database.db('x402_settlements').where({ status: 'SUBMITTED' }).whereNotNull('tx_hash').orderBy('updated_at')) as Array<{ tx_hash: `0x${string}` }>;
        if (rows.length >= n) return rows.map((r) => r.tx_hash);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`fewer than ${n} settlements were submitted`);
    };

    it('its settle still succeeds: the next settle broadcasts it again (same hash), both are mined', async () => {
      const first = settleViaApi(payers[0]!);
      const [lost] = await submitted(1);
      expect(await world.chain.rpc('hardhat_dropTransaction', [lost])).toBe(true);
      const second = settleViaApi(payers[1]!);
      const hashes = await submitted(2);
      expect(hashes).toContain(lost);
      await world.chain.mine();
      expect(await Promise.all([first, second])).toEqual(['ok', 'ok']);
      const settled = (await world.ctx.testDb.database.db('x402_settlements').whereIn('tx_hash', hashes)) as Array<{ status: string }>;
      expect(settled.map((s) => s.status)).toEqual(['SETTLED', 'SETTLED']);
    }, 60_000);
  });
});
