/**
 * A buyer in a real browser (headless Chromium through playwright-core): opens the session URL,
 * sees the purchase, is declined once, pays, lands on the confirmation page; the merchant then
 * sees the PAID order through the API.
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

describe.skipIf(!chromiumAvailable)(skippedUnless('hosted checkout in a browser', 'chromium'), () => {
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

  it('lets a buyer pay after a decline, and the merchant sees the order', async () => {
    const created = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'browser-1')
      .send({ pricingData: { amount: 1999, currency: 'USD', productData: { name: 'Noise-cancelling headphones', description: 'Over-ear, black' } }, quantity: 2, merchantReference: 'web-1' });
    const session = created.body.data;
    const page = await browser.newPage({ viewport: { width: 390, height: 844 } }); // a phone
    const scriptErrors: string[] = [];
    page.on('pageerror', (e) => scriptErrors.push(String(e)));
    await page.goto(`${origin}${new URL(session.url).pathname}`);

    await expect(page.getByTestId('product-name').textContent()).resolves.toBe('Noise-cancelling headphones');
    await expect(page.getByTestId('amount').textContent()).resolves.toBe('$39.98');
    await page.screenshot({ path: 'test/e2e/.artifacts/checkout.png', fullPage: true }).catch(() => undefined);

    await page.fill('#email', 'browser@example.com');
    await page.fill('#card', '4000 0000 0000 0002');
    await page.fill('#exp', '12/30');
    await page.fill('#cvc', '123');
    await page.click('button[type=submit]');
    await expect(page.getByTestId('error').textContent()).resolves.toContain('declined');

    await page.fill('#email', 'browser@example.com');
    await page.fill('#card', '4242 4242 4242 4242');
    await page.fill('#exp', '12/30');
    await page.fill('#cvc', '123');
    await page.click('button[type=submit]');
    await page.waitForURL(/\/complete$/);
    await expect(page.getByTestId('status').textContent()).resolves.toContain('Payment received');
    await page.screenshot({ path: 'test/e2e/.artifacts/paid.png', fullPage: true }).catch(() => undefined);
    expect(scriptErrors).toEqual([]);

    const read = await ctx.merchant.get(`/v1/checkout-sessions/${session.id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(read.body.data).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID', url: null, lastError: { code: 'card_declined' } });
    const order = await ctx.merchant.get(`/v1/orders/${read.body.data.orderId}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(order.body.data).toMatchObject({ status: 'PAID', amountCents: 3998, customerEmail: 'browser@example.com', merchantReference: 'web-1', checkoutSessionId: session.id });
  });
});
