/**
 * The Stripe secrets never reach a log: a real server process (`src/main.ts`, debug level) with
 * Stripe as its card processor, whose Stripe refuses the key and echoes it back, is driven through
 * a card checkout creation and signed and forged events; its whole output is searched for both
 * secrets. Runs on the embedded database, or on PostgreSQL when TEST_DATABASE_URL is set.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import { http, newDeployment, provisionMerchant, startKassa, type KassaProcess, type ThrowAwayDatabase } from '../../tools/cluster.js';
import { FakeStripe } from '../processors/stripe-server.js';
import { migratedDataDir, migratedDatabase } from '../harness/migrated-data-dir.js';

const secretKey = `sk_test_${randomBytes(16).toString('hex')}`;
const webhookSecret = `whsec_${randomBytes(16).toString('hex')}`;
let stripe: FakeStripe;
let server: KassaProcess;
let db: ThrowAwayDatabase | undefined;
let dataDir: string | undefined;

beforeAll(async () => {
  const serverUrl = process.env.TEST_DATABASE_URL;
  // The run's migrated database (the first start is not this file's subject).
  db = serverUrl ? await migratedDatabase(serverUrl, 'kassa_stripe_logs') : undefined;
  dataDir = serverUrl ? undefined : await migratedDataDir('kassa-stripe-logs-');
  // This Stripe expects another key, so it refuses Kassa's and repeats it in its error.
  stripe = new FakeStripe({ secretKey: 'sk_test_theotherone', webhookSecret, now: () => new Date() });
  const stripeBase = await stripe.start();
  const deployment = newDeployment(db?.url ?? '', { ...(dataDir ? { DATA_DIR: dataDir } : {}), LOG_LEVEL: 'debug', STRIPE_SECRET_KEY: secretKey, STRIPE_WEBHOOK_SECRET: webhookSecret, STRIPE_API_BASE_URL: stripeBase });
  server = await startKassa(deployment, { role: 'all', name: 'stripe-logs', readyTimeoutMs: 170_000 });
  // Once seen on PostgreSQL in CI: ECONNREFUSED on the admin port right after /readyz answered.
  // The server's own output says why, so a failure here carries it.
  const merchant = await provisionMerchant(server.adminUrl, deployment.adminToken).catch((err: unknown) => {
    throw new Error(`${err instanceof Error ? err.message : String(err)}; exit ${String(server.child.exitCode ?? server.child.signalCode)}; server output:\n${server.output().slice(-4000)}`, { cause: err });
  });
  const created = await http('POST', `${server.merchantUrl}/v1/checkout-sessions`, {
    headers: { 'X-API-Key': merchant.apiKey, 'Idempotency-Key': 'logs-1' },
    body: { pricingData: { amount: 1000, currency: 'USD', productData: { name: 'Log test' } } },
  });
  // Stripe refusing the secret key is permanent: 403, not a 503 to retry (docs/card-processors.md, Failures).
  expect(created.status).toBe(403);
  // An event of a session Kassa cannot read back (the key is refused): 503; a forged one: 400.
  const event = JSON.stringify({ id: 'evt_logs', object: 'event', type: 'checkout.session.completed', created: Math.floor(Date.now() / 1000), data: { object: { id: 'cs_test_unknown', object: 'checkout.session' } } });
  for (const [secret, status] of [[webhookSecret, 503], ['whsec_forged', 400]] as const) {
    const { payload, signature } = stripe.signPayload(event, secret);
    const res = await fetch(`${server.merchantUrl}/v1/processors/stripe/events`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'Stripe-Signature': signature }, body: payload });
    expect(res.status).toBe(status);
  }
}, 240_000);

afterAll(async () => {
  await server?.stop();
  await stripe?.stop();
  await db?.drop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describe('Stripe secrets in logs', () => {
  it('appear nowhere in the output, though Stripe echoed the key in its error', () => {
    const output = server.output();
    expect(output).toContain('Stripe');
    expect(output).not.toContain(secretKey);
    expect(output).not.toContain(webhookSecret);
  });
});
