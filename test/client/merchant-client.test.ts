/**
 * The merchant SDK against the real merchant app on an ephemeral port: sessions end to end, the
 * Idempotency-Key reused by the client's own retries (response lost after the server committed,
 * timeouts, 503), bounded attempts, and typed errors with the envelope's code and request id.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantClient, KassaApiError, KassaNetworkError, type MerchantClient } from '../../src/client/index.js';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
let server: Server;
let baseUrl: string;
let priceId: string;

beforeAll(async () => {
  ctx = await createTestContext();
  server = ctx.apps.merchant.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Coffee beans', description: '1 kg' });
  priceId = (await ctx.services.catalog.createPrice(product.id, { amount: 2500, currency: 'USD', pricingName: 'One bag' })).id;
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await ctx?.close();
});

interface Sent {
  method: string;
  path: string;
  idempotencyKey: string | null;
  apiKey: string | null;
}

/** A fetch that records what it sends; `misbehave` decides, per attempt, how to spoil the answer. */
function recordingFetch(misbehave?: (attempt: number, real: () => Promise<Response>, signal: AbortSignal) => Promise<Response>) {
  const sent: Sent[] = [];
  const fetchImpl = async (request: Request): Promise<Response> => {
    sent.push({
      method: request.method,
      path: new URL(request.url).pathname,
      idempotencyKey: request.headers.get('idempotency-key'),
      apiKey: request.headers.get('x-api-key'),
    });
    const real = () => fetch(request);
    return misbehave ? misbehave(sent.length, real, request.signal) : real();
  };
  return { sent, fetch: fetchImpl };
}

const client = (extra: Partial<Parameters<typeof createMerchantClient>[0]> = {}): MerchantClient =>
  createMerchantClient({ baseUrl, apiKey: ctx.orgA.apiKey, retryDelayMs: 1, ...extra });

const sessionCount = async (): Promise<number> =>
  Number((await ctx.testDb.database.db('checkout_sessions').where({ org_id: ctx.orgA.orgId }).count<{ count: string }[]>({ count: '*' }))[0]!.count);

async function caught(promise: Promise<unknown>): Promise<KassaApiError> {
  const error = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(KassaApiError);
  return error as KassaApiError;
}

