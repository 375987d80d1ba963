/**
 * The hosted checkout page of a metered subscription with a free trial, a 3-month coupon and VAT
 * (the new-user walk, issues 38 and 39) in Chromium, at 390 px and on a desktop: the usage lines,
 * "14 days free, then €38.08/month for 3 months, then €47.60/month plus usage (VAT 19% included)",
 * the trial started by keyboard only, and the page after it saying the trial started and its first
 * charge; axe-core clean, no horizontal overflow. Screenshots: test/e2e/.artifacts/checkout-terms-*.png.
 */
import { mkdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { chromiumAvailable, launchChromium, serveOnLoopback } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { axeViolations, tabTo } from '../harness/accessibility.js';
import { createTestContext, type TestContext } from '../harness/context.js';

const ARTIFACTS = 'test/e2e/.artifacts';
let ctx: TestContext;
let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let origin: string;
let browser: Browser;
let priceId: string;
let couponId: string;

async function check(page: Page, name: string): Promise<void> {
  expect(await axeViolations(page), `${name}: axe`).toEqual([]);
  const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
  expect(overflow, `${name}: horizontal overflow`).toBeLessThanOrEqual(0);
  await page.screenshot({ path: `${ARTIFACTS}/checkout-terms-${name}.png`, fullPage: true });
}

describe.skipIf(!chromiumAvailable)(skippedUnless('the checkout page’s terms in a browser', 'chromium'), () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    ctx = await createTestContext();
    served = await serveOnLoopback(ctx.apps.merchant);
    origin = served.origin;
    browser = await launchChromium();
    const meter = await ctx.merchant.post('/v1/meters').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
    expect(meter.status, JSON.stringify(meter.body)).toBe(201);
    await ctx.services.modules.tax.tax.create(ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' });
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Team' });
    const price = await ctx.admin.post(`/v1/products/${product.id}/prices`).send({
      amount: 4000,
      currency: 'EUR',
      pricingType: 'SUBSCRIPTION',
      billingInterval: 'MONTH',
      trialDays: 14,
      meteredComponents: [{ meterId: meter.body.data.id, includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } }],
    });
    expect(price.status, JSON.stringify(price.body)).toBe(201);
    priceId = price.body.data.pricingId;
    couponId = (await ctx.merchant.post('/v1/coupons').set('X-API-Key', ctx.orgA.apiKey).send({ name: 'Launch', percentOff: '20', duration: 'REPEATING', durationInPeriods: 3 })).body.data.id;
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
    it(`states usage, the coupon's end and VAT, and starts the trial by keyboard (${viewport.name})`, async () => {
      const created = await ctx.merchant
        .post('/v1/checkout-sessions')
        .set('X-API-Key', ctx.orgA.apiKey)
        .set('Idempotency-Key', `terms-browser-${viewport.name}`)
        .send({ pricingId: priceId, customerEmail: `${viewport.name}@example.com`, customerTax: { country: 'DE' }, discounts: [{ coupon: couponId }] });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const context = await browser.newContext({ viewport, bypassCSP: true });
      const page = await context.newPage();
      await page.goto(`${origin}${new URL(created.body.data.url).pathname}`);
      expect((await page.getByTestId('usage-terms').innerText()).trim()).toBe('Plus usage of tokens: €0.04 per 1,000 after 10,000 included each month');
      expect((await page.getByTestId('trial').innerText()).trim()).toBe('14 days free, then €38.08/month for 3 months, then €47.60/month plus usage (VAT 19% included)');
      await check(page, `${viewport.name}`);

      await tabTo(page, '#card');
      await page.keyboard.type('4242424242424242');
      await page.keyboard.press('Tab');
      await page.keyboard.type('12/30');
      await page.keyboard.press('Tab');
      await page.keyboard.type('123');
      await tabTo(page, 'button[type=submit]');
      expect(await page.evaluate('document.activeElement.textContent')).toBe('Start free trial');
      await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
      const status = (await page.getByTestId('status').innerText()).trim();
      expect(status).toMatch(/^Your free trial has started\. Your first charge, on \d{1,2} \w+ \d{4}, is €38\.08 \(VAT 19% included\) plus usage\. Nothing was charged today\.$/);
      expect(await page.title()).toContain('Trial started');
      await check(page, `${viewport.name}-started`);
      await context.close();
    });
  }
});
