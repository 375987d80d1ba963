/**
 * The portal's plan change (issue 39, item 3) in headless Chromium: the merchant opens a portal
 * session with `planChangePriceIds` and `allowQuantityChange`; the buyer goes to "Change plan…",
 * picks the bigger price and two seats, reads the proration preview and confirms — keyboard only
 * (Tab, arrow keys in the radio group, Enter, Space), on a desktop and a 390 px phone, every page
 * axe-core clean with no horizontal overflow. The order with the two PRORATION lines is read back
 * through the API and equals the preview; the portal shows the new plan and its seats. A downgrade
 * by mouse is scheduled for the period's end; an immediate downgrade ("now, with credit for the
 * unused time") by keyboard at 390 px and by mouse on a desktop shows its credit before confirming,
 * and the credit balance on the account page. Screenshots: test/e2e/.artifacts/screenshots/portal-plan-*.png.
 */
import { mkdirSync } from 'node:fs';
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { chromiumAvailable, launchChromium, serveOnLoopback } from '../harness/browser.js';
import { activate, axeViolations, tabTo } from '../harness/accessibility.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { createTestContext, type TestContext } from '../harness/context.js';

const ARTIFACTS = process.env.KASSA_SHOTS_DIR ?? 'test/e2e/.artifacts/screenshots';

let ctx: TestContext;
let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let origin: string;
let browser: Browser;
let pro: string;
let team: string;
let starter: string;
let n = 0;

async function check(page: Page, name: string): Promise<void> {
  expect(await axeViolations(page), `${name}: axe`).toEqual([]);
  const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
  expect(overflow, `${name}: horizontal overflow`).toBeLessThanOrEqual(0);
  await page.screenshot({ path: `${ARTIFACTS}/portal-plan-${name}.png`, fullPage: true });
}

async function buy(email: string, pricingId: string) {
  const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `portal-plan-${++n}`).send({ pricingId, customerEmail: email, merchantReference: `plan-${n}` });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const path = new URL(created.body.data.url).pathname;
  const paid = await supertest(ctx.apps.merchant).post(`${path}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const subscription = await ctx.testDb.database.db('subscriptions').where({ customer_email: email }).first();
  return { subscriptionId: subscription.id as string, customerId: subscription.customer_id as string };
}

async function openPortal(customerId: string, viewport: { width: number; height: number }, planChangePriceIds = [team, starter]) {
  const link = await ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', ctx.orgA.apiKey).send({ customerId, returnUrl: 'https://shop.example.com/account', planChangePriceIds, allowQuantityChange: true });
  expect(link.status, JSON.stringify(link.body)).toBe(201);
  const context = await browser.newContext({ viewport, bypassCSP: true });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${origin}${new URL(link.body.data.url).pathname}`);
  await activate(page, '[data-testid=enter]');
  expect(new URL(page.url()).pathname).toBe('/portal');
  return { context, page, errors };
}

const text = async (page: Page, testId: string) => (await page.getByTestId(testId).first().innerText()).replace(/\s+/g, ' ').trim();
/** How many lines an element's text takes (an amount must take one: at 390 px "−$6.00" broke over three). */
const textLines = (page: Page, selector: string) =>
  page.evaluate(`[...document.querySelectorAll(${JSON.stringify(selector)})].map((e) => { const r = document.createRange(); r.selectNodeContents(e); return new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size; })`) as Promise<number[]>;

