/**
 * x402 on both sides, proven with the official packages on a local chain: an Express app behind
 * @x402/express uses Kassa as its facilitator, and an agent pays it through @x402/fetch with
 * Kassa's agent-wallet signer (every signature a policy-checked sign-typed-data request).
 */
import { serializeErc6492Signature } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { x402Client, decodePaymentResponseHeader } from '@x402/fetch';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { createX402Fetch } from '../../scripts/examples/x402-agent-pay.js';
import { PUBLIC_API_URL } from '../agent-wallet/helpers.js';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { createLogger } from '../../src/kernel/logger.js';
import { DeliveryWorker } from '../../src/webhooks/delivery.worker.js';
import { KnexWebhookDeliveryRepository } from '../../src/webhooks/deliveries.repository.js';
import { UrlGuard } from '../../src/webhooks/url-guard.js';
import { verifyWebhook, type OrderWebhookEvent } from '../../src/client/verify-webhook.js';
import { createAgentX402Signer, recordPaymentContext, type AgentX402Signer } from '../../src/client/x402.js';
import { x402CustomerEmail } from '../../src/commerce/payment-flow.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { RECEIVER_CERT, startReceiver, type Receiver } from '../webhooks/receiver.js';
import { startX402World, USDC, type X402World } from './harness.js';

let world: X402World;
let merchantApp: { url: string; close(): Promise<void> };
let signer: AgentX402Signer;
let receiver: Receiver;

/** The documented agent example (docs/x402-agents.md): @x402/fetch with Kassa's agent-wallet signer. */
const payingFetch = (resourceFetch: typeof fetch = fetch) =>
  (async (input: Parameters<typeof fetch>[0], init?: RequestInit) =>
    (await createX402Fetch({ agentWalletKey: world.agentWalletKey, apiUrl: PUBLIC_API_URL, agentFetch: world.agentFetch, resourceFetch, now: () => world.ctx.clock.now().getTime() }))(input, init)) as typeof fetch;

const ordersOfA = async () => (await world.ctx.merchant.get('/v1/orders').set('X-API-Key', world.ctx.orgA.apiKey)).body.data.records as any[];

beforeAll(async () => {
  world = await startX402World();
  merchantApp = await world.startMerchantApp();
  signer = await createAgentX402Signer(world.agent);
  receiver = await startReceiver();
  const endpoint = await world.ctx.merchant.post('/v1/webhook').set('X-API-Key', world.ctx.orgA.apiKey).send({ name: 'x402 orders', url: receiver.url('/hooks'), events: ['order.paid'] });
  expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(201);
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await world?.close();
});

