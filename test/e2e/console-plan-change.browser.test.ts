/**
 * The console's subscription page with the plan-change work of issue 39, in headless Chromium:
 * the free-trial line ("until … · first charge …"), the seats, and "Change plan or seats" with
 * its proration preview and confirmation (the merchant API's previewSubscriptionChange and
 * changeSubscription, through the generated client). An upgrade with seats by keyboard on a
 * 390 px phone, a downgrade by mouse on a desktop (scheduled at the period's end); every state
 * axe-core clean with no horizontal overflow at both widths; the price picker's chosen option shown
 * whole at 390 px (wrapped, not cut off). Screenshots:
 * test/e2e/.artifacts/screenshots/console/subscription-plan-*.png.
 */
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { PHONE, startConsoleHarness, type ConsoleHarness } from '../harness/console-browser.js';
import { tabTo } from '../harness/accessibility.js';

let h: ConsoleHarness;
let pro: string;
let team: string;
let starter: string;
let n = 0;

async function buy(email: string, pricingId: string, extra: Record<string, unknown> = {}): Promise<string> {
  const created = await h.ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', h.ctx.orgA.apiKey).set('Idempotency-Key', `console-plan-${++n}`).send({ pricingId, customerEmail: email, ...extra });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const paid = await supertest(h.ctx.apps.merchant).post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  return (await h.ctx.testDb.database.db('subscriptions').where({ customer_email: email }).first()).id as string;
}

const field = async (page: Page, name: string) => ((await page.locator('dl.fields > div').filter({ has: page.getByRole('term').filter({ hasText: new RegExp(`^${name}$`) }) }).locator('dd').innerText()) ?? '').replace(/\s+/g, ' ').trim();
/**
 * The price picker's chosen option, as drawn (a native select cuts its closed text off — "… per seat
 * every month" was clipped at 390 px — so plan-change.tsx draws it in a wrapping box the transparent
 * select covers): the box's text is the select's chosen option, none of it overflows its box, and the
 * select covers the box exactly (clicks and taps reach the select).
 */
const shownPrice = (page: Page) =>
  page.evaluate(`(() => {
    const shown = document.querySelector('[data-testid=price-shown]');
    const select = shown.parentElement.querySelector('select');
    const [a, b] = [shown.getBoundingClientRect(), select.getBoundingClientRect()];
    return {
      text: shown.textContent.trim(),
      chosen: select.selectedOptions[0]?.textContent?.trim(),
      fits: shown.scrollWidth <= shown.clientWidth && shown.scrollHeight <= shown.clientHeight && a.right <= document.documentElement.clientWidth,
      covered: [a.left - b.left, a.top - b.top, a.width - b.width, a.height - b.height].every((d) => Math.abs(d) < 0.5),
      hidden: shown.getAttribute('aria-hidden') === 'true' && getComputedStyle(select).opacity === '0',
      height: a.height,
    };
  })()`) as Promise<{ text: string; chosen?: string; fits: boolean; covered: boolean; hidden: boolean; height: number }>;
const focused = (page: Page) => page.evaluate('`${document.activeElement?.tagName.toLowerCase()}:${document.activeElement?.textContent?.trim().slice(0, 40) ?? ""}`') as Promise<string>;

