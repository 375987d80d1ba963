/**
 * What a buyer sees in a real browser (headless Chromium through playwright-core) when a hosted
 * page cannot serve them right now: the "try again" page (503) when no exact crypto amount is
 * free, and the "too many requests" page (429) past the per-address limit. No chain is contacted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable, launchChromium, serveOnLoopback } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import type { Browser } from 'playwright-core';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createLink, createPrice, createProduct } from '../catalog/fixtures.js';

const CHAIN = 31337;
const WALLET = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';

let ctx: TestContext;
let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let origin: string;
let browser: Browser;

describe.skipIf(!chromiumAvailable)(skippedUnless('hosted pages under load, in a browser', 'chromium'), () => {
  beforeAll(async () => {
    ctx = await createTestContext({
      env: {
        CRYPTO_CHAINS: JSON.stringify([{ chainId: CHAIN, name: 'Local', rpcUrl: 'http://127.0.0.1:9', confirmations: 1, explorerUrl: 'https://x.test', blockRange: 10, initialLookback: 0, tokens: { USDC: '0x5FbDB2315678afecb367f032d93F642f64180aa3' } }]),
        CRYPTO_AMOUNT_OFFSET_RANGE: '1',
        HOSTED_WRITE_RATE_LIMIT_PER_MINUTE: '3',
      },
    });
    await ctx.admin.put(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${CHAIN}`).send({ address: WALLET }).expect(200);
    served = await serveOnLoopback(ctx.apps.merchant);
    origin = served.origin;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
    await ctx?.close();
  });

  it('shows "try again shortly" (503) when no amount is free, then "too many requests" (429) past the limit', async () => {
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Concert ticket' });
    const price = await createPrice(ctx, product.productId, { amount: 25_000_000, currency: 'USDC', provider: 'CRYPTO' });
    const linkUrl = `${origin}${new URL((await createLink(ctx, price.pricingId)).paymentLinkUrl).pathname}`;
    // The merchant's own checkout holds the only exact amount of this price (the range is 1 here).
    const held = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'browser-held')
      .send({ provider: 'CRYPTO', pricingId: price.pricingId, customerEmail: 'first@example.com' });
    expect(held.body.data.crypto.amountUnits).toBe('25000000');

    const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
    const scriptErrors: string[] = [];
    page.on('pageerror', (e) => scriptErrors.push(String(e)));
    expect((await page.goto(linkUrl))!.status()).toBe(200); // write 1: opens a session, lands on its page
    await page.fill('#email', 'second@example.com');
    const [busy] = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]); // write 2
    expect(busy!.status()).toBe(503);
    expect(await busy!.headerValue('retry-after')).toBe('60');
    await expect(page.locator('h1').textContent()).resolves.toBe('Try again shortly');
    await expect(page.getByTestId('status').textContent()).resolves.toContain('try again in 60 seconds');
    await page.screenshot({ path: 'test/e2e/.artifacts/try-again.png', fullPage: true }).catch(() => undefined);

    expect((await page.goto(linkUrl))!.status()).toBe(200); // write 3
    const limited = await page.goto(linkUrl); // write 4: over the limit
    expect(limited!.status()).toBe(429);
    expect(Number(await limited!.headerValue('retry-after'))).toBeGreaterThan(0);
    await expect(page.locator('h1').textContent()).resolves.toBe('Too many requests');
    await page.screenshot({ path: 'test/e2e/.artifacts/too-many-requests.png', fullPage: true }).catch(() => undefined);
    expect(scriptErrors).toEqual([]);
  });
});
