/**
 * Kassa's own x402 paywalls (no merchant code): a catalog price sold at `/x402/prices/{id}`,
 * paid by the official @x402/fetch with Kassa's agent-wallet signer on a local chain.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { x402Client } from '@x402/fetch';
import { createX402Fetch } from '../../scripts/examples/x402-agent-pay.js';
import { enablePaywall, verifyReceipt } from '../../scripts/examples/x402-paywall.js';
import { createMerchantClient } from '../../src/client/merchant.js';
import { createAgentX402Signer, recordPaymentContext, type AgentX402Signer } from '../../src/client/x402.js';
import { x402CustomerEmail } from '../../src/commerce/payment-flow.js';
import { PUBLIC_API_URL } from '../agent-wallet/helpers.js';
import { createPrice, createProduct } from '../catalog/fixtures.js';
import { startX402World, USDC, type X402World } from './harness.js';

let world: X402World;
let signer: AgentX402Signer;
let product: { productId: string };
let usdcPrice: { pricingId: string };

const payingFetch = (resourceFetch: typeof fetch = fetch) =>
  (async (input: Parameters<typeof fetch>[0], init?: RequestInit) =>
    (await createX402Fetch({ agentWalletKey: world.agentWalletKey, apiUrl: PUBLIC_API_URL, agentFetch: world.agentFetch, resourceFetch, now: () => world.ctx.clock.now().getTime() }))(input, init)) as typeof fetch;

const merchant = () => world.ctx.merchant;
const apiKey = () => world.ctx.orgA.apiKey;
const paywallUrl = (pricingId: string) => `${world.merchantUrl}/x402/prices/${pricingId}`;
const ordersOfA = async () => (await merchant().get('/v1/orders').set('X-API-Key', apiKey())).body.data.records as any[];

beforeAll(async () => {
  world = await startX402World();
  signer = await createAgentX402Signer(world.agent);
  product = await createProduct(world.ctx, world.ctx.orgA.orgId, { name: 'Market report' });
  usdcPrice = await createPrice(world.ctx, product.productId, { amount: 500_000, currency: 'USDC', provider: 'CRYPTO' });
}, 120_000);

afterAll(async () => {
  await world?.close();
});

describe('turning a paywall on and off (merchant API)', () => {
  it('PUT answers the paywall with its public URL; the documented example does the same', async () => {
    const res = await merchant().put(`/v1/x402/paywalls/${usdcPrice.pricingId}`).set('X-API-Key', apiKey()).send({});
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toMatchObject({ pricingId: usdcPrice.pricingId, url: expect.stringMatching(new RegExp(`/x402/prices/${usdcPrice.pricingId}$`)), contentUrl: null });
    const viaExample = await enablePaywall({ kassaUrl: world.merchantUrl, apiKey: apiKey(), pricingId: usdcPrice.pricingId });
    expect(viaExample).toMatchObject({ pricingId: usdcPrice.pricingId, contentUrl: null });
  });

  it('refuses prices x402 cannot sell (400): subscription, flexible amount, EUR, deactivated; and a bad contentUrl', async () => {
    const put = (pricingId: string, body: object = {}) => merchant().put(`/v1/x402/paywalls/${pricingId}`).set('X-API-Key', apiKey()).send(body);
    const subscription = await createPrice(world.ctx, product.productId, { amount: 1000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' });
    const subRes = await put(subscription.pricingId);
    expect(subRes.status).toBe(400);
    expect(subRes.body.message).toContain('SUBSCRIPTION');
    const flexible = await createPrice(world.ctx, product.productId, { amount: 1000, currency: 'USD', flexibleAmount: true, minAmount: 100, maxAmount: 5000 });
    expect((await put(flexible.pricingId)).status).toBe(400);
    const eur = await createPrice(world.ctx, product.productId, { amount: 1000, currency: 'EUR' });
    expect((await put(eur.pricingId)).body.message).toContain('USD or USDC');
    const old = await createPrice(world.ctx, product.productId, { amount: 100, currency: 'USD' });
    expect((await world.ctx.admin.post(`/v1/prices/${old.pricingId}/deactivate`)).status).toBe(200);
    expect((await put(old.pricingId)).status).toBe(400);
    expect((await put(usdcPrice.pricingId, { contentUrl: 'javascript:alert(1)' })).status).toBe(400);
    expect((await put(usdcPrice.pricingId, { contentUrl: 'https://shop.example/x', extra: 1 })).status).toBe(400);
  });

  it('404 for a price of another organization or none; 401 without a key; 403 without x402:settle', async () => {
    const otherProduct = await createProduct(world.ctx, world.ctx.orgB.orgId, { name: 'Not yours' });
    const other = await createPrice(world.ctx, otherProduct.productId, { amount: 100, currency: 'USD' });
    expect((await merchant().put(`/v1/x402/paywalls/${other.pricingId}`).set('X-API-Key', apiKey()).send({})).status).toBe(404);
    expect((await merchant().put('/v1/x402/paywalls/PRC_nope').set('X-API-Key', apiKey()).send({})).status).toBe(404);
    expect((await merchant().delete('/v1/x402/paywalls/PRC_nope').set('X-API-Key', apiKey())).status).toBe(404);
    expect((await merchant().put(`/v1/x402/paywalls/${usdcPrice.pricingId}`).send({})).status).toBe(401);
    expect((await merchant().delete(`/v1/x402/paywalls/${usdcPrice.pricingId}`)).status).toBe(401);
    const limited = await world.ctx.services.orgs.createApiKey(world.ctx.orgA.orgId, { permissions: ['orders:read'] });
    expect((await merchant().put(`/v1/x402/paywalls/${usdcPrice.pricingId}`).set('X-API-Key', limited.key).send({})).status).toBe(403);
    expect((await merchant().delete(`/v1/x402/paywalls/${usdcPrice.pricingId}`).set('X-API-Key', limited.key)).status).toBe(403);
    expect((await merchant().delete('/v1/x402/paywalls/%20').set('X-API-Key', apiKey())).status).toBe(400);
  });

  it('DELETE turns it off: the URL answers 404 until it is turned on again', async () => {
    const price = await createPrice(world.ctx, product.productId, { amount: 25, currency: 'USD' });
    expect((await merchant().put(`/v1/x402/paywalls/${price.pricingId}`).set('X-API-Key', apiKey()).send({})).status).toBe(200);
    expect((await fetch(paywallUrl(price.pricingId))).status).toBe(402);
    // The SDK's method, as a merchant's server calls it.
    const removed = await createMerchantClient({ baseUrl: world.merchantUrl, apiKey: apiKey() }).deleteX402Paywall(price.pricingId);
    expect(removed).toMatchObject({ pricingId: price.pricingId, contentUrl: null });
    expect((await fetch(paywallUrl(price.pricingId))).status).toBe(404);
    expect((await merchant().delete(`/v1/x402/paywalls/${price.pricingId}`).set('X-API-Key', apiKey())).status).toBe(404);
  });
});

describe('the public paywall URL', () => {
  it('answers 402 with the x402 v2 terms: USDC on the receiving chain, the exact amount, payTo, resource, timeout', async () => {
    const res = await fetch(paywallUrl(usdcPrice.pricingId));
    expect(res.status).toBe(402);
    const required = decodePaymentRequiredHeader(res.headers.get('PAYMENT-REQUIRED')!);
    expect(required).toMatchObject({
      x402Version: 2,
      resource: { url: expect.stringMatching(new RegExp(`/x402/prices/${usdcPrice.pricingId}$`)), description: 'Market report' },
      accepts: [{ scheme: 'exact', network: world.network, asset: world.token, amount: '500000', payTo: world.payTo, maxTimeoutSeconds: 300, extra: { name: 'USD Coin', version: '2' } }],
    });
    expect(await res.json()).toEqual(required);
    const page = await fetch(paywallUrl(usdcPrice.pricingId), { headers: { Accept: 'text/html' } });
    expect(page.status).toBe(402);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('PAYMENT-REQUIRED')).toBeTruthy();
  });

  it('an organization with no receiving wallet on a USDC chain gets terms that say so (402, no accepts, an error naming the wallet)', async () => {
    const orgB = world.ctx.orgB;
    const productB = await createProduct(world.ctx, orgB.orgId, { name: 'Unpayable report' });
    const priceB = await createPrice(world.ctx, productB.productId, { amount: 100, currency: 'USD' });
    expect((await merchant().put(`/v1/x402/paywalls/${priceB.pricingId}`).set('X-API-Key', orgB.apiKey).send({})).status).toBe(200);
    const res = await fetch(paywallUrl(priceB.pricingId));
    expect(res.status).toBe(402);
    const required = decodePaymentRequiredHeader(res.headers.get('PAYMENT-REQUIRED')!);
    expect(required.accepts).toEqual([]);
    expect(required.error).toContain('no receiving wallet');
  });

  it('converts a USD price exactly: 25 cents is 250000 USDC units', async () => {
    const price = await createPrice(world.ctx, product.productId, { amount: 25, currency: 'USD' });
    expect((await merchant().put(`/v1/x402/paywalls/${price.pricingId}`).set('X-API-Key', apiKey()).send({})).status).toBe(200);
    const required = decodePaymentRequiredHeader((await fetch(paywallUrl(price.pricingId))).headers.get('PAYMENT-REQUIRED')!);
    expect(required.accepts[0]!.amount).toBe('250000');
  });

  it('@x402/fetch with the agent wallet pays it: signed receipt, PAID order of the product, customer, entitlement, order.paid', async () => {
    const before = { agent: await world.balanceOf(world.agentWallet), merchant: await world.balanceOf(world.payTo) };
    const res = await payingFetch()(paywallUrl(usdcPrice.pricingId));
    expect(res.status).toBe(200);
    const settlement = decodePaymentResponseHeader(res.headers.get('PAYMENT-RESPONSE')!);
    expect(settlement).toMatchObject({ success: true, network: world.network, payer: world.agentWallet });
    const keys = (await world.ctx.platform.get('/v1/webhooks/signing-key')).body;
    const receipt = await verifyReceipt(res, keys, { now: world.ctx.clock.now() });
    expect(receipt).toMatchObject({
      type: 'x402.receipt',
      data: { pricingId: usdcPrice.pricingId, productId: product.productId, amount: 500_000, currency: 'USDC', amountUnits: '500000', payer: world.agentWallet, payTo: world.payTo, transaction: settlement.transaction },
    });
    expect(await world.balanceOf(world.agentWallet)).toBe(before.agent - USDC(0.5));
    expect(await world.balanceOf(world.payTo)).toBe(before.merchant + USDC(0.5));

    const order = (await ordersOfA()).find((o) => o.orderId === receipt.data.orderId);
    expect(order).toMatchObject({ status: 'PAID', provider: 'CRYPTO', productId: product.productId, txHash: settlement.transaction, fromAddress: world.agentWallet });
    const entitled = await merchant().get('/v1/entitlements/check').query({ wallet: world.agentWallet, product_id: product.productId }).set('X-API-Key', apiKey());
    expect(entitled.body.data).toMatchObject({ entitled: true, type: 'ONE_TIME', productId: product.productId });
    const customer = await merchant().get(`/v1/customers/${order.customerId}`).set('X-API-Key', apiKey());
    expect(customer.body.data.email).toBe(x402CustomerEmail(world.agentWallet));
    const events = await world.ctx.testDb.database.db('webhook_events').where({ org_id: world.ctx.orgA.orgId, type: 'order.paid' });
    expect(events.some((e: any) => JSON.stringify(e.payload ?? e.data ?? e).includes(receipt.data.orderId))).toBe(true);

    // A tampered receipt does not verify.
    const forged = new Response(JSON.stringify({ ...receipt, data: { ...receipt.data, amount: 1 } }), { headers: res.headers });
    await expect(verifyReceipt(forged, keys, { now: world.ctx.clock.now() })).rejects.toThrow();
  });

  it('HEAD gets the terms and never settles a payment it carries', async () => {
    let paymentHeader: string | undefined;
    const withholding: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      paymentHeader ??= request.headers.get('PAYMENT-SIGNATURE') ?? undefined;
      // The payment is kept, never delivered: the agent sees a 402 again.
      return fetch(paywallUrl(usdcPrice.pricingId));
    };
    await payingFetch(withholding)(paywallUrl(usdcPrice.pricingId));
    const balance = await world.balanceOf(world.agentWallet);
    const head = await fetch(paywallUrl(usdcPrice.pricingId), { method: 'HEAD', headers: { 'PAYMENT-SIGNATURE': paymentHeader! } });
    expect(head.status).toBe(402);
    expect(head.headers.get('PAYMENT-RESPONSE')).toBeNull();
    expect(await world.balanceOf(world.agentWallet)).toBe(balance);
  });

  it('refuses a replayed payment (402, nonce already used) and moves nothing', async () => {
    let paymentHeader: string | undefined;
    const recording: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      paymentHeader ??= request.headers.get('PAYMENT-SIGNATURE') ?? undefined;
      return fetch(request);
    };
    expect((await payingFetch(recording)(paywallUrl(usdcPrice.pricingId))).status).toBe(200);
    const balance = await world.balanceOf(world.agentWallet);
    const orders = (await ordersOfA()).length;
    const replay = await fetch(paywallUrl(usdcPrice.pricingId), { headers: { 'PAYMENT-SIGNATURE': paymentHeader! } });
    expect(replay.status).toBe(402);
    expect(decodePaymentRequiredHeader(replay.headers.get('PAYMENT-REQUIRED')!).error).toBe('invalid_exact_evm_nonce_already_used');
    expect(await world.balanceOf(world.agentWallet)).toBe(balance);
    expect((await ordersOfA()).length).toBe(orders);
  });

  it('refuses a payment of another amount than the price (402), and an undecodable header (402), moving nothing', async () => {
    const res = await fetch(paywallUrl(usdcPrice.pricingId));
    const required = decodePaymentRequiredHeader(res.headers.get('PAYMENT-REQUIRED')!);
    const cheaper = { ...required, accepts: [{ ...required.accepts[0]!, amount: '1' }] };
    const client = recordPaymentContext(new x402Client().setSpendControls(false), signer).register('eip155:*', new ExactEvmScheme(signer));
    const payload = await client.createPaymentPayload(cheaper);
    const balance = await world.balanceOf(world.agentWallet);
    const paid = await fetch(paywallUrl(usdcPrice.pricingId), { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payload) } });
    expect(paid.status).toBe(402);
    expect(decodePaymentRequiredHeader(paid.headers.get('PAYMENT-REQUIRED')!).error).toMatch(/^invalid_/);
    const garbage = await fetch(paywallUrl(usdcPrice.pricingId), { headers: { 'PAYMENT-SIGNATURE': '%%%not base64%%%' } });
    expect(garbage.status).toBe(402);
    expect(decodePaymentRequiredHeader(garbage.headers.get('PAYMENT-REQUIRED')!).error).toContain('invalid_payload');
    expect(await world.balanceOf(world.agentWallet)).toBe(balance);
  });

  it('a decodable but wrong PAYMENT-SIGNATURE (payload or accepted null, arrays, numbers, a broken authorization) is a 402 with a reason code, never a 500', async () => {
    const required = decodePaymentRequiredHeader((await fetch(paywallUrl(usdcPrice.pricingId))).headers.get('PAYMENT-REQUIRED')!);
    const accepted = required.accepts[0]!;
    const authorization = { from: world.agentWallet, to: world.payTo, value: '500000', validAfter: '0', validBefore: '99999999999', nonce: `0x${'1'.repeat(64)}` };
    const shapes: unknown[] = [
      { x402Version: 2, accepted, payload: null },
      { x402Version: 2, accepted: null, payload: null },
      { x402Version: 2, accepted, payload: [] },
      { x402Version: 2, accepted, payload: { signature: null, authorization: null } },
      { x402Version: 2, accepted, payload: { signature: `0x${'ab'.repeat(65)}`, authorization: null } },
      { x402Version: 2, accepted, payload: { signature: `0x${'ab'.repeat(65)}`, authorization: { ...authorization, validAfter: `9${'9'.repeat(70)}` } } },
      { x402Version: 2, accepted: { ...accepted, amount: null, payTo: 7 }, payload: { signature: 1, authorization } },
      { x402Version: 2, accepted: [accepted], payload: {} },
      { accepted },
      [],
      42,
      'text',
      null,
    ];
    for (const shape of shapes) {
      const header = Buffer.from(JSON.stringify(shape)).toString('base64');
      const res = await fetch(paywallUrl(usdcPrice.pricingId), { headers: { 'PAYMENT-SIGNATURE': header } });
      expect(res.status, JSON.stringify(shape)).toBe(402);
      expect(decodePaymentRequiredHeader(res.headers.get('PAYMENT-REQUIRED')!).error, JSON.stringify(shape)).toMatch(/^[a-z0-9_]+$/);
    }
  });

  it('fuzz (fast-check, bounded): any decodable PAYMENT-SIGNATURE is answered 402 with an x402 reason code, never 5xx, and moves nothing', async () => {
    const required = decodePaymentRequiredHeader((await fetch(paywallUrl(usdcPrice.pricingId))).headers.get('PAYMENT-REQUIRED')!);
    const accepted = required.accepts[0]!;
    const hex = (bytes: number) => fc.uint8Array({ minLength: bytes, maxLength: bytes }).map((b) => `0x${Buffer.from(b).toString('hex')}`);
    const uintText = fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 256n }).map(String), fc.bigInt({ min: 0n, max: 2n ** 256n }).map((n) => `0x${n.toString(16)}`), fc.string());
    const authorization = fc.record(
      { from: fc.oneof(fc.constant(world.agentWallet), hex(20), fc.anything()), to: fc.oneof(fc.constant(world.payTo), hex(20), fc.anything()), value: fc.oneof(fc.constant('500000'), uintText), validAfter: uintText, validBefore: uintText, nonce: fc.oneof(hex(32), fc.anything()) },
      { requiredKeys: [] },
    );
    const payload = fc.oneof(fc.anything(), fc.record({ signature: fc.oneof(hex(65), hex(200), fc.anything()), authorization: fc.oneof(authorization, fc.anything()) }, { requiredKeys: [] }));
    const acceptedArb = fc.oneof(fc.constant(accepted), fc.anything(), fc.record({ scheme: fc.oneof(fc.constant('exact'), fc.string()), network: fc.oneof(fc.constant(accepted.network), fc.string()), asset: fc.oneof(fc.constant(accepted.asset), fc.anything()), amount: fc.oneof(fc.constant(accepted.amount), fc.anything()), payTo: fc.oneof(fc.constant(accepted.payTo), fc.anything()) }, { requiredKeys: [] }));
    const shape = fc.oneof(fc.anything(), fc.record({ x402Version: fc.oneof(fc.constant(2), fc.anything()), accepted: acceptedArb, payload, resource: fc.anything() }, { requiredKeys: [] }));
    const balance = await world.balanceOf(world.agentWallet);
    await fc.assert(
      fc.asyncProperty(shape, async (value) => {
        const header = Buffer.from(JSON.stringify(value) ?? 'null').toString('base64');
        const res = await fetch(paywallUrl(usdcPrice.pricingId), { headers: { 'PAYMENT-SIGNATURE': header } });
        expect(res.status).toBe(402);
        expect(decodePaymentRequiredHeader(res.headers.get('PAYMENT-REQUIRED')!).error).toMatch(/^[a-z0-9_]+$/);
      }),
      { numRuns: 150, seed: Number(process.env.FUZZ_SEED ?? 27) },
    );
    expect(await world.balanceOf(world.agentWallet)).toBe(balance);
  }, 120_000);

  it('with a contentUrl, a paid request is redirected there (303) with the order id', async () => {
    const price = await createPrice(world.ctx, product.productId, { amount: 100_000, currency: 'USDC', provider: 'CRYPTO' });
    await enablePaywall({ kassaUrl: world.merchantUrl, apiKey: apiKey(), pricingId: price.pricingId, contentUrl: 'https://shop.example/reports/latest?edition=1' });
    const res = await payingFetch()(paywallUrl(price.pricingId), { redirect: 'manual' });
    expect(res.status).toBe(303);
    const location = new URL(res.headers.get('location')!);
    expect(location.origin + location.pathname).toBe('https://shop.example/reports/latest');
    expect(location.searchParams.get('edition')).toBe('1');
    const orderId = location.searchParams.get('kassa_order_id')!;
    expect((await merchant().get(`/v1/orders/${orderId}`).set('X-API-Key', apiKey())).body.data).toMatchObject({ status: 'PAID', productId: product.productId });
    expect(decodePaymentResponseHeader(res.headers.get('PAYMENT-RESPONSE')!).success).toBe(true);
  });

  it('a deactivated price answers 410; an unknown or malformed id 404 (JSON, or a page for browsers), never 500', async () => {
    const price = await createPrice(world.ctx, product.productId, { amount: 100, currency: 'USD' });
    await enablePaywall({ kassaUrl: world.merchantUrl, apiKey: apiKey(), pricingId: price.pricingId });
    expect((await world.ctx.admin.post(`/v1/prices/${price.pricingId}/deactivate`)).status).toBe(200);
    const gone = await fetch(paywallUrl(price.pricingId));
    expect(gone.status).toBe(410);
    expect(((await gone.json()) as { success: boolean }).success).toBe(false);
    expect((await fetch(paywallUrl(price.pricingId), { headers: { Accept: 'text/html' } })).status).toBe(410);
    const archivedProduct = await createProduct(world.ctx, world.ctx.orgA.orgId, { name: 'Old report' });
    const archivedPrice = await createPrice(world.ctx, archivedProduct.productId, { amount: 100, currency: 'USD' });
    await enablePaywall({ kassaUrl: world.merchantUrl, apiKey: apiKey(), pricingId: archivedPrice.pricingId });
    expect((await world.ctx.admin.post(`/v1/products/${archivedProduct.productId}/archive`)).status).toBe(200);
    expect((await fetch(paywallUrl(archivedPrice.pricingId))).status).toBe(410);
    expect((await merchant().put(`/v1/x402/paywalls/${archivedPrice.pricingId}`).set('X-API-Key', apiKey()).send({})).status).toBe(400);
    for (const id of ['PRC_000000000000000000000000', 'PRC_%00', 'nope', `PRC_${'a'.repeat(500)}`, '%E0%A4%A']) {
      const json = await fetch(`${world.merchantUrl}/x402/prices/${id}`);
      expect(json.status, id).toBe(404);
      const page = await fetch(`${world.merchantUrl}/x402/prices/${id}`, { headers: { Accept: 'text/html' } });
      expect(page.status, id).toBe(404);
      expect(page.headers.get('content-type')).toContain('text/html');
    }
  });
});
