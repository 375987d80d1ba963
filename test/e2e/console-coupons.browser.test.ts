/**
 * Catalog → Coupons in the console (issue 39), Chromium, desktop and 390 px, axe-core: a coupon and
 * a promotion code made with the forms (keyboard), listed with their redemptions after a buyer
 * redeemed the code. Only the merchant API operations, through the generated client. Screenshots:
 * test/e2e/.artifacts/screenshots/console/coupons-*.png.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { startConsoleHarness, type ConsoleHarness } from '../harness/console-browser.js';

let h: ConsoleHarness;

describe.skipIf(!chromiumAvailable)(skippedUnless('coupons in the console', 'chromium'), () => {
  beforeAll(async () => {
    h = await startConsoleHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('creates a coupon and a code, and lists them with their redemptions', async () => {
    const page = await h.signedInPage('owner');
    await page.goto(`${h.origin}/console/catalog/coupons`);
    await page.getByText('No coupons yet.').waitFor();
    await page.fill('#coupon-name', 'Launch week');
    await page.fill('#coupon-value', '20');
    await page.selectOption('#coupon-duration', 'REPEATING');
    await page.fill('#coupon-periods', '3');
    await page.fill('#coupon-max', '100');
    await page.focus('#coupon-max');
    await page.keyboard.press('Enter');
    await page.locator('[data-testid=coupons]').waitFor();
    expect(await page.locator('[data-testid=coupons] tbody tr').first().innerText()).toMatch(/Launch week[\s\S]*20% off, 3 billing periods[\s\S]*0 of 100/);
    await page.fill('#code-text', 'LAUNCH20');
    await page.check('text=Once per customer');
    await page.focus('#code-text');
    await page.keyboard.press('Enter');
    await page.locator('[data-testid=promotion-code]').waitFor();

    // A buyer redeems it; the list shows it on a reload.
    const created = await h.ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', h.ctx.orgA.apiKey)
      .set('Idempotency-Key', 'console-coupon')
      .send({ pricingData: { amount: 1000, currency: 'USD', productData: { name: 'Book' } }, customerEmail: 'reader@example.com', discounts: [{ promotionCode: 'launch20' }] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect((await h.ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' })).status).toBe(303);
    await page.reload();
    await page.locator('[data-testid=promotion-code]').waitFor();
    expect(await page.getByTestId('coupon-redemptions').first().innerText()).toBe('1 of 100');
    expect(await page.getByTestId('promotion-code').first().innerText()).toBe('LAUNCH20 · 1 redeemed · once per customer');
    await h.check(page, 'coupons');
  });
});
