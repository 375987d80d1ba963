/**
 * A buyer in a real browser (headless Chromium) on the Stripe card processor: Kassa's session URL
 * redirects to the (local, Stripe-shaped) Stripe Checkout page, the buyer pays there, Stripe sends
 * its signed event to Kassa over HTTP, and Kassa's return page turns from "processing" to paid.
 * A subscription price takes the same way in subscription mode and ends on the manage page.
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

  it("a SUBSCRIPTION price: Stripe Checkout in subscription mode and back; the paid page links the active subscription, and Kassa's URL no longer redirects", async () => {
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan', description: 'Everything' });
    const price = await ctx.services.catalog.createPrice(product.id, { amount: 1500, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' });
    const created = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'browser-stripe-subscription-1')
      .send({ pricingId: price.id, customerEmail: 'subscriber@example.com' });
    expect(created.status).toBe(201);
    const session = created.body.data;
    const page = await browser.newPage();
    const redirects: string[] = [];
    page.on('response', (r) => {
      if (r.status() === 303) redirects.push(`${new URL(r.url()).pathname} -> ${r.headers().location}`);
    });
    await page.goto(session.url);
    // Kassa's own URL sent the browser on to Stripe Checkout, opened in subscription mode.
    const stripeSessionId = new URL(page.url()).pathname.split('/').pop()!;
    expect(page.url()).toContain('/c/pay/cs_test_');
    expect(redirects[0]).toMatch(new RegExp(`^${new URL(session.url).pathname} -> .*/c/pay/${stripeSessionId}$`));
    expect(stripe.sessions.get(stripeSessionId)).toMatchObject({ mode: 'subscription', client_reference_id: session.id });
    await expect(page.getByTestId('stripe-amount').textContent()).resolves.toBe('USD 15.00');
    await page.click('button[type=submit]');
    // Stripe's success redirect returns through Kassa; its page waits for Stripe's event, then shows the paid state.
    await page.waitForURL(/\/checkout\/[A-Za-z0-9]+\/complete$/);
    await page.getByText('Payment received').waitFor({ timeout: 20_000 });
    const manage = page.getByTestId('manage');
    await expect(manage.textContent()).resolves.toBe('Manage your subscription');

    const stripeSub = stripe.subscriptionOf(stripeSessionId);
    const subscription = (await ctx.merchant.get('/v1/subscriptions?size=100').set('X-API-Key', ctx.orgA.apiKey)).body.data.records.find(
      (s: { customerEmail: string }) => s.customerEmail === 'subscriber@example.com',
    );
    expect(subscription).toMatchObject({ status: 'ACTIVE', amountCents: 1500 });
    const renewsOn = new Intl.DateTimeFormat('en-GB', { dateStyle: 'long', timeZone: 'UTC' }).format(new Date(stripeSub.items.data[0]!.current_period_end * 1000));
    await manage.click();
    await page.waitForURL(/\/subscriptions\/manage\/[A-Za-z0-9]+$/);
    await expect(page.getByTestId('subscription-status').textContent()).resolves.toBe(`Active: renews on ${renewsOn}.`);

    const read = await ctx.merchant.get(`/v1/checkout-sessions/${session.id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(read.body.data).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID' });
    const order = (await ctx.merchant.get(`/v1/orders/${read.body.data.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(order).toMatchObject({ status: 'PAID', subscriptionId: subscription.subscriptionId, providerStatus: 'succeeded' });
    expect(order.providerPaymentId).toMatch(/^pi_/);

    // After completion Kassa's URL shows its paid page (with the manage link) and never sends the buyer to Stripe again.
    const before = redirects.length;
    const again = await page.goto(session.url);
    expect(again!.status()).toBe(200);
    expect(new URL(page.url()).pathname).toBe(new URL(session.url).pathname);
    expect(redirects.slice(before)).toEqual([]);
    await expect(page.getByTestId('status').textContent()).resolves.toContain('Payment received');
    await expect(page.getByTestId('manage').count()).resolves.toBe(1);
  });
});
