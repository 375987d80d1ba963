/**
 * The finisher job: x402 settlements whose settle died after submitting the transaction (left
 * SUBMITTED) are finished from the chain by the worker, on a local chain. The crash is injected
 * by making the facilitator's chain access fail after the submission (the transaction is sent,
 * nothing is recorded), as a process dying at that point would leave it.
 */
import { randomBytes } from 'node:crypto';
import { createPublicClient, http, serializeTransaction, type Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { x402Client } from '@x402/fetch';
import { createAgentX402Signer, recordPaymentContext, type AgentX402Signer } from '../../src/client/x402.js';
import { createLogger } from '../../src/kernel/logger.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { KnexCryptoRepository } from '../../src/crypto-payments/crypto.repository.js';
import { X402FacilitatorService, type X402Chain, type X402FacilitatorRequest } from '../../src/crypto-payments/x402-facilitator.service.js';
import { KnexX402Repository } from '../../src/crypto-payments/x402.repository.js';
import { workerJobs } from '../../src/jobs.js';
import { createPrice, createProduct } from '../catalog/fixtures.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { startX402World, USDC, type X402World } from './harness.js';

let world: X402World;
let signer: AgentX402Signer;
let pricingId: string;
let chainAccess: X402Chain;

const facilitator = () => world.ctx.services.modules.cryptoPayments.x402;
const db = () => world.ctx.testDb.database.db;
const settlementOf = async (txHashOrNonce: string) =>
  (await db()('x402_settlements').where({ tx_hash: txHashOrNonce }).orWhere({ nonce: txHashOrNonce }).first()) as { id: string; status: string; tx_hash: string | null; order_id: string | null; error_reason: string | null };
const ordersWithTx = async (txHash: string) => (await db()('orders').where({ tx_hash: txHash })) as Array<{ id: string; status: string }>;
const eventsOf = async (orderId: string, type: string) =>
  (await db()('webhook_events').where({ type })).filter((e: { payload: unknown }) => JSON.stringify(e.payload).includes(orderId)).length;
const paidEventsOf = (orderId: string) => eventsOf(orderId, 'order.paid');

/** A payment of the paywall's price, signed by the agent through the official client, not yet sent. */
async function signedRequest(): Promise<X402FacilitatorRequest> {
  const res = await fetch(`${world.merchantUrl}/x402/prices/${pricingId}`);
  const required = decodePaymentRequiredHeader(res.headers.get('PAYMENT-REQUIRED')!);
  const client = recordPaymentContext(new x402Client().setSpendControls(false), signer).register('eip155:*', new ExactEvmScheme(signer));
  const payload = await client.createPaymentPayload(required);
  return { x402Version: 2, paymentPayload: payload, paymentRequirements: payload.accepted } as unknown as X402FacilitatorRequest;
}

/** Settles with the process "dying" after the submission: the transaction is sent (or, `dropped`, lost), nothing is recorded. */
async function settleAndCrash(request: X402FacilitatorRequest, options: { dropped?: boolean } = {}): Promise<string> {
  const { waitFor, submit } = chainAccess;
  let sent: string | undefined;
  chainAccess.submit = async (...args) => {
    sent = options.dropped ? `0x${randomBytes(32).toString('hex')}` : await submit(...args);
    return sent as `0x${string}`;
  };
  chainAccess.waitFor = async () => {
    throw new Error('the settling process died');
  };
  try {
    await expect(facilitator().settle(world.ctx.orgA.orgId, request)).rejects.toThrow('the settling process died');
  } finally {
    Object.assign(chainAccess, { waitFor, submit });
  }
  return sent!;
}

const later = (ms: number) => world.ctx.clock.set(world.ctx.clock.now().getTime() + ms);

/** Another worker process: its own facilitator service (and chain clients) on the same database. */
const otherWorker = () =>
  new X402FacilitatorService(
    new KnexX402Repository(db()),
    new KnexCryptoRepository(db()),
    world.ctx.services.payments,
    world.ctx.config.crypto,
    new SecretBox(randomBytes(32)),
    world.ctx.clock,
    createLogger({ level: 'silent' }),
  );

beforeAll(async () => {
  world = await startX402World();
  signer = await createAgentX402Signer(world.agent);
  const product = await createProduct(world.ctx, world.ctx.orgA.orgId, { name: 'Data point' });
  pricingId = (await createPrice(world.ctx, product.productId, { amount: 10_000, currency: 'USDC', provider: 'CRYPTO' })).pricingId;
  expect((await world.ctx.merchant.put(`/v1/x402/paywalls/${pricingId}`).set('X-API-Key', world.ctx.orgA.apiKey).send({})).status).toBe(200);
  chainAccess = facilitator().chainClient(world.ctx.config.crypto.chains[0]!);
}, 120_000);

afterAll(async () => {
  await world?.close();
});

describe('the x402 settlement finisher job', () => {
  it('is a worker job', () => {
    expect(workerJobs({ services: world.ctx.services }).map((j) => j.name)).toContain('x402-settlement-finisher');
  });

  it('records a settlement left SUBMITTED once it is stale: one PAID order, one order.paid', async () => {
    const balance = await world.balanceOf(world.agentWallet);
    const txHash = await settleAndCrash(await signedRequest());
    expect(await world.balanceOf(world.agentWallet)).toBe(balance - USDC(0.01));
    expect(await settlementOf(txHash)).toMatchObject({ status: 'SUBMITTED', order_id: null });
    expect(await facilitator().finishSubmitted()).toBe(0); // not stale yet: its settle may still be waiting
    later(121_000);
    expect(await facilitator().finishSubmitted()).toBe(1);
    const settlement = await settlementOf(txHash);
    expect(settlement).toMatchObject({ status: 'SETTLED' });
    const orders = await ordersWithTx(txHash);
    expect(orders).toEqual([expect.objectContaining({ id: settlement.order_id, status: 'PAID' })]);
    expect(await paidEventsOf(orders[0]!.id)).toBe(1);
    later(121_000);
    expect(await facilitator().finishSubmitted()).toBe(0);
  });

  it('marks a dropped transaction (unknown to the node, nonce unused) FAILED; the same payload then settles normally', async () => {
    const request = await signedRequest();
    const balance = await world.balanceOf(world.agentWallet);
    const bogus = await settleAndCrash(request, { dropped: true });
    expect(await world.balanceOf(world.agentWallet)).toBe(balance);
    later(121_000);
    expect(await facilitator().finishSubmitted()).toBe(1);
    expect(await settlementOf(bogus)).toMatchObject({ status: 'FAILED', error_reason: 'invalid_exact_evm_transaction_failed' });
    const retried = await facilitator().settle(world.ctx.orgA.orgId, request);
    expect(retried.success).toBe(true);
    expect(await world.balanceOf(world.agentWallet)).toBe(balance - USDC(0.01));
    expect(await ordersWithTx(retried.transaction)).toHaveLength(1);
  });

  it('a mined transaction without the authorized Transfer event is not recorded as paid (invalid_exact_evm_transfer_event_mismatch), by settle or by the finisher', async () => {
    const { waitFor, receipt } = chainAccess;
    // The receipt's Transfer moves one unit less than authorized (as a fee-taking token would).
    const lessOne = <T extends { transfers: Array<{ value: bigint }> } | null>(r: T): T => (r ? { ...r, transfers: r.transfers.map((t) => ({ ...t, value: t.value - 1n })) } : r);
    chainAccess.waitFor = async (...args) => lessOne(await waitFor(...args));
    try {
      const request = await signedRequest();
      const nonce = (request.paymentPayload.payload as unknown as { authorization: { nonce: string } }).authorization.nonce;
      expect(await facilitator().settle(world.ctx.orgA.orgId, request)).toMatchObject({ success: false, errorReason: 'invalid_exact_evm_transfer_event_mismatch' });
      const settlement = await settlementOf(nonce);
      expect(settlement).toMatchObject({ status: 'FAILED', error_reason: 'invalid_exact_evm_transfer_event_mismatch', order_id: null });
      expect(await ordersWithTx(settlement.tx_hash!)).toHaveLength(0);
    } finally {
      Object.assign(chainAccess, { waitFor });
    }
    const txHash = await settleAndCrash(await signedRequest());
    chainAccess.receipt = async (...args) => lessOne(await receipt(...args));
    try {
      later(121_000);
      expect(await facilitator().finishSubmitted()).toBe(1);
      expect(await settlementOf(txHash)).toMatchObject({ status: 'FAILED', error_reason: 'invalid_exact_evm_transfer_event_mismatch', order_id: null });
      expect(await ordersWithTx(txHash)).toHaveLength(0);
    } finally {
      Object.assign(chainAccess, { receipt });
    }
  });

  describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('two workers finishing at once', 'postgresOnly'), () => {
    it('two workers, 3 passes each at once, 10 rounds of 4 stuck settlements: each recorded once, one order and one order.paid each', async () => {
      const second = otherWorker();
      for (let round = 0; round < 10; round++) {
        const hashes: string[] = [];
        for (let i = 0; i < 4; i++) hashes.push(await settleAndCrash(await signedRequest()));
        later(121_000);
        const counts = await Promise.all([0, 1, 2].flatMap(() => [facilitator().finishSubmitted(), second.finishSubmitted()]));
        expect(counts.reduce((a, b) => a + b, 0)).toBe(4);
        for (const txHash of hashes) {
          expect((await settlementOf(txHash)).status).toBe('SETTLED');
          const orders = await ordersWithTx(txHash);
          expect(orders).toHaveLength(1);
          expect(await paidEventsOf(orders[0]!.id)).toBe(1);
        }
      }
    }, 300_000);

    it('two workers, 3 reorganization checks each at once, 5 rounds of 2 settlements reorganized away: each order failed once', async () => {
      const second = otherWorker();
      for (let round = 0; round < 5; round++) {
        const snapshot = await world.chain.snapshot();
        const hashes: string[] = [];
        for (let i = 0; i < 2; i++) hashes.push((await facilitator().settle(world.ctx.orgA.orgId, await signedRequest())).transaction);
        await world.chain.revert(snapshot);
        await world.chain.mine(2);
        const counts = await Promise.all([0, 1, 2].flatMap(() => [facilitator().followSettled(), second.followSettled()]));
        expect(counts.reduce((a, b) => a + b, 0)).toBe(2);
        for (const txHash of hashes) {
          const [order] = await ordersWithTx(txHash);
          expect(order).toMatchObject({ status: 'FAILED' });
          expect(await eventsOf(order!.id, 'order.failed')).toBe(1);
        }
      }
    }, 300_000);
  });

  it('a settled payment reorganized off the chain: settlement REMOVED, order FAILED (order.failed); mined again: PAID again (order.paid)', async () => {
    const pub = createPublicClient({ transport: http(world.chain.url) });
    const snapshot = await world.chain.snapshot();
    const balance = await world.balanceOf(world.agentWallet);
    const request = await signedRequest();
    const settled = await facilitator().settle(world.ctx.orgA.orgId, request);
    expect(settled.success).toBe(true);
    const txHash = settled.transaction as Hex;
    const sent = await pub.getTransaction({ hash: txHash });
    const [order] = await ordersWithTx(txHash);
    expect(order).toMatchObject({ status: 'PAID' });
    expect(await facilitator().followSettled()).toBe(0);

    // The blocks since the snapshot are replaced (evm_revert): the transfer is no longer on the chain.
    await world.chain.revert(snapshot);
    await world.chain.mine(2);
    expect(await world.balanceOf(world.agentWallet)).toBe(balance);
    expect(await facilitator().followSettled()).toBe(1);
    expect(await settlementOf(txHash)).toMatchObject({ status: 'REMOVED' });
    expect((await ordersWithTx(txHash))[0]).toMatchObject({ id: order!.id, status: 'FAILED' });
    expect(await eventsOf(order!.id, 'order.failed')).toBe(1);
    expect(await facilitator().followSettled()).toBe(0);
    // Settling the payload again meanwhile does not submit a second transaction.
    expect(await facilitator().settle(world.ctx.orgA.orgId, request)).toMatchObject({ success: false, errorReason: 'invalid_exact_evm_transaction_failed' });
    expect(await world.balanceOf(world.agentWallet)).toBe(balance);

    // The relayer's signed transaction is mined again (as a node re-includes it after a reorganization).
    const raw = serializeTransaction(
      { type: 'eip1559', chainId: world.chain.chainId, nonce: sent.nonce, gas: sent.gas, maxFeePerGas: sent.maxFeePerGas!, maxPriorityFeePerGas: sent.maxPriorityFeePerGas!, to: sent.to!, value: sent.value, data: sent.input, accessList: sent.accessList ?? [] },
      { r: sent.r, s: sent.s, yParity: sent.yParity! },
    );
    expect(await world.chain.sendRaw(raw)).toBe(txHash);
    expect(await world.balanceOf(world.agentWallet)).toBe(balance - USDC(0.01));
    expect(await facilitator().followSettled()).toBe(1);
    expect(await settlementOf(txHash)).toMatchObject({ status: 'SETTLED', order_id: order!.id });
    expect((await ordersWithTx(txHash))).toEqual([expect.objectContaining({ id: order!.id, status: 'PAID' })]);
    expect(await paidEventsOf(order!.id)).toBe(2);
  });
});