describe.skipIf(!chromiumAvailable)(skippedUnless('the portal plan change in a browser', 'chromium'), () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    ctx = await createTestContext();
    served = await serveOnLoopback(ctx.apps.merchant);
    origin = served.origin;
    browser = await launchChromium();
    const monthly = { currency: 'USD', pricingType: 'SUBSCRIPTION' as const, billingInterval: 'MONTH' as const, billingIntervalCount: 1 };
    pro = (await ctx.services.catalog.createPrice((await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' })).id, { amount: 900, ...monthly })).id;
    team = (await ctx.services.catalog.createPrice((await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Team plan' })).id, { amount: 2000, ...monthly })).id;
    starter = (await ctx.services.catalog.createPrice((await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Starter plan' })).id, { amount: 500, ...monthly })).id;
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
    await ctx?.close();
  });

  for (const viewport of [
    { name: 'desktop', width: 1280, height: 900 },
    { name: 'phone', width: 390, height: 844 },
  ]) {
    it(`a buyer upgrades to the bigger plan with two seats, keyboard only, and pays the proration (${viewport.name})`, async () => {
      ctx.clock.set('2026-11-22T09:00:00.000Z');
      const { subscriptionId, customerId } = await buy(`upgrade-${viewport.name}@example.com`, pro);
      ctx.clock.set('2026-12-02T09:00:00.000Z'); // ten days into the month
      const { context, page, errors } = await openPortal(customerId, viewport);
      await check(page, `${viewport.name}-home`);

      await activate(page, `[data-testid=change-${subscriptionId}]`);
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Change Pro plan');
      expect(await text(page, 'plan-now')).toBe('Now: 1 × Pro plan, $9.00 every month');
      // Each radio sits on the line of its plan's name, left of it (they were centred above their text).
      for (const choice of await page.locator('label.choice').all()) {
        const radio = (await choice.locator('input').boundingBox())!;
        const name = (await choice.locator('span').first().boundingBox())!;
        expect(radio.x + radio.width).toBeLessThanOrEqual(name.x);
        expect(Math.abs(radio.y - name.y)).toBeLessThan(12);
      }
      expect(await page.getByLabel(/Team plan/).count()).toBe(1);
      expect((await page.locator('label.choice:has(input[name=priceId])').allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim())).toEqual([
        'Keep Pro plan $9.00 per seat every month',
        'Team plan $20.00 per seat every month',
        'Starter plan $5.00 per seat every month',
      ]);
      await check(page, `${viewport.name}-choose`);
      // The radio group: Tab lands on the checked "Keep" radio, the arrow keys move the choice.
      await tabTo(page, 'input[type=radio]');
      expect(await page.evaluate('document.activeElement.value')).toBe('');
      for (let i = 0; i < 3 && (await page.evaluate('document.activeElement.value')) !== team; i++) await page.keyboard.press('ArrowDown');
      expect(await page.evaluate('document.activeElement.value')).toBe(team);
      expect(await page.locator(`input[value="${team}"]`).isChecked()).toBe(true);
      await page.keyboard.press('Tab');
      expect(await page.evaluate('document.activeElement.id')).toBe('quantity');
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.type('2');
      // The downgrade's "when" (an upgrade is charged now either way): left at the period's end.
      await page.keyboard.press('Tab');
      expect(await page.evaluate('document.activeElement.value')).toBe('period_end');
      await page.keyboard.press('Tab');
      expect(await page.evaluate('document.activeElement.dataset.testid')).toBe('preview-change');
      await Promise.all([page.waitForNavigation(), page.keyboard.press('Space')]);

      // The preview: the two proration lines, the total, what each renewal charges from now on.
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Confirm the change');
      const quote = await ctx.services.subscriptions.previewChange(subscriptionId, { priceId: team, quantity: 2 }, { orgId: ctx.orgA.orgId });
      expect(quote.lines).toHaveLength(2);
      const lines = await page.getByTestId('preview-line').allTextContents();
      expect(lines).toHaveLength(2);
      expect(lines[0]).toContain('Unused time');
      expect(lines[0]).toContain('−$');
      expect(lines[1]).toContain('Remaining time');
      // The period's end as the pages print dates ("22 December 2026"), not ISO.
      for (const line of lines) expect(line).toMatch(/ until \d{1,2} (January|February|March|April|May|June|July|August|September|October|November|December) \d{4}/);
      const due = `$${(quote.amountDue / 100).toFixed(2)}`;
      expect(await text(page, 'preview-total')).toBe(due);
      expect(await text(page, 'confirm-change')).toBe(`Confirm and pay ${due}`);
      expect(await text(page, 'preview-summary')).toBe('From 1 × Pro plan, $9.00 every month to 2 × Team plan, $40.00 every month');
      expect(await text(page, 'preview-next')).toBe('Then $40.00 at each renewal.');
      expect(await textLines(page, '[data-testid=preview-lines] .num')).toEqual([1, 1, 1, 1]);
      await check(page, `${viewport.name}-preview`);
      await activate(page, '[data-testid=confirm-change]');

      // Charged as one order of PRORATION lines, equal to the preview; the page shows the new plan.
      expect(await text(page, 'notice')).toBe(`Your subscription is now 2 × Team plan; ${due} was charged.`);
      const orders = await ctx.merchant.get(`/v1/orders?subscription_id=${subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey);
      expect(orders.status).toBe(200);
      const records = orders.body.data.records as Array<{ orderId: string }>;
      expect(records).toHaveLength(2);
      const full = await Promise.all(records.map(async (o) => (await ctx.merchant.get(`/v1/orders/${o.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data));
      const prorated = full.filter((o: { lines: Array<{ kind: string }> }) => o.lines.some((l) => l.kind === 'PRORATION'));
      expect(prorated).toHaveLength(1);
      const order = prorated[0];
      expect(order.status).toBe('PAID');
      expect(order.amountCents).toBe(quote.amountDue);
      expect(order.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual(quote.lines.map((l) => ['PRORATION', l.amount]));
      const subscription = (await ctx.merchant.get(`/v1/subscriptions/${subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
      expect(subscription).toMatchObject({ priceId: team, quantity: 2, amountCents: 4000 });
      expect(await page.locator('[data-testid=subscription] h3').textContent()).toBe('Team plan');
      expect(await text(page, 'subscription-price')).toBe('2 seats × $20.00 = $40.00 every month');
      expect(await page.getByTestId('scheduled-change').count()).toBe(0);
      expect(await page.getByTestId('order').count()).toBe(2);
      await check(page, `${viewport.name}-upgraded`);
      expect(errors).toEqual([]);
      await context.close();
    });
  }

  it('a downgrade chosen with the mouse is scheduled for the end of the period, nothing charged now (phone)', async () => {
    ctx.clock.set('2026-11-22T09:00:00.000Z');
    const { subscriptionId, customerId } = await buy('downgrade@example.com', pro);
    ctx.clock.set('2026-12-02T09:00:00.000Z');
    const { context, page, errors } = await openPortal(customerId, { width: 390, height: 844 });
    await page.getByTestId(`change-${subscriptionId}`).click();
    await page.getByLabel(/Starter plan/).check();
    await Promise.all([page.waitForNavigation(), page.getByTestId('preview-change').click()]);
    expect(await text(page, 'preview-when')).toBe('This takes effect on 22 December 2026, when your subscription renews. Nothing is charged now.');
    expect(await page.getByTestId('preview-line').count()).toBe(0);
    expect(await text(page, 'confirm-change')).toBe('Confirm the change');
    await check(page, 'downgrade-preview');
    await Promise.all([page.waitForNavigation(), page.getByTestId('confirm-change').click()]);
    expect(await text(page, 'notice')).toBe('From 22 December 2026 your subscription is 1 × Starter plan, $5.00 every month; nothing was charged now.');
    // The scheduled change reads with the status it changes, above the buttons (it trailed after them).
    expect(await text(page, 'scheduled-change')).toBe('Changes on 22 December 2026 to 1 × Starter plan, $5.00 every month.');
    const [scheduledBox, changeBox] = [await page.getByTestId('scheduled-change').boundingBox(), await page.getByTestId(`change-${subscriptionId}`).boundingBox()];
    expect(scheduledBox!.y).toBeLessThan(changeBox!.y);
    expect(await text(page, 'subscription-price')).toBe('$9.00 every month');
    expect(await page.locator('[data-testid=subscription] h3').textContent()).toBe('Pro plan');
    const orders = await ctx.merchant.get(`/v1/orders?subscription_id=${subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey);
    expect(orders.body.data.records).toHaveLength(1);
    const subscription = (await ctx.merchant.get(`/v1/subscriptions/${subscriptionId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(subscription).toMatchObject({ priceId: pro, quantity: 1, scheduledChange: { priceId: starter, quantity: 1 } });
    await check(page, 'downgrade-scheduled');
    expect(errors).toEqual([]);
    await context.close();
  });

  for (const viewport of [
    { name: 'phone', width: 390, height: 844, keyboard: true },
    { name: 'desktop', width: 1280, height: 900, keyboard: false },
  ]) {
    it(`a downgrade now, with credit for the unused time: previewed with its credit, confirmed, the balance shown (${viewport.name}, ${viewport.keyboard ? 'keyboard' : 'mouse'})`, async () => {
      ctx.clock.set('2026-11-22T09:00:00.000Z');
      const { subscriptionId, customerId } = await buy(`downgrade-now-${viewport.name}@example.com`, pro);
      ctx.clock.set('2026-12-02T09:00:00.000Z');
      const { context, page, errors } = await openPortal(customerId, viewport);
      expect(await page.getByTestId('credit-balance').count()).toBe(0);
      if (viewport.keyboard) {
        await activate(page, `[data-testid=change-${subscriptionId}]`);
        await tabTo(page, 'input[name=priceId]');
        for (let i = 0; i < 3 && (await page.evaluate('document.activeElement.value')) !== starter; i++) await page.keyboard.press('ArrowDown');
        expect(await page.locator(`input[value="${starter}"]`).isChecked()).toBe(true);
        await tabTo(page, 'input[name=when]');
        await page.keyboard.press('ArrowDown');
        expect(await page.locator('input[name=when][value=now]').isChecked()).toBe(true);
        await check(page, `downgrade-now-${viewport.name}-choose`);
        await tabTo(page, '[data-testid=preview-change]');
        await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
      } else {
        await Promise.all([page.waitForNavigation(), page.getByTestId(`change-${subscriptionId}`).click()]);
        await page.getByLabel(/Starter plan/).check();
        await page.getByLabel(/Now, with credit for the unused time/).check();
        await check(page, `downgrade-now-${viewport.name}-choose`);
        await Promise.all([page.waitForNavigation(), page.getByTestId('preview-change').click()]);
      }
      // The preview is the order the change leaves: the two PRORATION lines and the BALANCE line, nothing due.
      const quote = await ctx.services.subscriptions.previewChange(subscriptionId, { priceId: starter, effective: 'IMMEDIATE' }, { orgId: ctx.orgA.orgId });
      const credit = quote.balanceCredit!;
      expect(credit).toBeGreaterThan(0);
      const usd = (minor: number) => `$${(minor / 100).toFixed(2)}`;
      const lines = (await page.getByTestId('preview-line').allTextContents()).map((l) => l.replace(/\s+/g, ' '));
      expect(lines).toHaveLength(3);
      expect(lines[0]).toContain('Unused time');
      expect(lines[2]).toContain('Credit added to your balance');
      expect(await text(page, 'preview-total')).toBe('$0.00');
      expect(await text(page, 'preview-credit')).toBe(`${usd(credit)} is added to your credit balance and taken off your next renewals. It is not paid out.`);
      expect(await text(page, 'preview-next')).toBe('Then $5.00 at each renewal.');
      expect(await text(page, 'confirm-change')).toBe('Confirm the change');
      expect(await textLines(page, '[data-testid=preview-lines] .num')).toEqual([1, 1, 1, 1, 1]);
      await check(page, `downgrade-now-${viewport.name}-preview`);
      if (viewport.keyboard) await activate(page, '[data-testid=confirm-change]');
      else await Promise.all([page.waitForNavigation(), page.getByTestId('confirm-change').click()]);

      expect(await text(page, 'notice')).toBe(`Your subscription is now 1 × Starter plan; ${usd(credit)} was added to your credit balance.`);
      expect(await text(page, 'credit-balance')).toBe(`${usd(credit)} taken off your next renewals in USD`);
      expect(await page.locator('[data-testid=subscription] h3').textContent()).toBe('Starter plan');
      const balance = await ctx.merchant.get(`/v1/customers/${customerId}/balance`).set('X-API-Key', ctx.orgA.apiKey);
      expect(balance.body.data.balances).toEqual([expect.objectContaining({ currency: 'USD', amountCents: credit })]);
      await check(page, `downgrade-now-${viewport.name}-done`);
      expect(errors).toEqual([]);
      await context.close();
    });
  }

  it('a taxed subscription’s plans are compared before tax: "Keep" and "Now" on the same basis as the other plans (phone)', async () => {
    // Before: "Keep Pro plan $10.71 per seat" (9.00 with 19 % VAT, the stored amount) beside "Team plan $20.00" before tax.
    const rate = await ctx.services.modules.tax.tax.create(ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' });
    const created = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', `portal-plan-${++n}`)
      .send({ pricingId: pro, quantity: 2, customerEmail: 'taxed@example.com', customerTax: { country: 'DE' } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect((await supertest(ctx.apps.merchant).post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' })).status).toBe(303);
    const subscription = await ctx.testDb.database.db('subscriptions').where({ customer_email: 'taxed@example.com' }).first();
    expect(subscription.amount_cents).toBe(2142);
    const { context, page, errors } = await openPortal(subscription.customer_id, { width: 390, height: 844 });
    await Promise.all([page.waitForNavigation(), page.locator(`a[href="/portal/subscriptions/${subscription.id}/change"]`).click()]);
    expect(await text(page, 'plan-now')).toBe('Now: 2 × Pro plan, $18.00 every month before tax');
    expect(await text(page, 'plan-tax')).toBe('Prices before tax: the review shows the tax of the change, as your receipts do.');
    const choices = (await page.locator('fieldset label.choice').allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim());
    expect(choices.slice(0, 2)).toEqual(['Keep Pro plan $9.00 per seat every month', 'Team plan $20.00 per seat every month']);
    await check(page, 'taxed-change');
    expect(errors).toEqual([]);
    await context.close();
    await ctx.services.modules.tax.tax.archive(ctx.orgA.orgId, rate.id);
  });

  it('two prices of one product read apart where the buyer chooses, by keyboard on a 390 px phone and on a desktop', async () => {
    const monthly = { currency: 'USD', pricingType: 'SUBSCRIPTION' as const, billingInterval: 'MONTH' as const, billingIntervalCount: 1 };
    const studio = (await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Studio' })).id;
    const basic = (await ctx.services.catalog.createPrice(studio, { amount: 1000, ...monthly, pricingName: 'Basic' })).id;
    const plus = (await ctx.services.catalog.createPrice(studio, { amount: 1000, ...monthly, pricingName: 'Plus (priority support)' })).id;
    const { subscriptionId, customerId } = await buy('studio-choices@example.com', basic);
    for (const viewport of [{ name: 'phone', width: 390, height: 844 }, { name: 'desktop', width: 1280, height: 900 }]) {
      const { context, page, errors } = await openPortal(customerId, viewport, [plus, team]);
      await activate(page, `[data-testid=change-${subscriptionId}]`);
      const choices = (await page.locator('label.choice:has(input[name=priceId])').allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim());
      // The price kept is named too (before: "Keep Studio", which of the two?).
      expect(await text(page, 'plan-now')).toBe('Now: 1 × Studio — Basic, $10.00 every month');
      expect(choices).toEqual(['Keep Studio — Basic $10.00 per seat every month', 'Studio — Plus (priority support) $10.00 per seat every month', 'Team plan $20.00 per seat every month']);
      await tabTo(page, 'input[type=radio]');
      await page.keyboard.press('ArrowDown');
      expect(await page.evaluate('document.activeElement.value')).toBe(plus);
      expect(await page.getByLabel('Studio — Plus (priority support)').isChecked()).toBe(true);
      await check(page, `named-prices-${viewport.name}`);
      expect(errors).toEqual([]);
      await context.close();
    }
  });
});
