/**
 * Issue 38 §9 in Chromium, desktop and 390 px, axe-core: the console's Meters page (list; a new
 * meter made with the keyboard only, its live preview of the last 30 days updating as the filter
 * is typed; the meter's page edited and archived with the mouse), a customer's usage this period
 * (used, included, estimated amount, estimated next charge), their credits and balances per meter
 * (a subscription's meter with credits and overage, a prepaid meter; keyboard, 390 px) and the
 * portal's "Usage this period". Screenshots: test/e2e/.artifacts/screenshots/console/meters-*.png,
 * customer-usage-*.png, customer-balances-390.png, portal-usage-*.png.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { activate, tabTo } from '../harness/accessibility.js';
import { startConsoleHarness, type ConsoleHarness } from '../harness/console-browser.js';
import { buy, setExternalId } from '../usage/helpers.js';

let h: ConsoleHarness & { newPage(viewport?: { width: number; height: number }): Promise<Page> };
let customerId: string;
let tokensMeter: string;

describe.skipIf(!chromiumAvailable)(skippedUnless('meters, customer usage and the portal usage section', 'chromium'), () => {
  beforeAll(async () => {
    h = (await startConsoleHarness()) as typeof h;
    const ctx = h.ctx;
    const key = ctx.orgA.apiKey;
    const meter = await ctx.merchant.post('/v1/meters').set('X-API-Key', key).send({ name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
    expect(meter.status).toBe(201);
    tokensMeter = meter.body.data.id;
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro' });
    const price = await ctx.admin.post(`/v1/products/${product.id}/prices`).send({
      amount: 2000,
      currency: 'USD',
      pricingType: 'SUBSCRIPTION',
      billingInterval: 'MONTH',
      meteredComponents: [{ meterId: tokensMeter, includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmountDecimal: '0.004' } }],
    });
    expect(price.status, JSON.stringify(price.body)).toBe(201);
    ({ customerId } = await buy(ctx, 'ada@example.com', price.body.data.pricingId, key));
    expect((await setExternalId(ctx, customerId, 'user_ada', key)).status).toBe(200);
    const now = ctx.clock.now().getTime();
    const at = (ms: number) => new Date(ms).toISOString();
    const events = [
      { id: 'e1', customer: { externalId: 'user_ada' }, name: 'llm_tokens', timestamp: at(now), properties: { tokens: 12_000, tier: 'paid' } },
      { id: 'e2', customer: { externalId: 'user_ada' }, name: 'llm_tokens', timestamp: at(now), properties: { tokens: 3_500, tier: 'free' } },
    ];
    const ingested = await ctx.merchant.post('/v1/usage-events').set('X-API-Key', key).send({ events });
    expect(ingested.body.data.results.map((r: { status: string }) => r.status)).toEqual(['ACCEPTED', 'ACCEPTED']);
    // Credits: 3,000 tokens on top of the subscription's included units, and a prepaid Images
    // meter (no subscription bills it) with 100 credits of which 30 are used.
    const images = await ctx.merchant.post('/v1/meters').set('X-API-Key', key).send({ name: 'Images', source: 'EVENTS', filter: { eventName: 'image' }, aggregation: 'count' });
    const packs = await Promise.all([
      ctx.admin.post(`/v1/products/${product.id}/prices`).send({ amount: 1000, currency: 'USD', pricingName: '3,000 tokens', grantsUnits: { meterId: tokensMeter, units: 3_000 } }),
      ctx.admin.post(`/v1/products/${product.id}/prices`).send({ amount: 500, currency: 'USD', pricingName: '100 images', grantsUnits: { meterId: images.body.data.id, units: 100 } }),
    ]);
    for (const pack of packs) {
      expect(pack.status, JSON.stringify(pack.body)).toBe(201);
      await buy(ctx, 'ada@example.com', pack.body.data.pricingId, key);
    }
    const imageEvents = Array.from({ length: 30 }, (_, i) => ({ id: `i${i}`, customer: { externalId: 'user_ada' }, name: 'image', timestamp: at(ctx.clock.now().getTime()), properties: {} }));
    expect((await ctx.merchant.post('/v1/usage-events').set('X-API-Key', key).send({ events: imageEvents })).body.data.accepted).toBe(30);
  }, 180_000);
  afterAll(async () => {
    await h?.close();
  });

  it('a new meter with the keyboard only: the preview follows the filter being typed; then edited and archived with the mouse', async () => {
    const page = await h.signedInPage('owner');
    await page.goto(`${h.origin}/console/meters`);
    await page.getByRole('heading', { name: 'Active meters' }).waitFor();
    // The heading renders before the list's data arrives: wait for the row rather than count at once.
    // Tokens and Images (the prepaid meter of the balances below).
    await expect.poll(() => page.locator('[data-testid=meter-row]').count(), { timeout: 15_000 }).toBe(2);
    expect(await page.locator('[data-testid=meter-row]').filter({ hasText: 'Tokens' }).innerText()).toContain('sum of tokens over llm_tokens events');
    await h.check(page, 'meters-list');

    await activate(page, 'a[href="/console/meters/new"]');
    await page.getByRole('heading', { name: 'New meter' }).first().waitFor();
    const status = page.getByTestId('preview-status');
    expect(await status.innerText()).toContain('No preview yet: give the event name');
    await tabTo(page, '#meter-name');
    await page.keyboard.type('Paid tokens');
    await tabTo(page, '#meter-event-name');
    await page.keyboard.type('llm_tokens');
    await tabTo(page, '#meter-property');
    await page.keyboard.type('tokens');
    // Same definition as the saved meter's: read from its rollup.
    await status.filter({ hasText: 'Total 15,500' }).waitFor();
    expect(await status.innerText()).toContain("read from the saved meter's hourly rollup");
    // Back to the properties (before the aggregation and the property): Shift+Tab.
    for (let i = 0; i < 5 && !(await page.evaluate(`document.activeElement?.id === 'meter-pairs'`)); i++) await page.keyboard.press('Shift+Tab');
    await page.keyboard.type('tier=paid');
    await status.filter({ hasText: 'Total 12,000' }).waitFor();
    expect(await status.innerText()).toContain('computed from the usage events');
    // The table holds the same numbers as the chart: 30 days, today's 12,000.
    await tabTo(page, '[data-testid=meter-preview] summary');
    await page.keyboard.press('Enter');
    const days = page.locator('[data-testid=preview-table] tbody tr');
    expect(await days.count()).toBe(30);
    expect(await days.last().innerText()).toContain('12,000');
    await h.check(page, 'meters-new');
    await tabTo(page, 'button[type=submit].primary');
    await Promise.all([page.waitForURL(/\/console\/meters\/MTR_/), page.keyboard.press('Enter')]);
    await page.getByRole('heading', { name: 'Paid tokens' }).waitFor();

    // The mouse: rename, then archive.
    const name = page.getByLabel('Name', { exact: true });
    await name.fill('Paid LLM tokens');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('heading', { name: 'Paid LLM tokens' }).waitFor();
    expect(await page.getByLabel('Properties to match (optional, one key=value per line)').inputValue()).toBe('tier=paid');
    await status.filter({ hasText: "read from the saved meter's hourly rollup" }).waitFor();
    await h.check(page, 'meters-edit');
    await page.getByRole('button', { name: 'Archive meter' }).click();
    await page.getByRole('dialog').getByRole('button', { name: /Archive/ }).click();
    await page.getByText('archived', { exact: true }).waitFor();
    expect(await page.getByRole('button', { name: 'Save changes' }).count()).toBe(0);
    expect(h.pageErrors).toEqual([]);
  });

  it("a customer's page shows their usage this period per meter, the estimated next charge, and their credits and balances per meter", async () => {
    const page = await h.signedInPage('viewer');
    await page.goto(`${h.origin}/console/customers/${customerId}`);
    await page.getByRole('heading', { name: 'Usage this period' }).waitFor();
    const row = page.locator('[data-testid=usage-row]');
    await row.waitFor();
    const text = await row.innerText();
    expect(text).toContain('Tokens');
    expect(text).toContain('15,500');
    expect(text).toContain('10,000 included · 5,500 billed × $0.00004');
    expect(text).toContain('$0.22');
    expect(await page.getByTestId('usage-estimate-total').innerText()).toBe('$20.22');

    // Credits and balances per meter (getConsoleCustomerUsage's balances).
    await page.getByRole('heading', { name: 'Credits and balances' }).waitFor();
    const balances = page.locator('[data-testid=balance-row]');
    await expect.poll(() => balances.count(), { timeout: 15_000 }).toBe(2);
    const tokensRow = await balances.filter({ hasText: 'Tokens' }).innerText();
    // 15,500 used: 10,000 included, then the 3,000 credits (drawn at the close), 2,500 over.
    expect(tokensRow).toContain('This period, from');
    expect(tokensRow).toContain('15,500');
    expect(tokensRow).toContain('0 of 10,000');
    expect(tokensRow).toContain('of 3,000 held, 3,000 drawn at the close');
    expect(tokensRow).toContain('2,500 over: billed at the close');
    const imagesRow = await balances.filter({ hasText: 'Images' }).innerText();
    expect(imagesRow).toContain('Prepaid, since');
    expect(imagesRow).toContain('70');
    expect(imagesRow).toContain('of 100 held');
    // Keyboard: the balances' meter links are reachable with Tab and open the meter.
    await tabTo(page, '[data-testid=balance-row] a');
    const focused = (await page.evaluate('document.activeElement?.textContent')) as string;
    expect(['Tokens', 'Images']).toContain(focused);
    await h.check(page, 'customer-usage');
    // At 390 px the included column folds away; the rest stays readable.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.locator('[data-testid=balances-table] th.hide-narrow').isVisible()).toBe(false);
    expect(await balances.filter({ hasText: 'Images' }).locator('td').last().innerText()).toContain('70');
    await page.getByTestId('customer-balances').screenshot({ path: 'test/e2e/.artifacts/screenshots/console/customer-balances-390.png' });
    await Promise.all([page.waitForURL(/\/console\/meters\/MTR_/), page.keyboard.press('Enter')]);
    expect(h.pageErrors).toEqual([]);
  });

  it("the portal shows the buyer's usage this period and the estimated next charge, keyboard reachable", async () => {
    const link = await h.ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', h.ctx.orgA.apiKey).send({ customerId });
    expect(link.status).toBe(201);
    const page = await h.newPage();
    await page.goto(`${h.origin}${new URL(link.body.data.url).pathname}`);
    await activate(page, '[data-testid=enter]');
    await page.getByRole('heading', { name: 'Usage this period' }).waitFor();
    const lines = page.locator('[data-testid=usage-line]');
    expect(await lines.count()).toBe(2);
    expect(await lines.nth(1).innerText()).toContain('15,500 used, 10,000 included: 5,500 × $0.00004');
    expect(await page.getByTestId('usage-estimate-total').innerText()).toBe('$20.22');
    await tabTo(page, '[data-testid=receipt-link]');
    await h.check(page, 'portal-usage');
  });
});