describe.skipIf(!chromiumAvailable)(skippedUnless('the console plan change', 'chromium'), () => {
  beforeAll(async () => {
    h = await startConsoleHarness();
    const monthly = { currency: 'USD', pricingType: 'SUBSCRIPTION' as const, billingInterval: 'MONTH' as const, billingIntervalCount: 1 };
    const catalog = h.ctx.services.catalog;
    pro = (await catalog.createPrice((await catalog.createProduct(h.ctx.orgA.orgId, { name: 'Pro plan' })).id, { amount: 900, ...monthly })).id;
    team = (await catalog.createPrice((await catalog.createProduct(h.ctx.orgA.orgId, { name: 'Team plan' })).id, { amount: 2000, ...monthly })).id;
    starter = (await catalog.createPrice((await catalog.createProduct(h.ctx.orgA.orgId, { name: 'Starter plan' })).id, { amount: 500, ...monthly })).id;
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a subscription in its free trial says until when and what the first charge is', async () => {
    const id = await buy('trial@console.test', pro, { trialDays: 14 });
    const page = await h.signedInPage('owner');
    await page.goto(`${h.origin}/console/subscriptions/${id}`);
    await page.getByRole('heading', { name: `Subscription ${id}`, level: 1 }).waitFor();
    expect(await field(page, 'Free trial')).toMatch(/^until .+ · first charge \$9\.00$/);
    expect(await field(page, 'Seats')).toBe('1');
    // Which of the product's prices it is, by name and terms (shared/price-label.ts).
    expect(await field(page, 'Plan')).toBe('Pro plan — $9.00 per seat / month');
    await page.getByRole('heading', { name: 'Change plan or seats' }).waitFor();
    await h.check(page, 'subscription-plan-trial');
  });

  it('an upgrade to three seats of the bigger plan, previewed and confirmed with the keyboard (390 px)', async () => {
    const id = await buy('upgrade@console.test', pro);
    h.ctx.clock.set(new Date(h.ctx.clock.now().getTime() + 10 * 86_400_000)); // ten days into the period
    const page = await h.signedInPage('owner', PHONE);
    await page.goto(`${h.origin}/console/subscriptions/${id}`);
    await page.getByRole('heading', { name: `Subscription ${id}`, level: 1 }).waitFor();
    const form = page.getByRole('form', { name: 'Change plan or seats' });
    await expect.poll(async () => (await form.getByLabel('Price').locator('option').allTextContents()).sort(), { timeout: 15_000 }).toEqual(['Pro plan — $9.00 per seat / month (current)', 'Starter plan — $5.00 per seat / month', 'Team plan — $20.00 per seat / month']);
    // At 390 px the chosen price is shown whole, on two lines.
    const current = await shownPrice(page);
    expect(current).toMatchObject({ text: 'Pro plan — $9.00 per seat / month (current)', chosen: 'Pro plan — $9.00 per seat / month (current)', fits: true, covered: true, hidden: true });
    expect(current.height).toBeGreaterThan(50);
    await h.check(page, 'subscription-plan-form');

    await tabTo(page, 'select', 80);
    expect(await page.evaluate('document.activeElement?.closest("form")?.getAttribute("aria-labelledby")')).toBe('plan-change-heading');
    await page.keyboard.press('t'); // type-ahead: the closed select jumps to "Team plan …"
    expect(await form.getByLabel('Price').inputValue()).toBe(team);
    expect(await shownPrice(page)).toMatchObject({ text: 'Team plan — $20.00 per seat / month', chosen: 'Team plan — $20.00 per seat / month', fits: true, covered: true });
    await h.check(page, 'subscription-plan-form-focused');
    await page.keyboard.press('Tab');
    expect(await focused(page)).toBe('input:');
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.type('3');
    await page.keyboard.press('Tab');
    expect(await focused(page)).toBe('button:Preview the change');
    await page.keyboard.press('Enter');

    const preview = page.getByRole('region', { name: 'Preview of the change' });
    await preview.waitFor();
    const quote = await h.ctx.services.subscriptions.previewChange(id, { priceId: team, quantity: 3 }, { orgId: h.ctx.orgA.orgId });
    const due = `$${(quote.amountDue / 100).toFixed(2)}`;
    expect((await preview.getByTestId('change-summary').innerText()).replace(/\s+/g, ' ')).toBe('From 1 × Pro plan, $9.00 every month to 3 × Team plan, $60.00 every month');
    expect(await preview.locator('tbody tr').count()).toBe(2);
    expect((await preview.locator('tfoot').textContent())!.replace(/\s+/g, ' ').trim()).toBe(`Total due now${due}`);
    await h.check(page, 'subscription-plan-preview');
    // Focus moves on to the confirmation: the next Tab reaches it, Space confirms.
    await page.keyboard.press('Tab');
    expect(await focused(page)).toBe(`button:Confirm and charge ${due}`);
    await page.keyboard.press('Space');
    await page.getByRole('status').filter({ hasText: `The subscription was changed; ${due} was charged.` }).waitFor();
    await expect.poll(() => field(page, 'Seats')).toBe('3');
    expect(await field(page, 'Price')).toBe('$60.00 every month');
    expect(await field(page, 'Product')).toBe('Team plan');
    const orders = (await h.ctx.merchant.get(`/v1/orders?subscription_id=${id}`).set('X-API-Key', h.ctx.orgA.apiKey)).body.data.records as Array<{ orderId: string; amountCents: number }>;
    expect(orders.map((o) => o.amountCents).sort((a, b) => a - b)).toEqual([900, quote.amountDue].sort((a, b) => a - b));
    await page.getByRole('cell', { name: due }).first().waitFor();
    await h.check(page, 'subscription-plan-upgraded');
  });

  it('a downgrade by mouse is scheduled at the end of the period; nothing is charged now (desktop)', async () => {
    const id = await buy('downgrade@console.test', pro);
    // A day into the period (the harness's clock stands still: a preview in the purchase's own second is refused, its whole-second prorationDate falling before the period's start).
    h.ctx.clock.set(new Date(h.ctx.clock.now().getTime() + 86_400_000));
    const page = await h.signedInPage('owner');
    await page.goto(`${h.origin}/console/subscriptions/${id}`);
    const form = page.getByRole('form', { name: 'Change plan or seats' });
    // The picker reads every product's prices: on a loaded 2-core machine that took over the default second.
    await expect.poll(() => form.getByLabel('Price').locator('option').count(), { timeout: 15_000 }).toBe(3);
    expect(await shownPrice(page)).toMatchObject({ text: 'Pro plan — $9.00 per seat / month (current)', fits: true, covered: true });
    await form.getByLabel('Price').click(); // the mouse reaches the select through the box it covers
    expect(await page.evaluate('document.activeElement?.tagName')).toBe('SELECT');
    await page.keyboard.press('Escape');
    await form.getByLabel('Price').selectOption(starter);
    expect((await shownPrice(page)).text).toBe('Starter plan — $5.00 per seat / month');
    await form.getByRole('button', { name: 'Preview the change' }).click();
    const preview = page.getByRole('region', { name: 'Preview of the change' });
    await preview.getByText(/^Takes effect at the end of the period/).waitFor();
    await h.check(page, 'subscription-plan-downgrade-preview');
    await preview.getByRole('button', { name: 'Confirm the change' }).click();
    await page.getByRole('status').filter({ hasText: 'The change is scheduled for the end of the period.' }).waitFor();
    await expect.poll(() => field(page, 'Scheduled change')).toMatch(/^1 × Starter plan, \$5\.00 every month, from .+$/);
    expect((await h.ctx.merchant.get(`/v1/orders?subscription_id=${id}`).set('X-API-Key', h.ctx.orgA.apiKey)).body.data.records).toHaveLength(1);
    await h.check(page, 'subscription-plan-scheduled');
    expect(h.pageErrors).toEqual([]);
  });

  // The walk-through's finding: two prices of one product read the same in the picker ("Scale plan —
  // $30.00 per seat every month" twice). Their names tell them apart, and the preview says which.
  it('two prices of one product read apart in the picker and the preview, by their names', async () => {
    const catalog = h.ctx.services.catalog;
    const scale = (await catalog.createProduct(h.ctx.orgA.orgId, { name: 'Scale plan' })).id;
    const monthly = { currency: 'USD', pricingType: 'SUBSCRIPTION' as const, billingInterval: 'MONTH' as const, billingIntervalCount: 1 };
    const plain = (await catalog.createPrice(scale, { amount: 3000, ...monthly })).id;
    const priority = (await catalog.createPrice(scale, { amount: 3000, pricingName: 'Priority support', ...monthly })).id;
    const id = await buy('two-prices@console.test', plain);
    const page = await h.signedInPage('owner', PHONE);
    await page.goto(`${h.origin}/console/subscriptions/${id}`);
    const form = page.getByRole('form', { name: 'Change plan or seats' });
    await expect.poll(async () => (await form.getByLabel('Price').locator('option').allTextContents()).filter((t) => t.startsWith('Scale plan')).sort(), { timeout: 15_000 }).toEqual([
      'Scale plan — $30.00 per seat / month (current)',
      'Scale plan — Priority support — $30.00 per seat / month',
    ]);
    const all = await form.getByLabel('Price').locator('option').allTextContents();
    expect(new Set(all).size).toBe(all.length);
    expect(await field(page, 'Plan')).toBe('Scale plan — $30.00 per seat / month');
    await form.getByLabel('Price').selectOption(priority);
    expect((await shownPrice(page)).text).toBe('Scale plan — Priority support — $30.00 per seat / month');
    await form.getByRole('button', { name: 'Preview the change' }).click();
    const summary = page.getByTestId('change-summary');
    await summary.waitFor();
    expect((await summary.innerText()).replace(/\s+/g, ' ')).toMatch(/^From 1 × Scale plan, \$30\.00 every month to 1 × Scale plan — Priority support, \$30\.00 every month$/);
    await h.check(page, 'subscription-plan-two-prices');
    expect(h.pageErrors).toEqual([]);
  });
});
