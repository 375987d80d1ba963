/**
 * The hosted checkout page's "Applied balance" (issue 39, docs/plan-changes.md "A new checkout
 * draws it") in Chromium: a checkout that names a customer with a credit balance shows "Total",
 * "Applied balance −X" and "Due today" before the buyer confirms, the Pay button says the due, and
 * the order charged is that due with its CREDIT line. Keyboard only at 390 px, the mouse on a
 * desktop; axe-core finds no serious or critical violation; nothing overflows at 390 px.
 * Screenshots: test/e2e/.artifacts/checkout-balance-*.png.
 */
import { mkdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { chromiumAvailable, launchChromium, serveOnLoopback } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { axeViolations, tabTo } from '../harness/accessibility.js';
import { createTestContext, type TestContext } from '../harness/context.js';

const ARTIFACTS = 'test/e2e/.artifacts';
let ctx: TestContext;
let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let origin: string;
let browser: Browser;
let basic: string;
let pro: string;

const api = (method: 'get' | 'post', path: string) => ctx.merchant[method](path).set('X-API-Key', ctx.orgA.apiKey);

/** A customer (made by a first checkout) with a credit balance of `amount`. */
async function customerWithBalance(name: string, amount: number): Promise<string> {
  const first = await api('post', '/v1/checkout-sessions').set('Idempotency-Key', `cbb-first-${name}`).send({ pricingId: basic, customerEmail: `${name}@example.com` });
  const paid = await ctx.merchant.post(`${new URL(first.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const customerId = (await api('get', `/v1/checkout-sessions/${first.body.data.id}`)).body.data.customerId as string;
  const r = await api('post', `/v1/customers/${customerId}/balance-transactions`).set('Idempotency-Key', `cbb-adj-${name}`).send({ amountCents: amount, currency: 'USD', description: 'Goodwill' });
  expect(r.status).toBe(201);
  return customerId;
}

describe.skipIf(!chromiumAvailable)(skippedUnless('the checkout page’s applied balance in a browser', 'chromium'), () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    ctx = await createTestContext();
    served = await serveOnLoopback(ctx.apps.merchant);
    origin = served.origin;
    browser = await launchChromium();
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Basic' });
    const proProduct = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Team plan' });
    basic = (await ctx.services.catalog.createPrice(product.id, { amount: 1000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
    pro = (await ctx.services.catalog.createPrice(proProduct.id, { amount: 3000, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
    await ctx?.close();
  });

  for (const viewport of [
    { name: 'phone', width: 390, height: 844, keyboard: true },
    { name: 'desktop', width: 1280, height: 900, keyboard: false },
  ]) {
    it(`shows Applied balance and Due today before paying, and charges that due (${viewport.name}, ${viewport.keyboard ? 'keyboard' : 'mouse'})`, async () => {
      const customerId = await customerWithBalance(`balance-${viewport.name}`, 450);
      const created = await api('post', '/v1/checkout-sessions').set('Idempotency-Key', `cbb-${viewport.name}`).send({ pricingId: pro, customerId });
      expect(created.status).toBe(201);
      const context = await browser.newContext({ viewport, bypassCSP: true });
      const page = await context.newPage();
      await page.goto(`${origin}${new URL(created.body.data.url).pathname}`);

      expect(await page.getByTestId('total').innerText()).toBe('$30.00');
      expect(await page.getByTestId('applied-balance').innerText()).toMatch(/^Applied balance\s+−\$4\.50$/);
      expect(await page.getByTestId('amount').innerText()).toBe('$25.50');
      expect(await page.locator('.total', { has: page.getByTestId('amount') }).innerText()).toMatch(/^Due today\s+\$25\.50$/);
      expect(await page.locator('button[type=submit]').innerText()).toBe('Pay $25.50');
      expect(await axeViolations(page)).toEqual([]);
      const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
      expect(overflow).toBeLessThanOrEqual(0);
      await page.screenshot({ path: `${ARTIFACTS}/checkout-balance-${viewport.name}.png`, fullPage: true });

      if (viewport.keyboard) {
        await tabTo(page, '#card');
        await page.keyboard.type('4242 4242 4242 4242');
        await page.keyboard.press('Tab');
        await page.keyboard.type('12/30');
        await page.keyboard.press('Tab');
        await page.keyboard.type('123');
        await Promise.all([page.waitForURL(/\/complete$/), page.keyboard.press('Enter')]);
      } else {
        await page.click('#card');
        await page.keyboard.type('4242 4242 4242 4242');
        await page.click('#exp');
        await page.keyboard.type('12/30');
        await page.click('#cvc');
        await page.keyboard.type('123');
        await Promise.all([page.waitForURL(/\/complete$/), page.click('button[type=submit]')]);
      }
      expect(await page.getByTestId('status').innerText()).toContain('Payment received');
      expect(await page.getByTestId('applied-balance').innerText()).toMatch(/−\$4\.50/);
      expect(await axeViolations(page)).toEqual([]);
      await page.screenshot({ path: `${ARTIFACTS}/checkout-balance-paid-${viewport.name}.png`, fullPage: true });

      const session = (await api('get', `/v1/checkout-sessions/${created.body.data.id}`)).body.data;
      const order = (await api('get', `/v1/orders/${session.orderId}`)).body.data;
      expect(order.amountCents).toBe(2550);
      expect(order.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual([
        ['PRICE', 3000],
        ['CREDIT', -450],
      ]);
      await context.close();
    });
  }
});