describe('createMerchantClient: checkout sessions', () => {
  it('creates, reads and expires a session, with a generated Idempotency-Key on creation', async () => {
    const rec = recordingFetch();
    const kassa = client({ fetch: rec.fetch });
    const created = await kassa.createCheckoutSession({ pricingId: priceId, quantity: 2, customerEmail: 'ada@example.com' });
    expect(created).toMatchObject({ status: 'CREATED', amount: 5000, currency: 'USD', quantity: 2, customerEmail: 'ada@example.com' });
    expect(created.url).toMatch(/^http:\/\/merchant\.test\/checkout\//);
    expect(rec.sent[0]).toMatchObject({ method: 'POST', path: '/v1/checkout-sessions', apiKey: ctx.orgA.apiKey });
    expect(rec.sent[0]!.idempotencyKey).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

    const read = await kassa.getCheckoutSession(created.id);
    expect(read).toEqual(created);

    const expired = await kassa.expireCheckoutSession(created.id);
    expect(expired).toMatchObject({ id: created.id, status: 'EXPIRED', url: null });
    expect((await kassa.getCheckoutSession(created.id)).status).toBe('EXPIRED');
    // Reads carry no Idempotency-Key; every request carries the API key.
    expect(rec.sent.slice(1).map((s) => s.idempotencyKey)).toEqual([null, null, null]);
    expect(new Set(rec.sent.map((s) => s.apiKey))).toEqual(new Set([ctx.orgA.apiKey]));
  });

  it('sends a fresh key per call, and the caller’s key when given (a repeat returns the same session)', async () => {
    const rec = recordingFetch();
    const kassa = client({ fetch: rec.fetch });
    const a = await kassa.createCheckoutSession({ pricingId: priceId });
    const b = await kassa.createCheckoutSession({ pricingId: priceId });
    expect(a.id).not.toBe(b.id);
    expect(rec.sent[0]!.idempotencyKey).not.toBe(rec.sent[1]!.idempotencyKey);

    const first = await kassa.createCheckoutSession({ pricingId: priceId }, { idempotencyKey: 'order-10042' });
    const again = await kassa.createCheckoutSession({ pricingId: priceId }, { idempotencyKey: 'order-10042' });
    expect(again.id).toBe(first.id);
    expect(rec.sent.slice(2).map((s) => s.idempotencyKey)).toEqual(['order-10042', 'order-10042']);
  });

  it('retries with the SAME key when the answer is lost after the server created the session: one session', async () => {
    const before = await sessionCount();
    // Attempt 1 reaches the server (which commits), then the connection "drops" before the answer.
    const rec = recordingFetch(async (attempt, real) => {
      const response = await real();
      if (attempt === 1) {
        expect(response.status).toBe(201);
        throw new TypeError('fetch failed: socket hang up');
      }
      return response;
    });
    const session = await client({ fetch: rec.fetch }).createCheckoutSession({ pricingId: priceId, merchantReference: 'lost-answer' });
    expect(rec.sent).toHaveLength(2);
    expect(rec.sent[1]!.idempotencyKey).toBe(rec.sent[0]!.idempotencyKey);
    expect(session.merchantReference).toBe('lost-answer');
    expect(await sessionCount()).toBe(before + 1);
  });

  it('retries with the same key after a timeout (the first attempt answered too late)', async () => {
    const before = await sessionCount();
    const rec = recordingFetch(async (attempt, real, signal) => {
      const response = await real();
      if (attempt === 1) {
        // The server answered, but after the client's deadline: wait for the abort.
        await new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
      }
      return response;
    });
    const session = await client({ fetch: rec.fetch, timeoutMs: 3000 }).createCheckoutSession({ pricingId: priceId });
    expect(rec.sent).toHaveLength(2);
    expect(rec.sent[1]!.idempotencyKey).toBe(rec.sent[0]!.idempotencyKey);
    expect(await sessionCount()).toBe(before + 1);
    expect(await client().getCheckoutSession(session.id)).toMatchObject({ id: session.id });
  });

  it('retries with the same key after a 503 (exponential backoff, bounded), then succeeds', async () => {
    const rec = recordingFetch(async (attempt, real) => {
      const response = await real();
      if (attempt <= 2) {
        return new Response(JSON.stringify({ success: false, message: 'Service temporarily unavailable', error: { code: 'SERVICE_UNAVAILABLE', message: 'Service temporarily unavailable' } }), {
          status: 503,
          headers: { 'content-type': 'application/json', 'x-request-id': 'req_unavailable' },
        });
      }
      return response;
    });
    const session = await client({ fetch: rec.fetch, retries: 2 }).createCheckoutSession({ pricingId: priceId });
    expect(rec.sent).toHaveLength(3);
    expect(new Set(rec.sent.map((s) => s.idempotencyKey)).size).toBe(1);
    expect(session.status).toBe('CREATED');
  });

  it('stops after retries + 1 attempts: the last 503 is thrown as SERVICE_UNAVAILABLE, a dead network as KassaNetworkError', async () => {
    const unavailable = recordingFetch(async () =>
      new Response(JSON.stringify({ success: false, message: 'down', error: { code: 'SERVICE_UNAVAILABLE', message: 'down' } }), {
        status: 503,
        headers: { 'content-type': 'application/json', 'x-request-id': 'req_down_12345' },
      }),
    );
    const error = await caught(client({ fetch: unavailable.fetch, retries: 3 }).createCheckoutSession({ pricingId: priceId }));
    expect(unavailable.sent).toHaveLength(4);
    expect(error).toMatchObject({ status: 503, code: 'SERVICE_UNAVAILABLE', message: 'down', requestId: 'req_down_12345' });

    const dead = recordingFetch(async () => {
      throw new TypeError('fetch failed');
    });
    const failure = await client({ fetch: dead.fetch, retries: 2 }).createCheckoutSession({ pricingId: priceId }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(KassaNetworkError);
    expect(failure).toMatchObject({ attempts: 3, timedOut: false });
    expect(new Set(dead.sent.map((s) => s.idempotencyKey)).size).toBe(1);
  });

  it('sends other writes once: a webhook endpoint creation is not repeated after a network error', async () => {
    const rec = recordingFetch(async () => {
      throw new TypeError('fetch failed');
    });
    const failure = await client({ fetch: rec.fetch, retries: 5 })
      .createWebhookEndpoint({ name: 'shop', url: 'https://shop.example.com/hooks', events: [], enabled: true })
      .catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(KassaNetworkError);
    expect(failure).toMatchObject({ attempts: 1 });
    expect(rec.sent).toHaveLength(1);
  });

  it('times out a silent server and reports it as such', async () => {
    const rec = recordingFetch(
      (_attempt, _real, signal) =>
        new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
    );
    const failure = await client({ fetch: rec.fetch, timeoutMs: 50, retries: 1 })
      .getOrder('ORD_000000000000000000000000')
      .catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(KassaNetworkError);
    expect(failure).toMatchObject({ timedOut: true, attempts: 2 });
    expect((failure as Error).message).toContain('no answer within 50 ms');
  });
});

describe('createMerchantClient: typed errors', () => {
  it('400 VALIDATION_ERROR names the field and carries the request id', async () => {
    const rec = recordingFetch();
    let requestId: string | null = null;
    const kassa = client({
      fetch: async (request) => {
        const response = await rec.fetch(request);
        requestId = response.headers.get('x-request-id');
        return response;
      },
    });
    const error = await caught(kassa.createCheckoutSession({ pricingId: priceId, quantity: 0 }));
    expect(error.status).toBe(400);
    expect(error.code).toBe('VALIDATION_ERROR');
    expect(error.message).toContain('quantity');
    expect(error.requestId).toBe(requestId);
    expect(error.requestId).toMatch(/^req_/);
    // A client error is final: not retried.
    expect(rec.sent).toHaveLength(1);
  });

  it('401 UNAUTHORIZED for a wrong API key', async () => {
    const error = await caught(client({ apiKey: 'kassa_live_not_a_real_key' }).me());
    expect(error).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
  });

  it('404 NOT_FOUND for an unknown order and for another organization’s session', async () => {
    expect(await caught(client().getOrder('ORD_000000000000000000000000'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    const theirs = await createMerchantClient({ baseUrl, apiKey: ctx.orgB.apiKey }).createCheckoutSession({
      pricingData: { amount: 100, currency: 'USD', productData: { name: 'Tea' } },
    });
    expect(await caught(client().getCheckoutSession(theirs.id))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });

  it('409 IDEMPOTENCY_KEY_REUSED for a key reused with other parameters, 409 CONFLICT for expiring a paid session', async () => {
    const kassa = client();
    await kassa.createCheckoutSession({ pricingId: priceId, quantity: 1 }, { idempotencyKey: 'reused-key' });
    const reused = await caught(kassa.createCheckoutSession({ pricingId: priceId, quantity: 3 }, { idempotencyKey: 'reused-key' }));
    expect(reused).toMatchObject({ status: 409, code: 'IDEMPOTENCY_KEY_REUSED' });

    const session = await kassa.createCheckoutSession({ pricingId: priceId, customerEmail: 'grace@example.com' });
    const token = new URL(session.url!).pathname.split('/')[2];
    const paid = await ctx.merchant
      .post(`/checkout/${token}/pay`)
      .type('form')
      .send({ cardNumber: '4242 4242 4242 4242', expiry: '12/30', cvc: '123' });
    expect(paid.status).toBe(303);
    expect((await kassa.getCheckoutSession(session.id)).status).toBe('COMPLETE');
    const conflict = await caught(kassa.expireCheckoutSession(session.id));
    expect(conflict).toMatchObject({ status: 409, code: 'CONFLICT' });
    const order = await kassa.getOrder((await kassa.getCheckoutSession(session.id)).orderId!);
    expect(order).toMatchObject({ status: 'PAID', amountCents: 2500, currency: 'USD' });
  });
});
