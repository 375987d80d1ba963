/**
 * Usage billing from traces, end to end, against a running Kassa started with a test clock:
 *
 *   TEST_CLOCK=true npm start            # a development deployment (production refuses it)
 *   KASSA_API_KEY=ak_… ADMIN_TOKEN=… npx tsx scripts/examples/usage-billing.ts
 *
 *   1. a local model server, OpenAI-shaped (`POST /v1/chat/completions`), that answers each call
 *      with its token usage and keeps the total it returned;
 *   2. an app instrumented with OpenLLMetry (the official `@traceloop/node-server-sdk`, the
 *      official `openai` client) exporting its spans to Kassa's OTLP endpoint; each end user's
 *      calls run inside `withAssociationProperties({ user_id })`, so every span carries
 *      `traceloop.association.properties.user_id`;
 *   3. a meter over that project's spans: the sum of `gen_ai.usage.total_tokens` per customer,
 *      the customer found by that attribute through their `externalId`;
 *   4. a monthly plan (5.00 USD) with a metered component: 0.04 USD per 1,000 tokens
 *      (`unitAmountDecimal` "0.004" cents a token), 10,000 tokens included per period;
 *   5. a subscription bought on the sandbox checkout page by the customer `user_ada`;
 *   6. the app's calls for user_ada (and for someone who is not a customer: counted for nobody);
 *      the meter's quantity for user_ada equals the tokens the model server returned to her;
 *   7. the period end: the test clock moved past the period's end and its 1-hour grace window
 *      (admin API `POST /v1/test-clock/advance`); the renewal job charges the fee of the next
 *      period and one USAGE line for the tokens, announced by `order.paid` (received through the
 *      admin CLI's local loop, `webhook listen --forward`, and verified); the line is checked
 *      against the tokens the model server returned and the documented rounding (half up, once).
 *
 * KASSA_BASE_URL / KASSA_API_URL / ADMIN_URL default to the ports `npm start` uses; the admin
 * token comes from ADMIN_TOKEN or <DATA_DIR>/admin-token. Prints one JSON line per step.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as traceloop from '@traceloop/node-server-sdk';
import express from 'express';
import OpenAI from 'openai';
import { createMerchantClient, verifyWebhook, type OrderWebhookEvent, type SigningKeyResponse, type WebhookEvent } from '../../src/client/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const log = (step: string, details: Record<string, unknown> = {}) => console.log(JSON.stringify({ step, ...details }));
const baseUrl = process.env.KASSA_BASE_URL ?? 'http://localhost:3000';
const apiUrl = process.env.KASSA_API_URL ?? 'http://localhost:3001';
const adminUrl = process.env.ADMIN_URL ?? `http://127.0.0.1:${process.env.ADMIN_PORT ?? 3002}`;
const apiKey = process.env.KASSA_API_KEY ?? '';
if (!apiKey) throw new Error('set KASSA_API_KEY');
const adminToken = process.env.ADMIN_TOKEN ?? (await readFile(path.join(process.env.DATA_DIR ?? path.join(root, 'data'), 'admin-token'), 'utf8')).trim();
const waitSeconds = Number(process.env.KASSA_EXAMPLE_TIMEOUT_SECONDS ?? 90);

const PRICE = { feeCents: 500, includedTokens: 10_000, centsPerToken: '0.004' };

async function call(base: string, method: string, route: string, body: unknown, headers: Record<string, string>): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}${route}`, { method, headers: { ...headers, ...(body ? { 'Content-Type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
  const json = (await res.json()) as { data: Record<string, unknown> };
  if (!res.ok) throw new Error(`${method} ${route} answered ${res.status}: ${JSON.stringify(json)}`);
  return json.data;
}
const admin = (method: string, route: string, body?: unknown) => call(adminUrl, method, route, body, { Authorization: `Bearer ${adminToken}` });
const merchant = (method: string, route: string, body?: unknown) => call(baseUrl, method, route, body, { 'X-API-Key': apiKey });
const until = async <T>(what: string, probe: () => Promise<T | undefined>): Promise<T> => {
  const deadline = Date.now() + waitSeconds * 1000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${waitSeconds} s`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
};

const kassa = createMerchantClient({ baseUrl, apiKey });
const { orgId } = await kassa.me();

// --- 1. The local model server --------------------------------------------------------------
let served = 0; // the tokens the model server returned, every call
let calls = 0;
const modelServer = http.createServer((req, res) => {
  let text = '';
  req.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  req.on('end', () => {
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":{"message":"not found"}}');
      return;
    }
    const body = JSON.parse(text) as { model: string; messages: Array<{ content: string }> };
    const n = ++calls;
    const prompt = 40 * body.messages.reduce((words, m) => words + m.content.split(/\s+/).length, 0);
    const completion = 1000 + ((n * 617) % 900);
    served += prompt + completion;
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(
      JSON.stringify({
        id: `chatcmpl-${n}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: `Answer ${n}.`, refusal: null }, logprobs: null, finish_reason: 'stop' }],
        usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
      }),
    );
  });
});
await new Promise<void>((resolve) => modelServer.listen(0, '127.0.0.1', resolve));
const modelUrl = `http://127.0.0.1:${(modelServer.address() as AddressInfo).port}/v1`;
log('model server listening', { url: modelUrl });

// --- webhook receiver + the local loop (as scripts/examples/merchant-integration.ts) ----------
const signingKeys = (await (await fetch(`${apiUrl}/v1/webhooks/signing-key`)).json()) as SigningKeyResponse;
const renewals: OrderWebhookEvent[] = [];
// The deployment's test clock runs ahead once moved: deliveries carry its time, so the receiver
// checks their timestamps against it (a production receiver uses its own clock, the default).
let kassaShiftMs = 0;
const app = express();
app.post('/webhooks/kassa', express.raw({ type: 'application/json', limit: '1mb' }), (req, res) => {
  let event: WebhookEvent;
  try {
    event = verifyWebhook(req.body as Buffer, req.headers, signingKeys, { expectedOrganizationId: orgId, now: Date.now() + kassaShiftMs });
  } catch (err) {
    log('webhook rejected', { message: err instanceof Error ? err.message : String(err) });
    res.status(401).end();
    return;
  }
  res.status(204).end();
  if (event.type === 'order.paid') renewals.push(event);
});
const receiver = http.createServer(app);
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/kassa`;

let listener: ChildProcess | undefined;
try {
  listener = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/admin.ts'), 'webhook', 'listen', '--org', orgId, '--forward', receiverUrl], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ADMIN_URL: adminUrl, ADMIN_TOKEN: adminToken },
  });
  await new Promise<void>((resolve, reject) => {
    let output = '';
    listener!.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (/listening/i.test(output)) resolve();
    });
    listener!.once('exit', (code) => reject(new Error(`webhook listen exited (${code}): ${output.trim()}`)));
  });

  // --- 2. The instrumented app ---------------------------------------------------------------
  const project = await admin('POST', `/v1/orgs/${orgId}/telemetry-projects`, { name: 'Support bot' });
  const telemetryKey = await admin('POST', `/v1/orgs/${orgId}/telemetry-keys`, { projectId: project.projectId, name: 'support bot' });
  traceloop.initialize({
    appName: 'support-bot',
    baseUrl: `${apiUrl}/v1/otlp`,
    headers: { Authorization: `Bearer ${String(telemetryKey.key)}` },
    disableBatch: true,
    silenceInitializationMessage: true,
    traceloopSyncEnabled: false,
    instrumentModules: { openAI: OpenAI as never },
  });
  const openai = new OpenAI({ apiKey: 'sk-local', baseURL: modelUrl });
  const ask = (userId: string, question: string) =>
    traceloop.withAssociationProperties({ user_id: userId }, () =>
      traceloop.withWorkflow({ name: 'support_answer' }, () => openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: question }] })),
    );
  log('app instrumented', { projectId: project.projectId });

  // --- 3. The meter over the spans ------------------------------------------------------------
  const meter = await merchant('POST', '/v1/meters', {
    name: 'Model tokens',
    source: 'SPANS',
    filter: { projectId: project.projectId },
    aggregation: 'sum',
    property: 'gen_ai.usage.total_tokens',
    customerAttribute: 'traceloop.association.properties.user_id',
  });
  log('meter created', { meterId: meter.id, rollupStatus: meter.rollupStatus });

  // --- 4. The metered plan ---------------------------------------------------------------------
  const product = await admin('POST', `/v1/orgs/${orgId}/products`, { name: 'Support bot Pro' });
  const price = await admin('POST', `/v1/products/${String(product.productId)}/prices`, {
    amount: PRICE.feeCents,
    currency: 'USD',
    pricingType: 'SUBSCRIPTION',
    billingInterval: 'MONTH',
    meteredComponents: [{ meterId: meter.id, includedUnits: PRICE.includedTokens, pricing: { model: 'PER_UNIT', unitAmountDecimal: PRICE.centsPerToken } }],
  });
  log('metered price created', { pricingId: price.pricingId, feeCents: PRICE.feeCents, includedTokens: PRICE.includedTokens, centsPerToken: PRICE.centsPerToken });

  // --- 5. The subscription, bought on the sandbox checkout page ---------------------------------
  const session = await kassa.createCheckoutSession({ pricingId: String(price.pricingId), customerEmail: 'ada@example.com', customerExternalId: 'user_ada' } as never, { idempotencyKey: randomUUID() });
  const page = await fetch(session.url!);
  const action = /<form method="post" action="([^"]+\/pay)"/.exec(await page.text())?.[1];
  if (!action) throw new Error('the hosted page offered no payment form');
  const paid = await fetch(new URL(action, session.url!), {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ cardNumber: '4242 4242 4242 4242', expiry: '12/30', cvc: '123' }),
    redirect: 'manual',
  });
  if (paid.status !== 303) throw new Error(`the payment form answered ${paid.status}`);
  const firstOrder = await until('the first order.paid', async () => renewals[0]);
  const subscription = await until('the subscription', async () => (await kassa.listSubscriptions({ customer_id: firstOrder.data.order.customerId! } as never)).records[0]);
  log('subscribed', { subscriptionId: subscription.id, customerId: subscription.customerId, currentPeriodEnd: subscription.currentPeriodEnd, firstOrderCents: firstOrder.data.order.amountCents });

  // --- 6. Usage: the app's model calls ---------------------------------------------------------
  let adaTokens = 0;
  for (let i = 0; i < 7; i++) {
    const completion = await ask('user_ada', `Where is my order number ${i}? It has not arrived yet and I am worried about it.`);
    adaTokens += completion.usage!.total_tokens;
  }
  const beforeStranger = served;
  await ask('visitor_without_account', 'Who are you?');
  await traceloop.forceFlush();
  if (beforeStranger !== adaTokens) throw new Error(`the app counted ${adaTokens} tokens, the model server returned ${beforeStranger}`);
  const since = subscription.createdAt;
  const measured = await until('the spans in the meter', async () => {
    const q = await merchant('GET', `/v1/meters/${String(meter.id)}/quantities?customer=user_ada&start=${encodeURIComponent(since)}&end=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`);
    return q.total === adaTokens ? (q.total as number) : undefined;
  });
  log('usage measured', { customer: 'user_ada', tokensReturnedByModelServer: beforeStranger, meterQuantity: measured, callsCountedForNobody: 1 });

  // --- 7. The period end ------------------------------------------------------------------------
  const seconds = Math.ceil((Date.parse(subscription.currentPeriodEnd!) - Date.now()) / 1000) + 3600 + 60;
  const clock = await admin('POST', '/v1/test-clock/advance', { seconds });
  kassaShiftMs = (clock.shiftSeconds as number) * 1000;
  log('test clock advanced past the period end and its grace hour', { now: clock.now });
  const renewal = await until('the renewal order.paid', async () => renewals.find((e) => e.data.order.orderId !== firstOrder.data.order.orderId)).catch(async (err: Error) => {
    // Say where it stopped: the subscription's state and the customer's orders.
    const now = await kassa.getSubscription(subscription.id);
    const orders = await kassa.listOrders({ customer_id: subscription.customerId } as never);
    throw new Error(`${err.message}; subscription ${JSON.stringify(now)}; orders ${JSON.stringify(orders.records.map((o) => [o.orderId, o.status, o.amountCents]))}`);
  });
  const order = await kassa.getOrder(renewal.data.order.orderId);
  const lines = (order as unknown as { lines: Array<{ kind: string; quantity: string | null; amountCents: number; usage: { meterId: string; includedUnits: number | string; billableQuantity: number | string } | null }> }).lines;
  const usage = lines.find((l) => l.kind === 'USAGE');
  const billable = Math.max(0, adaTokens - PRICE.includedTokens);
  // 0.004 cents a token, rounded once, half up: (billable × 4 + 500) ÷ 1000, in integers.
  const expectedCents = Math.floor((billable * 4 + 500) / 1000);
  const checks = {
    // Quantities are decimal strings (docs/order-lines.md).
    quantityIsTheTokensReturned: Number(usage?.quantity) === adaTokens,
    billableAfterIncluded: Number(usage?.usage?.billableQuantity) === billable,
    amountAtTheDocumentedRounding: usage?.amountCents === expectedCents,
    totalIsFeePlusUsage: order.amountCents === PRICE.feeCents + expectedCents,
  };
  log('renewal order paid', {
    orderId: order.orderId,
    status: order.status,
    amountCents: order.amountCents,
    lines: lines.map((l) => ({ kind: l.kind, quantity: l.quantity, amountCents: l.amountCents })),
    tokens: adaTokens,
    billableTokens: billable,
    usageCents: expectedCents,
    checks,
  });
  if (!Object.values(checks).every(Boolean)) throw new Error(`the renewal's usage line does not match the tokens returned: ${JSON.stringify(checks)}`);
  log('done');
} catch (err) {
  log('failed', { message: err instanceof Error ? err.message : String(err) });
  process.exitCode = 1;
} finally {
  listener?.kill('SIGTERM');
  receiver.closeAllConnections();
  receiver.close();
  modelServer.closeAllConnections();
  modelServer.close();
  await traceloop.forceFlush().catch(() => undefined);
}
