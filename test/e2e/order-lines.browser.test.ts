/**
 * Order lines in Chromium, desktop and 390 px, axe-core: the console's order page and the portal's
 * receipt show a usage order's lines (a fixed fee, tokens at 0.04 USD per 1,000 with 10,000
 * included, graduated requests, a prepaid credit) and the total they add up to; an order stored
 * before lines (the seed writes rows directly) shows its one derived line. Screenshots:
 * test/e2e/.artifacts/screenshots/console/order-lines-*.png and receipt-lines-*.png.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { activate } from '../harness/accessibility.js';
import { seedCommerce, startConsoleHarness, type ConsoleHarness } from '../harness/console-browser.js';
import { KnexOrderRepository } from '../../src/orders/order.repository.js';
import { pricePeriod } from '../../src/commerce/pricing.js';
import { newId } from '../../src/kernel/ids.js';
import type { Order } from '../../src/commerce/model.js';

let h: ConsoleHarness & { newPage(viewport?: { width: number; height: number }): Promise<Page> };
let usageOrder: Order;
let seededOrderId: string;

describe.skipIf(!chromiumAvailable)(skippedUnless('order lines in the console and on receipts', 'chromium'), () => {
  beforeAll(async () => {
    h = (await startConsoleHarness()) as typeof h;
    const ctx = h.ctx;
    seededOrderId = (await seedCommerce(ctx, ctx.orgA.orgId, 3)).cardOrderId;
    // A customer through a real checkout, then a renewal-like usage order for them.
    const created = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'lines-browser')
      .send({ pricingData: { amount: 1500, currency: 'USD', productData: { name: 'Pro plan' } }, customerEmail: 'ada@example.com' });
    const paid = await ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
    expect(paid.status).toBe(303);
    const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    const repo = new KnexOrderRepository(ctx.testDb.database.db);
    const first = (await repo.find(ctx.orgA.orgId, session.orderId))!;
    const priced = pricePeriod([
      { kind: 'PRICE', description: 'Pro plan', quantity: 1, unitAmount: '1500' },
      { kind: 'USAGE', description: 'Tokens (gpt-4o-mini)', meterId: 'MTR_tokens', quantity: '1234567', includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmount: '0.004' } },
      {
        kind: 'USAGE',
        description: 'API requests',
        meterId: 'MTR_requests',
        quantity: 1500,
        pricing: { model: 'GRADUATED', tiers: [{ upTo: 1000, unitAmount: '0.5' }, { upTo: null, unitAmount: '0.25', flatAmount: 100 }] },
      },
      { kind: 'CREDIT', description: 'Prepaid credit', amount: 500 },
    ]);
    usageOrder = { ...first, id: newId('ORD'), checkoutSessionId: null, amountCents: priced.total, lines: priced.lines, createdAt: ctx.clock.now(), updatedAt: ctx.clock.now() };
    await repo.insert(usageOrder);
  });
  afterAll(async () => {
    await h?.close();
  });

  it("the console's order page lists the lines and their total", async () => {
    const page = await h.signedInPage('owner');
    await page.goto(`${h.origin}/console/orders/${usageOrder.id}`);
    await page.getByRole('heading', { name: 'Lines', level: 2 }).waitFor();
    const rows = page.locator('[data-testid=order-line]');
    expect(await rows.count()).toBe(4);
    expect(await rows.nth(1).innerText()).toContain('1,234,567');
    expect(await rows.nth(1).innerText()).toContain('10,000 included · 1,224,567 billed × $0.00004');
    expect(await rows.nth(1).innerText()).toContain('$48.98');
    expect(await rows.nth(3).innerText()).toContain('−$5.00');
    // 15.00 + 48.98 (4,898.268 cents, rounded once) + 5.00 + 1.25 + 1.00 − 5.00
    expect(await page.getByTestId('order-lines-total').innerText()).toBe(`$${(usageOrder.amountCents / 100).toFixed(2)}`);
    expect(usageOrder.amountCents).toBe(1500 + 4898 + 725 - 500);
    await h.check(page, 'order-lines');
    if (seededOrderId) {
      await page.goto(`${h.origin}/console/orders/${seededOrderId}`);
      await page.getByRole('heading', { name: 'Lines', level: 2 }).waitFor();
      expect(await page.locator('[data-testid=order-line]').count()).toBe(1);
    }
    expect(h.pageErrors).toEqual([]);
  });

  it("the portal's receipt shows the same lines, keyboard reachable", async () => {
    const link = await h.ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', h.ctx.orgA.apiKey).send({ customerId: usageOrder.customerId, returnUrl: 'https://shop.example.com/account' });
    expect(link.status).toBe(201);
    const page = await h.newPage();
    await page.goto(`${h.origin}${new URL(link.body.data.url).pathname}`);
    await activate(page, '[data-testid=enter]');
    await page.goto(`${h.origin}/portal/orders/${usageOrder.id}`);
    const rows = page.locator('[data-testid=receipt-line]');
    expect(await rows.count()).toBe(4);
    expect(await rows.nth(1).innerText()).toContain('1,234,567 used, 10,000 included: 1,224,567 × $0.00004');
    expect(await rows.nth(3).innerText()).toContain('−$5.00');
    expect(await page.getByTestId('receipt-total').innerText()).toBe(`$${(usageOrder.amountCents / 100).toFixed(2)}`);
    await h.check(page, 'receipt-lines');
  });
});
