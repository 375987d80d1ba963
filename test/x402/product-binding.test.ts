/**
 * What an x402 order sells comes only from what the merchant authenticated (issue 27, item 1):
 * Kassa's own paywall record, or the `paymentRequirements` its server sends with its API key
 * (`extra.kassaPricingId`) — never from the buyer's `paymentPayload` (`resource.url`,
 * `resource.description`), which the buyer signs nothing over and may write as it likes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { x402Client } from '@x402/fetch';
import { createAgentX402Signer, recordPaymentContext, type AgentX402Signer } from '../../src/client/x402.js';
import { createPrice, createProduct } from '../catalog/fixtures.js';
import { startX402World, USDC, type X402World } from './harness.js';

let world: X402World;
let signer: AgentX402Signer;
let app: { url: string; close(): Promise<void> };
/** A product sold by a 5 USDC paywall, and one whose only price is a 999,999 USD/year subscription. */
let premium: { productId: string; pricingId: string };
let subscriptionOnly: { productId: string; pricingId: string };
/** A one-time 0.01 USDC price the merchant's `/named` route sells (extra.kassaPricingId). */
let named: { productId: string; pricingId: string };

const merchant = () => world.ctx.merchant;
const apiKey = () => world.ctx.orgA.apiKey;
const paywallUrl = (pricingId: string) => `${world.merchantUrl}/x402/prices/${pricingId}`;
const orderWithTx = async (txHash: string) =>
  ((await merchant().get('/v1/orders').set('X-API-Key', apiKey())).body.data.records as any[]).find((o) => o.txHash === txHash);
const entitled = async (productId: string) =>
  (await merchant().get('/v1/entitlements/check').query({ wallet: world.agentWallet, product_id: productId }).set('X-API-Key', apiKey())).body.data.entitled as boolean;

const client = () => recordPaymentContext(new x402Client().setSpendControls(false), signer).register('eip155:*', new ExactEvmScheme(signer));

/** Pays `path` of the merchant's @x402/express app with a payload whose `resource` the buyer rewrote. */
async function payWithResource(path: string, resource: { url: string; description?: string }) {
  const terms = await fetch(`${app.url}${path}`);
  expect(terms.status).toBe(402);
  const payload = await client().createPaymentPayload(decodePaymentRequiredHeader(terms.headers.get('PAYMENT-REQUIRED')!));
  const forged = { ...payload, resource: { ...resource, mimeType: 'application/json' } };
  const res = await fetch(`${app.url}${path}`, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(forged) } });
  return { res, response: res.headers.get('PAYMENT-RESPONSE') };
}

/** Terms as a merchant's server would send them, with `extra` of its choosing, and a payload signed for them. */
async function signedFor(amount: bigint, extra: Record<string, unknown>) {
  const requirements = { scheme: 'exact', network: world.network, asset: world.token, amount: amount.toString(), payTo: world.payTo, maxTimeoutSeconds: 120, extra: { name: 'USD Coin', version: '2', ...extra } };
  const payload = await client().createPaymentPayload({ x402Version: 2, resource: { url: `${app.url}/custom`, description: 'Custom', mimeType: 'application/json' }, accepts: [requirements] } as never);
  return { payload, requirements: payload.accepted };
}

beforeAll(async () => {
  world = await startX402World();
  signer = await createAgentX402Signer(world.agent);
  const orgA = world.ctx.orgA.orgId;
  const premiumProduct = await createProduct(world.ctx, orgA, { name: 'Premium data' });
  const premiumPrice = await createPrice(world.ctx, premiumProduct.productId, { amount: 5_000_000, currency: 'USDC', provider: 'CRYPTO' });
  expect((await merchant().put(`/v1/x402/paywalls/${premiumPrice.pricingId}`).set('X-API-Key', apiKey()).send({})).status).toBe(200);
  premium = { productId: premiumProduct.productId, pricingId: premiumPrice.pricingId };
  const subProduct = await createProduct(world.ctx, orgA, { name: 'Enterprise plan' });
  const subPrice = await createPrice(world.ctx, subProduct.productId, { amount: 99_999_900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'YEAR' });
  subscriptionOnly = { productId: subProduct.productId, pricingId: subPrice.pricingId };
  const namedProduct = await createProduct(world.ctx, orgA, { name: 'Data point' });
  const namedPrice = await createPrice(world.ctx, namedProduct.productId, { amount: 10_000, currency: 'USDC', provider: 'CRYPTO' });
  named = { productId: namedProduct.productId, pricingId: namedPrice.pricingId };
  app = await world.startMerchantApp({
    'GET /cheap': { units: USDC(0.01), description: 'Cheapest route', body: { ok: true } },
    'GET /named': { units: USDC(0.01), description: 'Data point route', body: { ok: true }, pricingId: named.pricingId },
  });
}, 120_000);