describe('Kassa as the facilitator of @x402/express, paid by @x402/fetch with the agent wallet signer', () => {
  it('supported: the organization\'s receiving-wallet chains and the relayer; another key without a wallet gets none', async () => {
    const supported = await world.facilitator().getSupported();
    expect(supported.kinds).toEqual([{ x402Version: 2, scheme: 'exact', network: world.network }]);
    expect(supported.signers).toEqual({ 'eip155:*': [world.relayer] });
    expect((await world.facilitator(world.ctx.orgB.apiKey).getSupported()).kinds).toEqual([]);
    const unauthenticated = await fetch(`${world.merchantUrl}/v1/x402/supported`);
    expect(unauthenticated.status).toBe(401);
  });

  it('serves the resource, moves the funds once, records a PAID order, a verified order.paid webhook and the history entry', async () => {
    const before = { agent: await world.balanceOf(world.agentWallet), merchant: await world.balanceOf(world.payTo) };
    const res = await payingFetch()(`${merchantApp.url}/report`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ report: 'sunny' });
    const settlement = decodePaymentResponseHeader(res.headers.get('PAYMENT-RESPONSE')!);
    expect(settlement).toMatchObject({ success: true, network: world.network, payer: world.agentWallet });
    expect(settlement.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await world.balanceOf(world.agentWallet)).toBe(before.agent - USDC(1));
    expect(await world.balanceOf(world.payTo)).toBe(before.merchant + USDC(1));

    const order = (await ordersOfA()).find((o) => o.txHash === settlement.transaction);
    expect(order).toMatchObject({ status: 'PAID', provider: 'CRYPTO', chain: world.network, fromAddress: world.agentWallet, amountCents: 1_000_000, currency: 'USDC' });
    const customers = (await world.ctx.merchant.get('/v1/customers').set('X-API-Key', world.ctx.orgA.apiKey)).body.data.records as any[];
    expect(customers.map((c) => c.email)).toContain(x402CustomerEmail(world.agentWallet));

    // The merchant's webhook endpoint gets order.paid, signed by Kassa and verified with the SDK.
    const worker = new DeliveryWorker(new KnexWebhookDeliveryRepository(world.ctx.testDb.database.db), world.ctx.services.signingKeys, new UrlGuard({ allowLoopback: true }), world.ctx.clock, createLogger({ level: 'silent' }), { timeoutMs: 2000, ca: RECEIVER_CERT, random: () => 0.5 });
    expect(await worker.runOnce()).toBeGreaterThanOrEqual(1);
    const keys = (await world.ctx.platform.get('/v1/webhooks/signing-key')).body;
    const delivery = receiver.received.find((r) => r.json?.data?.order?.orderId === order.orderId);
    expect(delivery).toBeDefined();
    const event = verifyWebhook<OrderWebhookEvent>(delivery!.rawBody, delivery!.headers as Record<string, string>, keys, { now: world.ctx.clock.now() });
    expect(event.type).toBe('order.paid');
    expect(event.data.order).toMatchObject({ status: 'PAID', provider: 'CRYPTO', crypto: { txHash: settlement.transaction, chainId: world.network } });
    // CRYPTO: the payment is the transfer (txHash); the settlement id stays Kassa's own.
    expect(event.data.order).toMatchObject({ providerPaymentId: null, providerStatus: null });
    expect(order).toMatchObject({ providerPaymentId: null, providerStatus: null });

    // The wallet's history names what was paid for.
    const history = await world.agent.history({ limit: 5 });
    expect(history[0]).toMatchObject({
      status: 'signed',
      resourceUrl: `${merchantApp.url}/report`,
      amount: '1000000',
      asset: 'USDC',
      chainId: world.chain.chainId,
      destination: world.payTo,
    });
  });

  it('refuses a 6 USDC resource before signing (default policy: at most 5 USDC), with a clear error; nothing moves', async () => {
    const before = await world.balanceOf(world.agentWallet);
    const ordersBefore = (await ordersOfA()).length;
    const error = await payingFetch()(`${merchantApp.url}/expensive`).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(error?.message).toContain('Kassa agent wallet refused to sign the x402 payment (403 FORBIDDEN)');
    expect(await world.balanceOf(world.agentWallet)).toBe(before);
    expect((await ordersOfA()).length).toBe(ordersBefore);
    const [denied] = await world.agent.history({ limit: 1 });
    expect(denied).toMatchObject({ status: 'denied', amount: '6000000', resourceUrl: `${merchantApp.url}/expensive` });
  });

  it('refuses a replayed payment: the same PAYMENT-SIGNATURE again gets 402 and moves nothing', async () => {
    let paymentHeader: string | undefined;
    const recording: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      paymentHeader ??= request.headers.get('PAYMENT-SIGNATURE') ?? undefined;
      return fetch(request);
    };
    expect((await payingFetch(recording)(`${merchantApp.url}/report`)).status).toBe(200);
    expect(paymentHeader).toBeDefined();
    const balance = await world.balanceOf(world.agentWallet);
    const orders = (await ordersOfA()).length;
    const replay = await fetch(`${merchantApp.url}/report`, { headers: { 'PAYMENT-SIGNATURE': paymentHeader! } });
    expect(replay.status).toBe(402);
    expect(await world.balanceOf(world.agentWallet)).toBe(balance);
    expect((await ordersOfA()).length).toBe(orders);
  });

  it('refuses an expired authorization: verify says valid_before, nothing is settled', async () => {
    const balance = await world.balanceOf(world.agentWallet);
    // The payment is signed now, then reaches the facilitator after its validBefore (Kassa's clock).
    const late: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      if (request.headers.has('PAYMENT-SIGNATURE')) world.ctx.clock.set(Date.now() + 3_600_000);
      return fetch(request);
    };
    const started = world.ctx.clock.now();
    try {
      const res = await payingFetch(late)(`${merchantApp.url}/report`);
      expect(res.status).toBe(402);
    } finally {
      world.ctx.clock.set(started);
    }
    expect(await world.balanceOf(world.agentWallet)).toBe(balance);
  });
});

