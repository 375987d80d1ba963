/**
 * A merchant integration, end to end, against a running Kassa (`npm start`, no extra settings):
 *
 *   1. start a webhook receiver that verifies every delivery from the RAW body (verifyWebhook);
 *   2. connect it through the local loop: the admin CLI's `webhook listen --forward`, which takes
 *      the organization's events from the server and POSTs them, signed exactly like deliveries,
 *      to this receiver (a machine without a public https URL cannot register an endpoint);
 *   3. create a checkout session with an Idempotency-Key (and show that a retry with the same key
 *      returns the same session instead of a second one);
 *   4. pay it on the hosted sandbox page the way a browser does (GET the page, POST its form with
 *      the test card 4242 4242 4242 4242);
 *   5. wait for the verified `order.paid` event, then read the order through the API (the webhook
 *      says "go look"; the API is the source of truth).
 *
 *   KASSA_API_KEY=ak_… npx tsx scripts/examples/merchant-integration.ts
 *
 * KASSA_BASE_URL / KASSA_API_URL default to the ports `npm start` uses. The CLI finds the admin
 * API and its token as usual (ADMIN_URL or ADMIN_PORT, ADMIN_TOKEN or <DATA_DIR>/admin-token), so
 * run this from the folder the server runs in. In production the receiver is instead registered
 * once at its public https URL (`kassa.createWebhookEndpoint({ url, events: ['order.paid'] })`)
 * and verifies deliveries with the very same code.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import express from 'express';
import { createMerchantClient, KassaApiError, verifyWebhook, WebhookVerificationError, type OrderWebhookEvent, type SigningKeyResponse, type WebhookEvent } from '../../src/client/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (!value) throw new Error(`set ${name}`);
  return value;
};
const log = (step: string, details: Record<string, unknown> = {}) => console.log(JSON.stringify({ step, ...details }));

const baseUrl = env('KASSA_BASE_URL', 'http://localhost:3000');
const apiUrl = env('KASSA_API_URL', 'http://localhost:3001');
const apiKey = env('KASSA_API_KEY');
const waitSeconds = Number(process.env.KASSA_EXAMPLE_TIMEOUT_SECONDS ?? 60);

const kassa = createMerchantClient({ baseUrl, apiKey });
// Whom deliveries must be for: one signing key serves every organization of a Kassa server, so the
// receiver also checks that a delivery names this organization (docs/webhooks.md).
const { orgId } = await kassa.me();

// --- 1. The webhook receiver ------------------------------------------------------------------
let signingKeys: SigningKeyResponse | undefined;
async function fetchSigningKeys(): Promise<SigningKeyResponse> {
  const res = await fetch(`${apiUrl}/v1/webhooks/signing-key`);
  if (!res.ok) throw new Error(`signing-key endpoint answered ${res.status}`);
  return (await res.json()) as SigningKeyResponse;
}

const seen = new Set<string>(); // a real receiver keeps this in its database (unique webhook-id)
let resolvePaid: (event: OrderWebhookEvent) => void;
const paid = new Promise<OrderWebhookEvent>((resolve) => (resolvePaid = resolve));

const app = express();
// express.raw, not express.json: the signature covers the exact bytes received.
app.post('/webhooks/kassa', express.raw({ type: 'application/json', limit: '1mb' }), async (req, res) => {
  let event: WebhookEvent;
  try {
    signingKeys ??= await fetchSigningKeys();
    try {
      event = verifyWebhook(req.body as Buffer, req.headers, signingKeys, { expectedOrganizationId: orgId });
    } catch (err) {
      // The key may have been rotated since we fetched it: refetch once, verify again.
      if (!(err instanceof WebhookVerificationError) || err.code !== 'invalid_signature') throw err;
      signingKeys = await fetchSigningKeys();
      event = verifyWebhook(req.body as Buffer, req.headers, signingKeys, { expectedOrganizationId: orgId });
    }
  } catch (err) {
    if (err instanceof WebhookVerificationError) {
      log('webhook rejected', { code: err.code });
      return res.status(401).json({ error: err.code });
    }
    return res.status(500).end(); // keys unreachable: Kassa retries later
  }
  const id = String(req.headers['webhook-id']);
  res.status(204).end(); // acknowledge first, work afterwards
  if (seen.has(id)) return;
  seen.add(id);
  log('webhook verified', { webhookId: id, type: event.type });
  if (event.type === 'order.paid') resolvePaid(event);
});

const receiver = http.createServer(app);
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/kassa`;
log('receiver listening', { url: receiverUrl });

let listener: ChildProcess | undefined;
try {
  // --- 2. The local loop: `npm run -s admin -- webhook listen --org ORG_… --forward <receiverUrl>` -
  const cli = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/admin.ts'), 'webhook', 'listen', '--org', orgId, '--forward', receiverUrl], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  listener = cli;
  // Listening starts "from now": wait until the CLI says it listens before paying.
  await new Promise<void>((resolve, reject) => {
    let output = '';
    cli.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (/listening/i.test(output)) resolve();
    });
    cli.once('exit', (code) => reject(new Error(`webhook listen exited (${code}): ${output.trim()}`)));
    setTimeout(() => reject(new Error(`webhook listen did not start within ${waitSeconds} s: ${output.trim()}`)), waitSeconds * 1000).unref();
  });
  log('forwarding events to the receiver', { orgId, command: `npm run -s admin -- webhook listen --org ${orgId} --forward ${receiverUrl}` });

  // --- 3. Create the checkout session, idempotently -------------------------------------------
  const idempotencyKey = `example-order-${randomUUID()}`;
  const purchase = {
    pricingData: { amount: 1500, currency: 'USD', productData: { name: 'Example T-shirt', description: 'Blue, size M' } },
    customerEmail: 'ada@example.com',
    merchantReference: `example-${Date.now()}`,
  };
  const session = await kassa.createCheckoutSession(purchase, { idempotencyKey });
  const again = await kassa.createCheckoutSession(purchase, { idempotencyKey });
  if (again.id !== session.id) throw new Error('a retry with the same Idempotency-Key created a second session');
  log('checkout session created', { sessionId: session.id, url: session.url, amount: session.amount, currency: session.currency, retrySameSession: true });

  // --- 4. Pay on the hosted page, as a browser would ------------------------------------------
  const page = await fetch(session.url!);
  const html = await page.text();
  // The payment form (the page also has a promotion-code form, issue 39).
  const action = /<form method="post" action="([^"]+\/pay)"/.exec(html)?.[1];
  if (!page.ok || !action) throw new Error(`the hosted page did not offer a payment form (HTTP ${page.status})`);
  const payment = await fetch(new URL(action, session.url!), {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ cardNumber: '4242 4242 4242 4242', expiry: '12/30', cvc: '123' }),
    redirect: 'manual',
  });
  if (payment.status !== 303) throw new Error(`the payment form answered ${payment.status}: ${(await payment.text()).slice(0, 300)}`);
  log('paid on the hosted page', { redirectedTo: payment.headers.get('location') });

  // --- 5. Wait for the verified order.paid, then read the order --------------------------------
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no order.paid webhook within ${waitSeconds} s`)), waitSeconds * 1000).unref());
  const event = await Promise.race([paid, timeout]);
  const order = await kassa.getOrder(event.data.order.orderId);
  if (order.status !== 'PAID' || order.merchantReference !== purchase.merchantReference) throw new Error(`unexpected order ${JSON.stringify(order)}`);
  log('order read through the API', { orderId: order.orderId, status: order.status, amountCents: order.amountCents, currency: order.currency, merchantReference: order.merchantReference });
  log('done');
} catch (err) {
  if (err instanceof KassaApiError) log('API error', { status: err.status, code: err.code, message: err.message, requestId: err.requestId });
  else log('failed', { message: err instanceof Error ? err.message : String(err) });
  process.exitCode = 1;
} finally {
  listener?.kill('SIGTERM');
  receiver.closeAllConnections();
  receiver.close();
}
