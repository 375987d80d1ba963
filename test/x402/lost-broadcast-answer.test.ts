/**
 * The money bug of an x402 settlement whose broadcast answer is lost (issue 27 follow-up): Kassa's
 * node connection drops after the node took the relayer's `transferWithAuthorization`. The
 * transfer is mined; the claim used to be marked FAILED (`invalid_exact_evm_transaction_failed`)
 * with no order, so the buyer paid for nothing on record. Now the relayer asks the node for the
 * transaction of the bytes it broadcast before deciding the broadcast failed: the settle succeeds
 * and records the one PAID order. Kassa's RPC URL points at a proxy that drops that one answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { x402Client } from '@x402/fetch';
import { createAgentX402Signer, recordPaymentContext, type AgentX402Signer } from '../../src/client/x402.js';
import type { X402FacilitatorRequest } from '../../src/crypto-payments/x402-facilitator.service.js';
import { createPrice, createProduct } from '../catalog/fixtures.js';
import { droppingProxy, type DroppingProxy } from './dropping-proxy.js';
import { startX402World, USDC, type X402World } from './harness.js';

let world: X402World;
let proxy: DroppingProxy;
let chainUrl = '';
let signer: AgentX402Signer;
let pricingId: string;

beforeAll(async () => {
  proxy = await droppingProxy(() => chainUrl);
  world = await startX402World({
    rpcUrl: (url) => {
      chainUrl = url;
      return proxy.url;
    },
  });
  signer = await createAgentX402Signer(world.agent);
  const product = await createProduct(world.ctx, world.ctx.orgA.orgId, { name: 'Data point' });
  pricingId = (await createPrice(world.ctx, product.productId, { amount: 10_000, currency: 'USDC', provider: 'CRYPTO' })).pricingId;
  expect((await world.ctx.merchant.put(`/v1/x402/paywalls/${pricingId}`).set('X-API-Key', world.ctx.orgA.apiKey).send({})).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await world?.close();
  await proxy?.close();
});

async function signedRequest(): Promise<X402FacilitatorRequest> {
  const res = await fetch(`${world.merchantUrl}/x402/prices/${pricingId}`);
  const required = decodePaymentRequiredHeader(res.headers.get('PAYMENT-REQUIRED')!);
  const client = recordPaymentContext(new x402Client().setSpendControls(false), signer).register('eip155:*', new ExactEvmScheme(signer));
  const payload = await client.createPaymentPayload(required);
  return { x402Version: 2, paymentPayload: payload, paymentRequirements: payload.accepted } as unknown as X402FacilitatorRequest;
}

describe('a settle whose broadcast answer is lost', () => {
  it('records the mined transfer: success, settlement SETTLED, one PAID order; the money moved once', async () => {
    const db = world.ctx.testDb.database.db;
    const balance = await world.balanceOf(world.agentWallet);
    const settled = await world.ctx.services.modules.cryptoPayments.x402.settle(world.ctx.orgA.orgId, await signedRequest());
    expect(proxy.dropped).toBe(1);
    expect(await world.balanceOf(world.agentWallet)).toBe(balance - USDC(0.01));
    expect(settled).toMatchObject({ success: true });
    const settlement = await db('x402_settlements').where({ tx_hash: settled.transaction }).first();
    expect(settlement).toMatchObject({ status: 'SETTLED' });
    expect(await db('orders').where({ tx_hash: settled.transaction })).toEqual([expect.objectContaining({ id: settlement.order_id, status: 'PAID' })]);
    expect(await db('x402_settlements').where({ status: 'FAILED' })).toEqual([]);
  });
});
