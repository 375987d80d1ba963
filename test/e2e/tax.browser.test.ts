/**
 * Tax in Chromium, 390 px and desktop, axe-core (issue 39, item 4):
 * - the hosted checkout page asks the buyer's country first (keyboard only: a select, region and
 *   VAT id fields), shows a human message for a bad VAT id (keeping what was typed), then the
 *   subtotal, the TAX line and the total with tax, and charges exactly that;
 * - once chosen, the billing country (and tax id) stays before the pay button, in tab order and on
 *   screen (keyboard at 390 px, mouse on desktop);
 * - the console's Settings → Tax: the merchant's country and a new rate, then the list.
 * Screenshots: test/e2e/.artifacts/screenshots/console/tax-*.png and checkout-tax-*.png (checkout-tax-country-first-*.png: the country above the pay button).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { axeViolations, tabTo } from '../harness/accessibility.js';
import { CONSOLE_SCREENSHOTS, DESKTOP, PHONE, startConsoleHarness, type ConsoleHarness } from '../harness/console-browser.js';

let h: ConsoleHarness;

describe.skipIf(!chromiumAvailable)(skippedUnless('tax on the checkout page and in the console', 'chromium'), () => {
  beforeAll(async () => {
    h = await startConsoleHarness();
    await h.ctx.services.modules.tax.tax.create(h.ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** A hosted page in a context without CSP (axe is injected as a script), at a viewport. */
  async function hostedPage(viewport: { width: number; height: number }): Promise<Page> {
    const context = await h.browser.newContext({ viewport, bypassCSP: true });
    const page = await context.newPage();
    page.on('pageerror', (err) => h.pageErrors.push(`${page.url()}: ${err.message}`));
    return page;
  }
  async function hostedCheck(page: Page, name: string) {
    for (const [label, size] of [['390', PHONE], ['desktop', DESKTOP]] as const) {
      await page.setViewportSize(size);
      expect(await axeViolations(page), `${name} at ${label}`).toEqual([]);
      expect((await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number, `${name} at ${label}: overflow`).toBeLessThanOrEqual(0);
      await page.screenshot({ path: `${CONSOLE_SCREENSHOTS}/${name}-${label}.png`, fullPage: true });
    }
    await page.setViewportSize(PHONE);
  }

  it('the checkout page asks the country by keyboard, explains a bad VAT id, then shows and charges the total with tax', async () => {
    const ctx = h.ctx;
    const created = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'tax-browser-1')
      .send({ pricingData: { amount: 2500, currency: 'EUR', productData: { name: 'Design course' } } });
    expect(created.status).toBe(201);
    const page = await hostedPage(PHONE);
    await page.goto(`${h.origin}${new URL(created.body.data.url).pathname}`);
    await page.getByRole('heading', { name: 'Where are you buying from?' }).waitFor();
    expect(await page.locator('#card').count()).toBe(0);
    await hostedCheck(page, 'checkout-tax-ask');

    // Keyboard only: Tab to the country list, type to choose, Tab to the VAT id, submit with Enter.
    await tabTo(page, '#country');
    await page.keyboard.type('Germany');
    expect(await page.locator('#country').inputValue()).toBe('DE');
    await tabTo(page, '#taxId');
    await page.keyboard.type('DE123');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    const error = page.getByTestId('error');
    expect(await error.innerText()).toContain('does not look right');
    expect(await page.locator('#taxId').inputValue()).toBe('DE123');
    expect(await page.locator('#country').inputValue()).toBe('DE');
    await hostedCheck(page, 'checkout-tax-bad-vat');

    await page.locator('#taxId').fill('');
    await tabTo(page, 'form[data-testid=tax-form] button[type=submit]');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    const lines = page.getByTestId('tax-lines');
    expect(await lines.innerText()).toContain('VAT 19%');
    expect(await lines.innerText()).toContain('€4.75');
    expect(await page.getByTestId('amount').innerText()).toBe('€29.75');
    expect(await page.getByTestId('tax-location').innerText()).toContain('Germany');
    await hostedCheck(page, 'checkout-tax-total');

    await page.fill('#email', 'buyer@example.com');
    await page.fill('#card', '4242 4242 4242 4242');
    await page.fill('#exp', '12/30');
    await page.fill('#cvc', '123');
    await tabTo(page, 'form[action$="/pay"] button[type=submit]');
    expect(await page.locator('form[action$="/pay"] button[type=submit]').innerText()).toBe('Pay €29.75');
    await Promise.all([page.waitForURL(/\/complete$/), page.keyboard.press('Enter')]);
    const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    const order = (await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(order.amountCents).toBe(2975);
    expect(order.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual([['PRICE', 2500], ['TAX', 475]]);
    expect(h.pageErrors).toEqual([]);
  });

  /** What Tab focuses, in order, from the page's top until `until` has focus (ids, else the button's text). */
  async function tabOrder(page: Page, until: string, max = 40): Promise<string[]> {
    const seen: string[] = [];
    for (let i = 0; i < max; i++) {
      await page.keyboard.press('Tab');
      seen.push((await page.evaluate('(() => { const e = document.activeElement; return e ? (e.id ? "#" + e.id : (e.textContent || e.getAttribute("value") || e.tagName).trim()) : ""; })()')) as string);
      if (await page.evaluate(`document.activeElement?.matches(${JSON.stringify(until)}) ?? false`)) return seen;
    }
    throw new Error(`${until} is not reachable with Tab (focused: ${seen.join(', ')})`);
  }

  // The walk-through's finding: once a country was chosen (or given at creation), its "Update total"
  // form sat below the pay button, so a buyer met the pay button before the country deciding the tax.
  it('once chosen, the billing country and tax id come before the pay button: keyboard at 390 px, mouse on desktop', async () => {
    const ctx = h.ctx;
    const created = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', 'tax-browser-country-first')
      .send({ pricingData: { amount: 2500, currency: 'EUR', productData: { name: 'Design course' } }, customerTax: { country: 'DE' } });
    expect(created.status).toBe(201);
    const path = new URL(created.body.data.url).pathname;

    // Keyboard, 390 px: from the top, Tab reaches the country, the tax id and "Update total" before "Pay €29.75".
    const phone = await hostedPage(PHONE);
    await phone.goto(`${h.origin}${path}`);
    await phone.getByRole('heading', { name: 'Billing country' }).waitFor();
    const order = await tabOrder(phone, 'form[action$="/pay"] button[type=submit]');
    expect(order[order.length - 1]).toBe('Pay €29.75');
    for (const stop of ['#country', '#taxId', 'Update total']) {
      expect(order.indexOf(stop), `${stop} in ${order.join(', ')}`).toBeGreaterThan(-1);
      expect(order.indexOf(stop)).toBeLessThan(order.indexOf('#card'));
    }
    await hostedCheck(phone, 'checkout-tax-country-first');
    // Changed by keyboard: Austria has no rate here, so no tax; the pay button says the new total.
    await tabTo(phone, '#country');
    await phone.keyboard.type('Austria');
    await tabTo(phone, 'form[data-testid=tax-form] button[type=submit]');
    await Promise.all([phone.waitForNavigation(), phone.keyboard.press('Enter')]);
    expect(await phone.getByTestId('amount').innerText()).toBe('€25.00');
    expect(await phone.locator('form[action$="/pay"] button[type=submit]').innerText()).toBe('Pay €25.00');
    await phone.context().close();

    // Mouse, desktop: the country form is drawn above the pay button; back to Germany, then pay.
    const desk = await hostedPage(DESKTOP);
    await desk.goto(`${h.origin}${path}`);
    const countryBox = (await desk.locator('#country').boundingBox())!;
    const payBox = (await desk.locator('form[action$="/pay"] button[type=submit]').boundingBox())!;
    expect(countryBox.y + countryBox.height).toBeLessThan(payBox.y);
    await desk.locator('#country').click();
    await desk.locator('#country').selectOption('DE');
    await Promise.all([desk.waitForNavigation(), desk.getByRole('button', { name: 'Update total' }).click()]);
    expect(await desk.getByTestId('amount').innerText()).toBe('€29.75');
    await desk.locator('#email').click();
    await desk.keyboard.type('mouse-buyer@example.com');
    await desk.locator('#card').fill('4242 4242 4242 4242');
    await desk.locator('#exp').fill('12/30');
    await desk.locator('#cvc').fill('123');
    await Promise.all([desk.waitForURL(/\/complete$/), desk.getByRole('button', { name: 'Pay €29.75' }).click()]);
    const session = (await ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect((await ctx.merchant.get(`/v1/orders/${session.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data.amountCents).toBe(2975);
    await desk.context().close();
    expect(h.pageErrors).toEqual([]);
  });

  it("the console's Settings → Tax sets the merchant's country and adds a rate", async () => {
    const page = await h.signedInPage('owner');
    await page.goto(`${h.origin}/console/settings/tax`);
    await page.getByRole('heading', { name: 'Tax', level: 2 }).waitFor();
    await page.getByRole('table', { name: 'Active tax rates' }).waitFor();
    await page.getByLabel('Country code').first().fill('de');
    await page.getByRole('button', { name: 'Save country' }).click();
    await page.getByText('Country saved.').waitFor();
    expect((await h.ctx.services.modules.tax.tax.settings(h.ctx.orgA.orgId)).merchantCountry).toBe('DE');

    const form = page.getByRole('form', { name: 'New tax rate' });
    await form.getByLabel('Percent').fill('7.25');
    await form.getByLabel('Country code').fill('US');
    await form.getByLabel('Region (optional)').fill('CA');
    await form.getByRole('button', { name: 'Add tax rate' }).click();
    await page.getByText('VAT 7.25% created.').waitFor();
    await page.getByRole('cell', { name: 'US-CA', exact: true }).waitFor();
    // A bad percentage is explained next to the form, nothing created.
    await form.getByLabel('Percent').fill('120');
    await form.getByLabel('Country code').fill('FR');
    await form.getByRole('button', { name: 'Add tax rate' }).click();
    expect(await form.getByRole('alert').innerText()).toMatch(/percentage/i);
    await h.check(page, 'tax-settings');
    expect(h.pageErrors).toEqual([]);
  });
});
