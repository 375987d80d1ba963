/**
 * What a buyer's browser (headless Chromium through playwright-core) shows for a hosted-page link
 * that was mangled on its way (a NUL, a cut percent-escape) and for a checkout form that arrives
 * with a field twice (as a misbehaving extension or autofill can make it): a page a person can
 * read, with the right status, never a stack trace or a JSON body.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable, launchChromium, serveOnLoopback } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import type { Browser } from 'playwright-core';
import { createTestContext, type TestContext } from '../harness/context.js';


let ctx: TestContext;
let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let origin: string;
let browser: Browser;

describe.skipIf(!chromiumAvailable)(skippedUnless('hosted page errors in a browser', 'chromium'), () => {
  beforeAll(async () => {
    ctx = await createTestContext();
    served = await serveOnLoopback(ctx.apps.merchant);
    origin = served.origin;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
    await ctx?.close();
  });

  it('shows a readable page for a mangled link and for a form with a field twice', async () => {
    const created = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'browser-errors-1')
      .send({ pricingData: { amount: 1500, currency: 'USD', productData: { name: 'Desk lamp' } }, customerEmail: 'lamp@example.com' });
    const path = new URL(created.body.data.url).pathname;
    const page = await browser.newPage({ viewport: { width: 390, height: 844 } });

    for (const mangled of [`${path}%00`, '/subscriptions/manage/%E0%A4%A', `${path}/receipt`]) {
      const response = await page.goto(`${origin}${mangled}`);
      expect(response?.status(), mangled).toBe(404);
      await expect(page.locator('h1').textContent(), mangled).resolves.toBe('Not found');
      await expect(page.getByTestId('status').textContent(), mangled).resolves.toContain('This page does not exist');
    }

    await page.goto(`${origin}${path}`);
    await page.fill('#card', '4242 4242 4242 4242');
    await page.fill('#exp', '12/30');
    await page.fill('#cvc', '123');
    // A second CVC field in the form, as an extension might add one.
    await page.evaluate(`(() => {
      const extra = document.createElement('input');
      extra.name = 'cvc';
      extra.value = '999';
      document.querySelector('form[action$="/pay"]').appendChild(extra);
    })()`);
    const [answer] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/pay')), page.click('button[type=submit]')]);
    expect(answer.status()).toBe(400);
    await expect(page.title()).resolves.toBe('Cannot send this form');
    await expect(page.getByTestId('status').textContent()).resolves.toBe('The form field "cvc" was sent more than once.');
    // Nothing was paid: back on the page, the buyer pays with the form as it was meant to be.
    await page.goto(`${origin}${path}`);
    await page.fill('#card', '4242 4242 4242 4242');
    await page.fill('#exp', '12/30');
    await page.fill('#cvc', '123');
    await page.click('button[type=submit]');
    await expect(page.getByTestId('status').textContent()).resolves.toContain('Payment received');
  });
});