describe('settling one payload', () => {
  /** A payment payload for `/report`, signed through the official client, not yet sent. */
  async function signedPayload() {
    const res = await fetch(`${merchantApp.url}/report`);
    expect(res.status).toBe(402);
    const { x402HTTPClient } = await import('@x402/fetch');
    const client = recordPaymentContext(new x402Client().setSpendControls(false), signer).register('eip155:*', new ExactEvmScheme(signer));
    const http = new x402HTTPClient(client);
    const required = http.getPaymentRequiredResponse((name) => res.headers.get(name), await res.json().catch(() => undefined));
    const payload = await client.createPaymentPayload(required);
    return { payload, requirements: payload.accepted };
  }

  it('twice in a row moves funds once and succeeds once (the second: nonce already used, as the official facilitator); verify then refuses it', async () => {
    const { payload, requirements } = await signedPayload();
    const facilitator = world.facilitator();
    expect(await facilitator.verify(payload, requirements)).toMatchObject({ isValid: true, payer: world.agentWallet });
    const balance = await world.balanceOf(world.agentWallet);
    const first = await facilitator.settle(payload, requirements);
    const second = await facilitator.settle(payload, requirements);
    expect(first).toMatchObject({ success: true, network: world.network });
    expect(second).toMatchObject({ success: false, errorReason: 'invalid_exact_evm_nonce_already_used', transaction: '' });
    expect(await world.balanceOf(world.agentWallet)).toBe(balance - USDC(1));
    expect((await ordersOfA()).filter((o) => o.txHash === first.transaction)).toHaveLength(1);
    expect(await facilitator.verify(payload, requirements)).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_nonce_already_used' });

    // The lost answer is looked up, not settled again: the settlement, its transaction and order.
    const authorization = (payload.payload as { authorization: { from: string; nonce: string } }).authorization;
    const query = { network: world.network, asset: world.token, payer: authorization.from.toLowerCase(), nonce: authorization.nonce };
    const lookup = (q: Record<string, string>, key = world.ctx.orgA.apiKey) => world.ctx.merchant.get('/v1/x402/settlements').query(q).set('X-API-Key', key);
    const found = await lookup(query);
    expect(found.status, JSON.stringify(found.body)).toBe(200);
    const order = (await ordersOfA()).find((o) => o.txHash === first.transaction);
    expect(found.body.data).toMatchObject({ status: 'SETTLED', network: world.network, payer: world.agentWallet, payTo: world.payTo, amount: '1000000', transaction: first.transaction, orderId: order.orderId, errorReason: null });
    expect((await lookup({ ...query, nonce: `0x${'0'.repeat(64)}` })).status).toBe(404);
    expect((await lookup(query, world.ctx.orgB.apiKey)).status).toBe(404);
    expect((await lookup({ ...query, network: 'eip155:1' })).status).toBe(404);
    expect((await lookup({ ...query, nonce: 'nope' })).status).toBe(400);
  });

  it('an expired authorization is refused by verify and settle (valid_before), nothing moves', async () => {
    const { payload, requirements } = await signedPayload();
    const facilitator = world.facilitator();
    const balance = await world.balanceOf(world.agentWallet);
    const started = world.ctx.clock.now();
    world.ctx.clock.set(Number((payload.payload as { authorization: { validBefore: string } }).authorization.validBefore) * 1000);
    try {
      expect(await facilitator.verify(payload, requirements)).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_payload_authorization_valid_before' });
      expect(await facilitator.settle(payload, requirements)).toMatchObject({ success: false, errorReason: 'invalid_exact_evm_payload_authorization_valid_before', transaction: '' });
    } finally {
      world.ctx.clock.set(started);
    }
    expect(await world.balanceOf(world.agentWallet)).toBe(balance);
  });

  it('accepts authorization value, validAfter and validBefore written as 0x hex integers (as the official facilitator) and settles them once', async () => {
    const { payload, requirements } = await signedPayload();
    const auth = (payload.payload as { authorization: Record<string, string> }).authorization;
    const hex = (v: string) => `0x${BigInt(v).toString(16)}`;
    const hexed = { ...payload, payload: { ...payload.payload, authorization: { ...auth, value: hex(auth.value!), validAfter: hex(auth.validAfter!), validBefore: hex(auth.validBefore!) } } };
    const facilitator = world.facilitator();
    expect(await facilitator.verify(hexed, requirements)).toMatchObject({ isValid: true, payer: world.agentWallet });
    const balance = await world.balanceOf(world.agentWallet);
    expect(await facilitator.settle(hexed, requirements)).toMatchObject({ success: true });
    expect(await world.balanceOf(world.agentWallet)).toBe(balance - USDC(1));
    // The decimal form is the same authorization: refused as already used.
    expect(await facilitator.settle(payload, requirements)).toMatchObject({ success: false, errorReason: 'invalid_exact_evm_nonce_already_used' });
    // Out of uint256: refused with the code of a malformed authorization.
    const huge = { ...payload, payload: { ...payload.payload, authorization: { ...auth, value: `0x1${'0'.repeat(64)}` } } };
    expect(await facilitator.verify(huge, requirements)).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_authorization_value' });
  });

  it('refuses smart-contract wallet signatures with reason codes: ERC-6492 eip6492_factory_not_allowed, other non-ECDSA (ERC-1271) invalid_exact_evm_signature', async () => {
    const { payload, requirements } = await signedPayload();
    const inner = (payload.payload as { signature: `0x${string}` }).signature;
    const with6492 = { ...payload, payload: { ...payload.payload, signature: serializeErc6492Signature({ address: world.relayer, data: '0xdeadbeef', signature: inner }) } };
    const erc1271 = { ...payload, payload: { ...payload.payload, signature: `${inner}${'ab'.repeat(40)}` } };
    const facilitator = world.facilitator();
    expect(await facilitator.verify(with6492, requirements)).toMatchObject({ isValid: false, invalidReason: 'eip6492_factory_not_allowed', payer: world.agentWallet });
    expect(await facilitator.settle(with6492, requirements)).toMatchObject({ success: false, errorReason: 'eip6492_factory_not_allowed' });
    expect(await facilitator.verify(erc1271, requirements)).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_signature', payer: world.agentWallet });
  });

  it('another organization\'s key cannot settle a payment to this organization\'s wallet', async () => {
    const { payload, requirements } = await signedPayload();
    const result = await world.facilitator(world.ctx.orgB.apiKey).verify(payload, requirements);
    expect(result).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_recipient_mismatch' });
  });

  describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('concurrent settles', 'postgresOnly'), () => {
    it('8 concurrent settles of one payload, 5 rounds: one success, funds move once per payload, one order, one transaction', async () => {
      for (let round = 0; round < 5; round++) {
        const { payload, requirements } = await signedPayload();
        const balance = await world.balanceOf(world.agentWallet);
        const results = await Promise.all(Array.from({ length: 8 }, () => world.facilitator().settle(payload, requirements)));
        const successes = results.filter((r) => r.success);
        expect(successes).toHaveLength(1);
        expect(results.filter((r) => !r.success).map((r) => r.errorReason)).toEqual(Array(7).fill('invalid_exact_evm_nonce_already_used'));
        expect(await world.balanceOf(world.agentWallet)).toBe(balance - USDC(1));
        expect((await ordersOfA()).filter((o) => o.txHash === successes[0]!.transaction)).toHaveLength(1);
      }
    });

    it('the same PAYMENT-SIGNATURE 3 times at once to an @x402/express route, 20 rounds: one 200 and two 402s each round, funds move once', async () => {
      const cheap = await world.startMerchantApp({ 'GET /cheap': { units: USDC(0.01), description: 'Cheap', body: { ok: true } } });
      const failures: string[] = [];
      try {
        for (let round = 0; round < 20; round++) {
          const terms = await fetch(`${cheap.url}/cheap`);
          const client = recordPaymentContext(new x402Client().setSpendControls(false), signer).register('eip155:*', new ExactEvmScheme(signer));
          const payload = await client.createPaymentPayload(decodePaymentRequiredHeader(terms.headers.get('PAYMENT-REQUIRED')!));
          const header = encodePaymentSignatureHeader(payload);
          const balance = await world.balanceOf(world.agentWallet);
          const statuses = (await Promise.all([0, 1, 2].map(() => fetch(`${cheap.url}/cheap`, { headers: { 'PAYMENT-SIGNATURE': header } })))).map((r) => r.status).sort();
          const moved = balance - (await world.balanceOf(world.agentWallet));
          if (statuses.join() !== '200,402,402' || moved !== USDC(0.01)) failures.push(`round ${round}: ${statuses.join()} moved ${moved}`);
        }
      } finally {
        await cheap.close();
      }
      expect(failures).toEqual([]);
    }, 300_000);
  });
});
