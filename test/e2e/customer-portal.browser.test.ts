/**
 * The customer portal in a real browser (headless Chromium through playwright-core), on a desktop
 * and a 390 px phone, with the keyboard only: the buyer follows the merchant's portal link, sees
 * their subscription, orders and products, cancels at period end through the confirmation step,
 * keeps the subscription after all, opens a receipt; the manage page's cancel confirmation and the
 * paid checkout page's way into the portal too. Every page passes axe-core (WCAG 2 A/AA rules) with
 * no serious or critical violation. Screenshots go to test/e2e/.artifacts/screenshots/portal-*.png.
 * A renewal waiting for the buyer's 3-D Secure shows "Confirm your payment", reachable by keyboard.
 */
import { mkdirSync } from 'node:fs';
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { chromiumAvailable, launchChromium, serveOnLoopback } from '../harness/browser.js';
import { activate, axeViolations, tabTo } from '../harness/accessibility.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { createTestContext, type TestContext } from '../harness/context.js';

const ARTIFACTS = process.env.KASSA_SHOTS_DIR ?? 'test/e2e/.artifacts/screenshots';

let ctx: TestContext;
let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let origin: string;
let browser: Browser;
let subPrice: string;
let oneTimePrice: string;
let n = 0;

async function check(page: Page, name: string): Promise<void> {
  expect(await axeViolations(page), `${name}: axe`).toEqual([]);
  const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
  expect(overflow, `${name}: horizontal overflow`).toBeLessThanOrEqual(0);
  await page.screenshot({ path: `${ARTIFACTS}/portal-${name}.png`, fullPage: true });
}

async function buy(email: string, pricingId: string) {
  const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `portal-browser-${++n}`).send({ pricingId, customerEmail: email, merchantReference: `web-${n}` });
  const path = new URL(created.body.data.url).pathname;
  const paid = await supertest(ctx.apps.merchant).post(`${path}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  return { path };
}

describe.skipIf(!chromiumAvailable)(skippedUnless('the customer portal in a browser', 'chromium'), () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    ctx = await createTestContext();
    served = await serveOnLoopback(ctx.apps.merchant);
    origin = served.origin;
    browser = await launchChromium();
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan', description: 'Everything, monthly' });
    subPrice = (await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 })).id;
    const ebook = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'The TypeScript field guide (ebook)' });
    oneTimePrice = (await ctx.services.catalog.createPrice(ebook.id, { amount: 1250, currency: 'USD' })).id;
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
    await ctx?.close();
  });

  for (const viewport of [
    { name: 'desktop', width: 1280, height: 900 },
    { name: 'phone', width: 390, height: 844 },
  ]) {
    it(`a buyer manages their subscription and reads a receipt with the keyboard only (${viewport.name})`, async () => {
      const email = `portal-${viewport.name}@example.com`;
      await buy(email, oneTimePrice);
      await buy(email, subPrice);
      const link = await ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', ctx.orgA.apiKey).send({ customerEmail: email, returnUrl: 'https://shop.example.com/account' });
      expect(link.status).toBe(201);
      const context = await browser.newContext({ viewport, bypassCSP: true });
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(String(e)));

      await page.goto(`${origin}${new URL(link.body.data.url).pathname}`);
      await check(page, `${viewport.name}-enter`);
      await activate(page, '[data-testid=enter]');
      expect(new URL(page.url()).pathname, await page.content()).toBe('/portal');
      await expect(page.getByTestId('customer-email').textContent()).resolves.toContain(email);
      expect(await page.getByTestId('subscription').count()).toBe(1);
      expect(await page.getByTestId('order').count()).toBe(2);
      await check(page, `${viewport.name}-home`);

      await activate(page, '[data-testid^=cancel-]');
      await expect(page.getByTestId('confirm-text').textContent()).resolves.toContain('You keep access until');
      await check(page, `${viewport.name}-cancel-confirm`);
      await activate(page, '[data-testid=confirm-cancel]');
      await expect(page.getByTestId('notice').textContent()).resolves.toContain('you will not be charged again');
      await expect(page.getByTestId('subscription-status').textContent()).resolves.toContain('Canceled: access ends on');
      await check(page, `${viewport.name}-canceled`);

      await activate(page, '[data-testid^=keep-]');
      await expect(page.getByTestId('subscription-status').textContent()).resolves.toContain('Active: renews on');

      // A renewal the bank sends to 3-D Secure (as Stripe's invoice.payment_action_required records it):
      // the status says so and "Confirm your payment" leads to the processor's page, by keyboard too.
      const subscriptionId = (await ctx.testDb.database.db('subscriptions').where({ customer_email: email }).first()).id as string;
      const invoiceUrl = `https://invoice.stripe.com/i/acct_test/test_${viewport.name}`;
      await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).update({ action_invoice_id: `in_${viewport.name}`, action_url: invoiceUrl, action_required_at: ctx.clock.now() });
      await page.goto(`${origin}/portal`);
      await expect(page.getByTestId('subscription-status').textContent()).resolves.toContain('needs your confirmation');
      await tabTo(page, `[data-testid=confirm-payment-${subscriptionId}]`);
      expect(await page.evaluate('document.activeElement.getAttribute("href")')).toBe(invoiceUrl);
      await check(page, `${viewport.name}-action-required`);
      await ctx.testDb.database.db('subscriptions').where({ id: subscriptionId }).update({ action_invoice_id: null, action_url: null, action_required_at: null });
      await page.goto(`${origin}/portal`);
      expect(await page.getByTestId('payment-action').count()).toBe(0);

      await activate(page, '[data-testid=receipt-link]');
      await expect(page.getByTestId('receipt-merchant').textContent()).resolves.toBe('Org A');
      await expect(page.getByTestId('receipt-method').textContent()).resolves.toBe('Card ending in 4242');
      await check(page, `${viewport.name}-receipt`);
      await activate(page, '[data-testid=back]');
      await activate(page, '[data-testid=sign-out]');
      await expect(page.getByTestId('status').textContent()).resolves.toContain('You are signed out');
      await check(page, `${viewport.name}-signed-out`);
      expect(errors).toEqual([]);
      await context.close();
    });
  }

  it('the manage page asks before canceling, and the paid page opens the portal (phone, keyboard only)', async () => {
    const { path } = await buy('manage-browser@example.com', subPrice);
    const token = (await ctx.testDb.database.db('subscriptions').orderBy('created_at', 'desc').first()).manage_token;
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, bypassCSP: true });
    const page = await context.newPage();
    await page.goto(`${origin}/subscriptions/manage/${token}`);
    await check(page, 'manage');
    await activate(page, '[data-testid=cancel]');
    await check(page, 'manage-confirm');
    await activate(page, '[data-testid=back]');
    await expect(page.getByTestId('subscription-status').textContent()).resolves.toContain('Active: renews on');
    await activate(page, '[data-testid=cancel]');
    await activate(page, '[data-testid=confirm-cancel]');
    await expect(page.getByTestId('subscription-status').textContent()).resolves.toContain('Canceled: access ends on');
    await check(page, 'manage-canceled');

    await page.goto(`${origin}${path}/complete`);
    await check(page, 'paid');
    await activate(page, '[data-testid=open-portal]');
    expect(new URL(page.url()).pathname).toBe('/portal');
    await expect(page.getByTestId('customer-email').textContent()).resolves.toContain('manage-browser@example.com');

    await page.goto(`${origin}/portal/o/${ctx.orgA.orgId}`);
    await check(page, 'sign-in');
    await context.close();
  });
});
