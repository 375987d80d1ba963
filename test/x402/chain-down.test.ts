/**
 * The chain's node unreachable (issue 27, item 4): `verify`, `settle` and the paywall answer 503
 * with Retry-After, never 500, and a settle that could not reach the node leaves no claim behind
 * (the same payload settles once the node is back). The configured RPC URL is a loopback port
 * nobody listens on; payments are signed offline.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createPrice, createProduct } from '../catalog/fixtures.js';
import { createTestContext, type TestContext } from '../harness/context.js';

const CHAIN_ID = 31337;
const TOKEN = '0x5FbDB2315678afecb367f032d93F642f64180aa3' as const;
const PAY_TO = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8' as const;
const network = `eip155:${CHAIN_ID}`;

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext({
    env: {
      CRYPTO_CHAINS: JSON.stringify([
        { chainId: CHAIN_ID, name: 'Hardhat', rpcUrl: 'http://127.0.0.1:9/', confirmations: 1, explorerUrl: 'https://explorer.test', blockRange: 100, initialLookback: 100, tokens: { USDC: TOKEN } },
      ]),
    },
  });
  expect((await ctx.admin.put(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${CHAIN_ID}`).send({ address: PAY_TO })).status).toBe(200);
});

afterAll(async () => {
  await ctx?.close();
});

async function signedRequest() {
  const payer = privateKeyToAccount(generatePrivateKey());
  const requirements = { scheme: 'exact', network, asset: TOKEN, amount: '10000', payTo: PAY_TO, maxTimeoutSeconds: 120, extra: { name: 'USD Coin', version: '2' } };
  const nowSeconds = Math.floor(ctx.clock.now().getTime() / 1000);
  const authorization = { from: payer.address, to: PAY_TO, value: '10000', validAfter: '0', validBefore: String(nowSeconds + 600), nonce: `0x${'2'.repeat(64)}` as const };
  const signature = await payer.signTypedData({
    domain: { name: 'USD Coin', version: '2', chainId: CHAIN_ID, verifyingContract: TOKEN },
    types: { TransferWithAuthorization: [{ name: 'from', type: 'address' }, { name: 'to', type: 'address' }, { name: 'value', type: 'uint256' }, { name: 'validAfter', type: 'uint256' }, { name: 'validBefore', type: 'uint256' }, { name: 'nonce', type: 'bytes32' }] },
    primaryType: 'TransferWithAuthorization',
    message: { ...authorization, value: 10000n, validAfter: 0n, validBefore: BigInt(authorization.validBefore) },
  });
  return { body: { x402Version: 2, paymentPayload: { x402Version: 2, accepted: requirements, payload: { signature, authorization } }, paymentRequirements: requirements }, payer: payer.address, nonce: authorization.nonce };
}

describe('the chain node is down', () => {
  it('verify and settle answer 503 with Retry-After (the envelope, SERVICE_UNAVAILABLE), and the settle leaves its claim released', async () => {
    const { body, payer, nonce } = await signedRequest();
    for (const operation of ['verify', 'settle']) {
      const res = await ctx.merchant.post(`/v1/x402/${operation}`).set('X-API-Key', ctx.orgA.apiKey).send(body);
      expect(res.status, operation).toBe(503);
      expect(Number(res.headers['retry-after']), operation).toBeGreaterThan(0);
      expect(res.body).toMatchObject({ success: false, error: { code: 'SERVICE_UNAVAILABLE' } });
      expect(res.body.message).toContain('unreachable');
    }
    // Nothing was sent: the settlement is FAILED (settled again once the node is back), not left SUBMITTING.
    const lookup = await ctx.merchant.get('/v1/x402/settlements').query({ network, asset: TOKEN, payer, nonce }).set('X-API-Key', ctx.orgA.apiKey);
    expect(lookup.status).toBe(200);
    expect(lookup.body.data).toMatchObject({ status: 'FAILED', transaction: null, orderId: null });
  });

  it('the paywall answers 503 with Retry-After (JSON for an x402 client, a page for a browser), never 500', async () => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Report' });
    const price = await createPrice(ctx, product.productId, { amount: 25, currency: 'USD' });
    expect((await ctx.merchant.put(`/v1/x402/paywalls/${price.pricingId}`).set('X-API-Key', ctx.orgA.apiKey).send({})).status).toBe(200);
    const json = await ctx.merchant.get(`/x402/prices/${price.pricingId}`);
    expect(json.status).toBe(503);
    expect(Number(json.headers['retry-after'])).toBeGreaterThan(0);
    expect(json.body).toMatchObject({ success: false, error: { code: 'SERVICE_UNAVAILABLE' } });
    const paid = await ctx.merchant.get(`/x402/prices/${price.pricingId}`).set('PAYMENT-SIGNATURE', Buffer.from(JSON.stringify((await signedRequest()).body.paymentPayload)).toString('base64'));
    expect(paid.status).toBe(503);
    const page = await ctx.merchant.get(`/x402/prices/${price.pricingId}`).set('Accept', 'text/html');
    expect(page.status).toBe(503);
    expect(page.headers['content-type']).toContain('text/html');
    expect(Number(page.headers['retry-after'])).toBeGreaterThan(0);
  });
});
