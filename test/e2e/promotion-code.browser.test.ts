/**
 * The hosted checkout page's "Add a promotion code" (issue 39) in Chromium, at 390 px and on a
 * desktop, keyboard only: a refused code is announced in words next to the field, a valid one
 * typed in lower case shows its DISCOUNT line and the new total, and the buyer pays that total;
 * axe-core finds no serious or critical violation in either state; nothing overflows at 390 px.
 * Screenshots: test/e2e/.artifacts/promotion-code-*.png.
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
let code: string;

describe.skipIf(!chromiumAvailable)(skippedUnless('the promotion-code field in a browser', 'chromium'), () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    ctx = await createTestContext();
    served = await serveOnLoopback(ctx.apps.merchant);
    origin = served.origin;
    browser = await launchChromium();
    const coupon = await ctx.merchant.post('/v1/coupons').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Launch week', percentOff: '20', duration: 'ONCE' });
    code = (await ctx.merchant.post('/v1/promotion-codes').set('X-API-Key', ctx.orgA.apiKey).send({ couponId: coupon.body.data.id, code: 'LAUNCH20' })).body.data.code;
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
    await ctx?.close();
  });

  for (const viewport of [
    { name: 'phone', width: 390, height: 844 },
    { name: 'desktop', width: 1280, height: 900 },
  ]) {
    it(`applies a code with the keyboard, says why a code is refused, and pays the discounted total (${viewport.name})`, async () => {
      const created = await ctx.merchant
        .post('/v1/checkout-sessions')
        .set('X-API-Key', ctx.orgA.apiKey)
        .set('Idempotency-Key', `promo-browser-${viewport.name}`)
        .send({ pricingData: { amount: 2500, currency: 'USD', productData: { name: 'Wireless keyboard' } }, customerEmail: `${viewport.name}@example.com` });
      const context = await browser.newContext({ viewport, bypassCSP: true });
      const page = await context.newPage();
      await page.goto(`${origin}${new URL(created.body.data.url).pathname}`);
      expect(await axeViolations(page)).toEqual([]);

      // A wrong code: typed and submitted with Enter, refused in words tied to the field.
      await tabTo(page, '#promotion-code');
      await page.keyboard.type('NOTACODE');
      await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
      const message = page.getByTestId('promotion-code-message');
      expect(await message.innerText()).toBe('The promotion code NOTACODE is not valid.');
      expect(await message.getAttribute('role')).toBe('alert');
      expect(await page.locator('#promotion-code').getAttribute('aria-describedby')).toBe('promotion-code-message');
      expect(await axeViolations(page)).toEqual([]);
      await page.screenshot({ path: `${ARTIFACTS}/promotion-code-refused-${viewport.name}.png`, fullPage: true });

      // The refused code stays in the field, which has the focus: the buyer corrects it there
      // (before: an empty field and the focus at the page's top).
      expect(await page.locator('#promotion-code').inputValue()).toBe('NOTACODE');
      expect(await page.evaluate('document.activeElement?.id')).toBe('promotion-code');
      // The right code in lower case over it, through the Apply button reached with Tab.
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.type(code.toLowerCase());
      await tabTo(page, '[data-testid=apply-promotion-code]');
      await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
      expect(await page.getByTestId('promotion-code-message').innerText()).toBe('LAUNCH20 applied.');
      expect(await page.getByTestId('discount').innerText()).toMatch(/Promotion code LAUNCH20 \(20% off\)\s+−\$5\.00/);
      expect(await page.getByTestId('amount').innerText()).toBe('$20.00');
      expect(await page.locator('button[type=submit]').innerText()).toBe('Pay $20.00');
      expect(await axeViolations(page)).toEqual([]);
      const overflow = (await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")) as number;
      expect(overflow).toBeLessThanOrEqual(0);
      await page.screenshot({ path: `${ARTIFACTS}/promotion-code-applied-${viewport.name}.png`, fullPage: true });

      // Pay with the keyboard.
      await tabTo(page, '#card');
      await page.keyboard.type('4242 4242 4242 4242');
      await page.keyboard.press('Tab');
      await page.keyboard.type('12/30');
      await page.keyboard.press('Tab');
      await page.keyboard.type('123');
      await Promise.all([page.waitForURL(/\/complete$/), page.keyboard.press('Enter')]);
      expect(await page.getByTestId('status').innerText()).toContain('Payment received');
      const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
      const order = (await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
      expect(order.amountCents).toBe(2000);
      expect(order.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual([
        ['PRICE', 2500],
        ['DISCOUNT', -500],
      ]);
      await context.close();
    });
  }
});
