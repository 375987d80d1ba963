/**
 * The hosted pages' layout at its extremes, measured in a real browser (headless Chromium through
 * playwright-core) on a 360 px wide phone: the largest accepted amount of each rail (card
 * 99999999 minor units, crypto 999999999999 units), a 255-character product name and a
 * 100-character merchant display name, on the checkout and the paid pages. The amount
 * must stay on one line beside or below its "Total" label without overlapping it, and nothing may
 * overflow the page horizontally. Screenshots go to test/e2e/.artifacts/.
 */
import { mkdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable, launchChromium, serveOnLoopback } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import type { Browser, Page } from 'playwright-core';
import { createTestContext, type TestContext } from '../harness/context.js';

const ARTIFACTS = 'test/e2e/.artifacts';
const CHAIN = 31337;
const WALLET = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';
const CARD_MAX = 99_999_999;
const CRYPTO_MAX = 999_999_999_999;
const LONG_MERCHANT = `Société Coopérative de Torréfaction${'X'.repeat(65)}`;
const LONG_NAME = `Annual enterprise licence ${'with priority support and onboarding '.repeat(6)}`.slice(0, 255);

let ctx: TestContext;
let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let origin: string;
let browser: Browser;

interface Geometry {
  labelText: string;
  amountText: string;
  labelLines: number;
  amountLines: number;
  overlap: boolean;
  /** Horizontal space between label and amount when they share a line, else null. */
  sameLineGap: number | null;
  viewportWidth: number;
  scrollWidth: number;
  overflowing: string[];
}

/** Measures the total row and every element of the page against the viewport. */
function measure(page: Page): Promise<Geometry> {
  return page.evaluate(`(() => {
    const lines = (el) => {
      const range = document.createRange();
      range.selectNodeContents(el);
      return new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
    };
    const label = document.querySelector('.total > span');
    const amount = document.querySelector('[data-testid=amount]');
    const a = label.getBoundingClientRect();
    const b = amount.getBoundingClientRect();
    const overlap = a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    const sameLineGap = a.top < b.bottom && b.top < a.bottom ? b.left - a.right : null;
    const width = document.documentElement.clientWidth;
    // Inside the card, nothing may cross its padding; outside, nothing may cross the viewport.
    const card = document.querySelector('.card');
    const c = card.getBoundingClientRect();
    const pad = parseFloat(getComputedStyle(card).paddingRight);
    const overflowing = [...document.querySelectorAll('body *')]
      .filter((el) => {
        const r = el.getBoundingClientRect();
        const right = card.contains(el) && el !== card ? c.right - pad : width;
        return r.width > 0 && (r.right > right + 0.5 || r.left < -0.5);
      })
      .map((el) => el.tagName.toLowerCase() + (el.className ? '.' + el.className : '') + ' ' + (el.textContent || '').slice(0, 40));
    return { labelText: label.textContent, amountText: amount.textContent, labelLines: lines(label), amountLines: lines(amount), overlap, sameLineGap, viewportWidth: width, scrollWidth: document.documentElement.scrollWidth, overflowing };
  })()`);
}

function expectHolds(geometry: Geometry, amount: string): void {
  expect(geometry.amountText).toBe(amount);
  expect(geometry.labelText).toBe('Total');
  expect(geometry.overlap).toBe(false);
  if (geometry.sameLineGap !== null) expect(geometry.sameLineGap).toBeGreaterThanOrEqual(8);
  expect(geometry.labelLines).toBe(1);
  expect(geometry.amountLines).toBe(1);
  expect(geometry.overflowing).toEqual([]);
  expect(geometry.scrollWidth).toBeLessThanOrEqual(geometry.viewportWidth);
}

async function cardSession(key: string, amount: number, currency: string, name: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', ctx.orgA.apiKey)
    .set('Idempotency-Key', key)
    .send({ pricingData: { amount, currency, productData: { name } }, ...extra });
  expect(res.status).toBe(201);
  return `${origin}${new URL(res.body.data.url).pathname}`;
}