afterAll(async () => {
  await world?.close();
});

describe('the buyer cannot choose the product (the review\'s reproduction)', () => {
  it('paying the cheapest route with resource.url set to another price\'s paywall URL buys no entitlement to that product; the description is not the product name', async () => {
    expect(await entitled(premium.productId)).toBe(false);
    const { res, response } = await payWithResource('/cheap', { url: paywallUrl(premium.pricingId), description: 'Injected by the buyer' });
    expect(res.status).toBe(200);
    const transaction = JSON.parse(Buffer.from(response!, 'base64').toString()).transaction as string;
    const order = await orderWithTx(transaction);
    expect(order).toMatchObject({ status: 'PAID', amountCents: 10_000, productName: 'x402 payment' });
    expect(order.productId ?? null).toBeNull();
    expect(await entitled(premium.productId)).toBe(false);
  });

  it('nor to a product whose only price is a 999,999 USD/year subscription', async () => {
    const { res, response } = await payWithResource('/cheap', { url: paywallUrl(subscriptionOnly.pricingId), description: 'Enterprise plan' });
    expect(res.status).toBe(200);
    const transaction = JSON.parse(Buffer.from(response!, 'base64').toString()).transaction as string;
    const order = await orderWithTx(transaction);
    expect(order).toMatchObject({ status: 'PAID', productName: 'x402 payment' });
    expect(order.productId ?? null).toBeNull();
    expect(await entitled(subscriptionOnly.productId)).toBe(false);
  });
});

describe('a merchant route names the catalog price it sells (paymentRequirements.extra.kassaPricingId)', () => {
  it('the order is of that price\'s product and grants its entitlement, whatever the buyer\'s resource says', async () => {
    const { res, response } = await payWithResource('/named', { url: paywallUrl(premium.pricingId), description: 'Injected by the buyer' });
    expect(res.status).toBe(200);
    const transaction = JSON.parse(Buffer.from(response!, 'base64').toString()).transaction as string;
    expect(await orderWithTx(transaction)).toMatchObject({ status: 'PAID', productId: named.productId, productName: 'Data point' });
    expect(await entitled(named.productId)).toBe(true);
    expect(await entitled(premium.productId)).toBe(false);
  });

  it('refuses (verify and settle, invalid_payment_requirements, nothing moves) a price of another amount, a subscription, another organization\'s or an unknown price', async () => {
    const otherProduct = await createProduct(world.ctx, world.ctx.orgB.orgId, { name: 'Not yours' });
    const otherPrice = await createPrice(world.ctx, otherProduct.productId, { amount: 10_000, currency: 'USDC', provider: 'CRYPTO' });
    const cases: Array<[string, bigint, string]> = [
      ['amount differs from the price', USDC(0.02), named.pricingId],
      ['subscription-only price', USDC(1), subscriptionOnly.pricingId],
      ['another organization\'s price', USDC(0.01), otherPrice.pricingId],
      ['unknown price', USDC(0.01), 'PRC_000000000000000000000000'],
      ['not a price id', USDC(0.01), 'premium'],
    ];
    const balance = await world.balanceOf(world.agentWallet);
    for (const [what, amount, pricingId] of cases) {
      const { payload, requirements } = await signedFor(amount, { kassaPricingId: pricingId });
      expect(await world.facilitator().verify(payload, requirements), what).toMatchObject({ isValid: false, invalidReason: 'invalid_payment_requirements' });
      expect(await world.facilitator().settle(payload, requirements), what).toMatchObject({ success: false, errorReason: 'invalid_payment_requirements', transaction: '' });
    }
    expect(await world.balanceOf(world.agentWallet)).toBe(balance);
    expect(await entitled(subscriptionOnly.productId)).toBe(false);
  });
});
