/**
 * A buyer in a real browser (headless Chromium) on the Stripe card processor: Kassa's session URL
 * redirects to the (local, Stripe-shaped) Stripe Checkout page, the buyer pays there, Stripe sends
 * its signed event to Kassa over HTTP, and Kassa's return page turns from "processing" to paid.
 */
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { createTestContext, type TestContext } from '../harness/context.js';
import { FakeStripe } from '../processors/stripe-server.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
if (!available && process.env.CI) throw new Error(`CI needs Chromium at ${CHROMIUM} (.ci/run installs it with apt-get)`);

let ctx: TestContext;
let server: Server;
let stripe: FakeStripe;
let browser: Browser;

describe.skipIf(!available)('Stripe checkout in a browser', () => {
  beforeAll(async () => {
    // Kassa listens first: its public base URL (Stripe's success URL) needs the port.
    let app: Express | undefined;
    server = createServer((req, res) => app!(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    stripe = new FakeStripe({ secretKey: 'sk_test_browser', webhookSecret: 'whsec_browser', now: () => ctx.clock.now(), eventsUrl: `${origin}/v1/processors/stripe/events` });
    const stripeBase = await stripe.start();
    ctx = await createTestContext({
      env: { PUBLIC_BASE_URL: origin, STRIPE_SECRET_KEY: 'sk_test_browser', STRIPE_WEBHOOK_SECRET: 'whsec_browser', STRIPE_API_BASE_URL: stripeBase },
    });
    app = ctx.apps.merchant;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await stripe?.stop();
    await new Promise((resolve) => server?.close(resolve));
    await ctx?.close();
  });

  it("sends the buyer to Stripe's page and back; the merchant sees the PAID order", async () => {
    const created = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'browser-stripe-1')
      .send({ pricingData: { amount: 1999, currency: 'USD', productData: { name: 'Headphones' } }, quantity: 2 });
    expect(created.status).toBe(201);
    const session = created.body.data;
    const page = await browser.newPage();
    await page.goto(session.url);
    expect(page.url()).toContain('/c/pay/cs_test_');
    await expect(page.getByTestId('stripe-amount').textContent()).resolves.toBe('USD 39.98');
    await page.fill('#email', 'browser@example.com');
    await page.click('button[type=submit]');
    await page.waitForURL(/\/checkout\/[A-Za-z0-9]+\/complete$/);
    // The event may arrive after the buyer is back: the page refreshes itself until it has.
    await page.getByText('Payment received').waitFor({ timeout: 20_000 });

    const read = await ctx.merchant.get(`/v1/checkout-sessions/${session.id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(read.body.data).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID', customerEmail: 'browser@example.com' });
    // Kassa's own URL now shows the paid page instead of sending the buyer to Stripe again.
    await page.goto(session.url);
    await expect(page.getByTestId('status').textContent()).resolves.toContain('Payment received');
  });
});