describe.skipIf(!chromiumAvailable)(skippedUnless('hosted page layout at the largest amounts on a 360 px screen', 'chromium'), () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    ctx = await createTestContext({
      env: {
        CRYPTO_CHAINS: JSON.stringify([{ chainId: CHAIN, name: 'Local', rpcUrl: 'http://127.0.0.1:9', confirmations: 1, explorerUrl: 'https://x.test', blockRange: 10, initialLookback: 0, tokens: { USDC: '0x5FbDB2315678afecb367f032d93F642f64180aa3' } }]),
      },
    });
    await ctx.admin.put(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${CHAIN}`).send({ address: WALLET }).expect(200);
    await ctx.admin.patch(`/v1/orgs/${ctx.orgA.orgId}`).send({ displayName: LONG_MERCHANT }).expect(200);
    served = await serveOnLoopback(ctx.apps.merchant);
    origin = served.origin;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
    await ctx?.close();
  });

  const cases: Array<[string, number, string, string, string]> = [
    ['card-usd-max', CARD_MAX, 'USD', 'T-shirt', '$999,999.99'],
    ['card-jpy-max', CARD_MAX, 'JPY', 'Kimono', '¥99,999,999'],
    ['card-kwd-max-long-name', CARD_MAX, 'KWD', LONG_NAME, 'KWD 99,999.999'],
    ['card-usd-max-unbroken-name', CARD_MAX, 'USD', 'W'.repeat(255), '$999,999.99'],
  ];
  it.each(cases)('card checkout %s', async (file, amount, currency, name, shown) => {
    const url = await cardSession(`layout-${file}`, amount, currency, name);
    const page = await browser.newPage({ viewport: { width: 360, height: 740 } });
    expect((await page.goto(url))!.status()).toBe(200);
    await page.screenshot({ path: `${ARTIFACTS}/layout-${file}.png`, fullPage: true });
    expectHolds(await measure(page), shown);
    await expect(page.getByTestId('merchant').textContent()).resolves.toBe(LONG_MERCHANT);
    await page.close();
  });

  it('the paid page (receipt, reference, return link) at the card maximum', async () => {
    const url = await cardSession('layout-paid', CARD_MAX, 'USD', LONG_NAME, {
      customerEmail: 'ada@example.com',
      merchantReference: `ref-${'9'.repeat(120)}`,
      successUrl: 'https://shop.example/thanks',
    });
    const page = await browser.newPage({ viewport: { width: 360, height: 740 } });
    await page.goto(url);
    await page.fill('#card', '4242 4242 4242 4242');
    await page.fill('#exp', '12/30');
    await page.fill('#cvc', '123');
    // The payment redirects to the merchant's successUrl, which does not resolve here; the browser
    // then loads its own error page into this tab, so the receipt is opened in a fresh tab.
    const [paid] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/pay')),
      page.waitForEvent('requestfailed', (r) => r.url().startsWith('https://shop.example/')),
      page.click('button[type=submit]'),
    ]);
    expect(paid.status()).toBe(303);
    expect(await paid.headerValue('location')).toBe('https://shop.example/thanks');
    await page.close();
    const receipt = await browser.newPage({ viewport: { width: 360, height: 740 } });
    expect((await receipt.goto(url))!.status()).toBe(200);
    await expect(receipt.getByTestId('status').textContent()).resolves.toBe('Payment received. Thank you!');
    await expect(receipt.getByTestId('order-id').textContent()).resolves.toMatch(/^ORD_/);
    await expect(receipt.getByTestId('return').textContent()).resolves.toBe(`Return to ${LONG_MERCHANT}`);
    await receipt.screenshot({ path: `${ARTIFACTS}/layout-paid-usd-max.png`, fullPage: true });
    expectHolds(await measure(receipt), '$999,999.99');
    await receipt.close();
  });

  it('crypto checkout at 999,999.999999 USDC', async () => {
    const res = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'layout-crypto-max')
      .send({ provider: 'CRYPTO', pricingData: { amount: CRYPTO_MAX, currency: 'USDC', productData: { name: LONG_NAME } }, customerEmail: 'ada@example.com' });
    expect(res.status).toBe(201);
    const page = await browser.newPage({ viewport: { width: 360, height: 740 } });
    expect((await page.goto(`${origin}${new URL(res.body.data.url).pathname}`))!.status()).toBe(200);
    await expect(page.getByTestId('instructions').count()).resolves.toBe(1);
    await page.screenshot({ path: `${ARTIFACTS}/layout-crypto-usdc-max.png`, fullPage: true });
    expectHolds(await measure(page), '999,999.999999 USDC');
    await page.close();
  });
});
