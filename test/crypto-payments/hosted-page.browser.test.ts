/**
 * A crypto buyer in a real browser (headless Chromium through playwright-core) against a local
 * chain: gives an e-mail, gets the instructions with a rendered QR code, pays from a wallet, and
 * watches the page update itself (meta refresh, no script) to "detected" and then "received".
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable, launchChromium, serveOnLoopback } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import type { Browser } from 'playwright-core';
import { createTestContext, type TestContext } from '../harness/context.js';
import { startLocalChain, USDC, type LocalChain } from './chain.js';


let chain: LocalChain;
let ctx: TestContext;
let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let origin: string;
let browser: Browser;
let usdc: `0x${string}`;

describe.skipIf(!chromiumAvailable)(skippedUnless('crypto checkout page in a browser', 'chromium'), () => {
  beforeAll(async () => {
    chain = await startLocalChain();
    usdc = await chain.deployToken('USD Coin (test)', 'USDC');
    await chain.mint(usdc, chain.accounts[2]!, USDC(1000));
    ctx = await createTestContext({
      env: {
        CRYPTO_CHAINS: JSON.stringify([
          { chainId: chain.chainId, name: 'Hardhat', rpcUrl: chain.url, confirmations: 2, explorerUrl: 'https://explorer.test', blockRange: 50, initialLookback: 1000, tokens: { USDC: usdc } },
        ]),
      },
    });
    await ctx.admin.put(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${chain.chainId}`).send({ address: chain.accounts[1] }).expect(200);
    served = await serveOnLoopback(ctx.apps.merchant);
    origin = served.origin;
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await served?.close();
    await ctx?.close();
    await chain?.close();
  });

  it('shows the instructions after the e-mail and follows the payment to "received"', { timeout: 90_000 }, async () => {
    const created = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'browser-crypto-1')
      .send({ provider: 'CRYPTO', pricingData: { amount: 19_990_000, currency: 'USDC', productData: { name: 'Festival pass' } } });
    expect(created.status).toBe(201);
    const session = created.body.data;
    const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
    const scriptErrors: string[] = [];
    page.on('pageerror', (e) => scriptErrors.push(String(e)));
    await page.goto(`${origin}${new URL(session.url).pathname}`);
    await page.fill('#email', 'fan@example.com');
    await page.click('button[type=submit]');

    await expect(page.getByTestId('crypto-amount').textContent()).resolves.toBe('exactly 19.99 USDC');
    await expect(page.getByTestId('crypto-chain').textContent()).resolves.toBe('Hardhat');
    await expect(page.getByTestId('crypto-recipient').textContent()).resolves.toBe(chain.accounts[1]);
    // The QR code is an SVG data: URI the strict CSP lets through; the browser actually renders it.
    const qrWidth = await page.getByTestId('crypto-qr').evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth);
    expect(qrWidth).toBeGreaterThan(0);
    await page.screenshot({ path: 'test/e2e/.artifacts/crypto-instructions.png', fullPage: true }).catch(() => undefined);

    const quote = (await ctx.merchant.get(`/v1/checkout-sessions/${session.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.crypto;
    expect(quote.amountUnits).toBe('19990000');
    await ctx.services.chainWatcher.runOnce();
    await chain.transfer(usdc, chain.accounts[2]!, chain.accounts[1]!, BigInt(quote.amountUnits));
    await ctx.services.chainWatcher.runOnce();
    // No reload by the test: the page refreshes itself.
    await page.getByText('Payment of 19.99 USDC detected').waitFor({ timeout: 20_000 });
    await chain.mine(1);
    await ctx.services.chainWatcher.runOnce();
    await page.getByText('Payment received').waitFor({ timeout: 20_000 });
    expect(scriptErrors).toEqual([]);

    const read = await ctx.merchant.get(`/v1/checkout-sessions/${session.id}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(read.body.data).toMatchObject({ status: 'COMPLETE', orderStatus: 'PAID', customerEmail: 'fan@example.com' });
  });
});
