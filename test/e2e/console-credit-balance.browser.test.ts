/**
 * The customer's credit balance on the console's customer page, in headless Chromium: the balance
 * per currency and its ledger (merchant API getCustomerBalance, listCustomerBalanceTransactions)
 * after an immediate downgrade, and "Adjust balance" (createCustomerBalanceTransaction, confirmed
 * in a dialog): a credit by mouse on a desktop, a debit by keyboard on a 390 px phone, a debit
 * beyond the balance not offered, a conflicting one refused with the server's message. Every state
 * axe-core clean with no horizontal overflow at both widths. Screenshots:
 * test/e2e/.artifacts/screenshots/console/customer-balance-*.png.
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
let basic: string;
let n = 0;

async function downgradedCustomer(email: string): Promise<string> {
  const created = await h.ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', h.ctx.orgA.apiKey).set('Idempotency-Key', `console-bal-${++n}`).send({ pricingId: pro, customerEmail: email });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const paid = await supertest(h.ctx.apps.merchant).post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const s = await h.ctx.testDb.database.db('subscriptions').where({ customer_email: email }).first();
  h.ctx.clock.set(new Date(h.ctx.clock.now().getTime() + 15 * 86_400_000));
  const changed = await h.ctx.merchant.post(`/v1/subscriptions/${s.id}/change`).set('X-API-Key', h.ctx.orgA.apiKey).send({ priceId: basic, effective: 'IMMEDIATE' });
  expect(changed.status, JSON.stringify(changed.body)).toBe(200);
  return s.customer_id as string;
}
/** The customer's USD balance as the API reads it (the credit depends on the real time the harness's clock starts at). */
const balanceOf = async (id: string) => (await h.ctx.merchant.get(`/v1/customers/${id}/balance`).set('X-API-Key', h.ctx.orgA.apiKey)).body.data.balances[0].amountCents as number;
const usd = (minor: number) => `$${(minor / 100).toFixed(2)}`;
const text = async (page: Page, testId: string) => (await page.getByTestId(testId).innerText()).replace(/\s+/g, ' ').trim();
const focused = (page: Page) => page.evaluate('`${document.activeElement?.tagName.toLowerCase()}:${document.activeElement?.textContent?.trim().slice(0, 40) ?? ""}`') as Promise<string>;

describe.skipIf(!chromiumAvailable)(skippedUnless('the console customer credit balance', 'chromium'), () => {
  beforeAll(async () => {
    h = await startConsoleHarness();
    const monthly = { currency: 'USD', pricingType: 'SUBSCRIPTION' as const, billingInterval: 'MONTH' as const, billingIntervalCount: 1 };
    const catalog = h.ctx.services.catalog;
    pro = (await catalog.createPrice((await catalog.createProduct(h.ctx.orgA.orgId, { name: 'Pro plan' })).id, { amount: 3000, ...monthly })).id;
    basic = (await catalog.createPrice((await catalog.createProduct(h.ctx.orgA.orgId, { name: 'Basic plan' })).id, { amount: 1000, ...monthly })).id;
  });
  afterAll(async () => {
    await h?.close();
  });

  it('shows the balance a downgrade left and credits it by mouse (desktop)', async () => {
    const id = await downgradedCustomer('credit@console.test');
    const page = await h.signedInPage('owner');
    await page.goto(`${h.origin}/console/customers/${id}`);
    await page.getByRole('heading', { name: 'Credit balance' }).waitFor();
    await page.getByTestId('credit-ledger-row').first().waitFor();
    const start = await balanceOf(id);
    expect(start).toBeGreaterThan(900);
    expect(await text(page, 'credit-balance-amounts')).toBe(`${usd(start)} USD`);
    const rows = page.getByTestId('credit-ledger-row');
    expect(await rows.count()).toBe(1);
    expect((await rows.first().innerText()).replace(/\s+/g, ' ')).toMatch(new RegExp(`Downgrade credit Order \\+\\${usd(start)} \\${usd(start)}$`));
    await h.check(page, 'customer-balance');

    const form = page.getByRole('form', { name: 'Adjust balance' });
    await form.getByLabel('Credit').click();
    await form.getByLabel('Amount').click();
    await page.keyboard.type('5');
    await form.getByLabel('Description').fill('Goodwill for the outage');
    await form.getByRole('button', { name: 'Adjust balance…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Credit $5.00?' });
    await dialog.waitFor();
    expect(await dialog.innerText()).toContain(`goes from ${usd(start)} to ${usd(start + 500)}`);
    await h.check(page, 'customer-balance-confirm');
    await dialog.getByRole('button', { name: 'Credit $5.00' }).click();
    await page.getByRole('status').filter({ hasText: `Balance credited: ${usd(start + 500)} now.` }).waitFor();
    await expect.poll(() => rows.count()).toBe(2);
    expect((await rows.first().innerText()).replace(/\s+/g, ' ')).toMatch(new RegExp(`Adjustment Goodwill for the outage \\+\\$5\\.00 \\${usd(start + 500)}$`));
    expect(await text(page, 'credit-balance-amounts')).toBe(`${usd(start + 500)} USD`);
    await h.check(page, 'customer-balance-credited');
    const api = await h.ctx.merchant.get(`/v1/customers/${id}/balance`).set('X-API-Key', h.ctx.orgA.apiKey);
    expect(api.body.data.balances).toEqual([expect.objectContaining({ currency: 'USD', amountCents: start + 500 })]);
  });

  it('debits by keyboard on a 390 px phone; a debit beyond the balance is not offered; a stale one is refused', async () => {
    const id = await downgradedCustomer('debit@console.test');
    const page = await h.signedInPage('owner', PHONE);
    await page.goto(`${h.origin}/console/customers/${id}`);
    await page.getByTestId('credit-ledger-row').first().waitFor();
    const start = await balanceOf(id);
    const form = page.getByRole('form', { name: 'Adjust balance' });
    await tabTo(page, 'input[name=adjust-direction]', 120);
    await page.keyboard.press('ArrowRight'); // the radio group: Debit
    expect(await form.getByLabel('Debit').isChecked()).toBe(true);
    await page.keyboard.press('Tab'); // currency (USD)
    await page.keyboard.press('Tab');
    await page.keyboard.type('20');
    await page.keyboard.press('Tab');
    await page.keyboard.type('Too much');
    expect(await form.getByRole('button', { name: 'Adjust balance…' }).count()).toBe(0);
    expect(await form.getByRole('status').innerText()).toMatch(/up to the balance/);
    expect(await form.getByLabel(/Amount/).getAttribute('aria-invalid')).toBe('true');
    await h.check(page, 'customer-balance-debit-too-much');
    // 4.00 instead.
    await form.getByLabel(/Amount/).focus();
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.type('4');
    await page.keyboard.press('Tab');
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.type('Credit granted twice');
    await page.keyboard.press('Tab');
    expect(await focused(page)).toBe('button:Adjust balance…');
    // Meanwhile the balance moved (an API credit): the console's adjustment, conditional on the balance it showed, is refused.
    const other = await h.ctx.merchant.post(`/v1/customers/${id}/balance-transactions`).set('X-API-Key', h.ctx.orgA.apiKey).set('Idempotency-Key', `meanwhile-${id}`).send({ currency: 'USD', amountCents: 100, description: 'Meanwhile' });
    expect(other.status).toBe(201);
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'Debit $4.00?' });
    await dialog.waitFor();
    await tabTo(page, 'dialog[open] button.danger', 5);
    await page.keyboard.press('Enter');
    await dialog.getByText(`USD balance is ${start + 100}, not the expectedBalanceCents ${start}`).waitFor();
    await h.check(page, 'customer-balance-debit-refused');
    await page.keyboard.press('Escape');
    // Reloaded, the form knows the new balance and the debit goes through.
    await page.reload();
    await page.getByTestId('credit-ledger-row').nth(1).waitFor();
    expect(await text(page, 'credit-balance-amounts')).toBe(`${usd(start + 100)} USD`);
    await form.getByLabel('Debit').check();
    await form.getByLabel(/Amount/).fill('4');
    await form.getByLabel('Description').fill('Credit granted twice');
    await form.getByRole('button', { name: 'Adjust balance…' }).focus();
    await page.keyboard.press('Enter');
    await tabTo(page, 'dialog[open] button.danger', 5);
    await page.keyboard.press('Enter');
    await page.getByRole('status').filter({ hasText: `Balance debited: ${usd(start - 300)} now.` }).waitFor();
    expect(await text(page, 'credit-balance-amounts')).toBe(`${usd(start - 300)} USD`);
    await h.check(page, 'customer-balance-debited');
  });

  it("the subscription page's credit balance and the downgrade order's lines, desktop and 390 px", async () => {
    const id = await downgradedCustomer('pages@console.test');
    const credit = await balanceOf(id);
    const s = await h.ctx.testDb.database.db('subscriptions').where({ customer_id: id }).first();
    const page = await h.signedInPage('owner');
    await page.goto(`${h.origin}/console/subscriptions/${s.id}`);
    await page.getByRole('heading', { name: `Subscription ${s.id}`, level: 1 }).waitFor();
    const field = page.locator('dl.fields > div').filter({ has: page.getByRole('term').filter({ hasText: /^Credit balance$/ }) }).locator('dd');
    expect((await field.innerText()).replace(/\s+/g, ' ')).toBe(`${usd(credit)} (the customer’s, used by the next renewals; history and adjustments)`);
    await h.check(page, 'customer-balance-subscription-page');
    const downgrade = await h.ctx.testDb.database.db('orders').where({ subscription_id: s.id }).whereNull('billing_period').first();
    await page.goto(`${h.origin}/console/orders/${downgrade.id}`);
    await page.getByRole('heading', { name: 'Lines' }).waitFor();
    expect(await page.getByTestId('order-line').filter({ hasText: 'Credit balance' }).count()).toBe(1);
    expect(await page.getByText('None: nothing to charge (total 0)').count()).toBe(1);
    await h.check(page, 'customer-balance-order-page');
    // The link leads to the customer's balance.
    await page.goto(`${h.origin}/console/subscriptions/${s.id}`);
    await field.getByRole('link', { name: 'history and adjustments' }).click();
    await page.getByRole('heading', { name: 'Credit balance' }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/console/customers/${id}`);
  });
  it('defaults the adjustment to the currency the customer pays in (EUR), not USD; a typed currency stays (390 px, keyboard)', async () => {
    const eur = (await h.ctx.services.catalog.createPrice((await h.ctx.services.catalog.createProduct(h.ctx.orgA.orgId, { name: 'Euro plan' })).id, { amount: 2000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
    const created = await h.ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', h.ctx.orgA.apiKey).set('Idempotency-Key', `console-bal-${++n}`).send({ pricingId: eur, customerEmail: 'euro@console.test' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect((await supertest(h.ctx.apps.merchant).post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' })).status).toBe(303);
    const id = (await h.ctx.testDb.database.db('subscriptions').where({ customer_email: 'euro@console.test' }).first()).customer_id as string;
    const page = await h.signedInPage('owner', PHONE);
    await page.goto(`${h.origin}/console/customers/${id}`);
    await page.getByRole('heading', { name: 'Credit balance' }).waitFor();
    const form = page.getByRole('form', { name: 'Adjust balance' });
    const currency = form.getByLabel('Currency');
    // Before: "USD" for a customer whose orders and subscription are in EUR (no balance yet).
    await expect.poll(() => currency.inputValue()).toBe('EUR');
    await h.check(page, 'customer-balance-eur');
    // Keyboard: to the field, replace it; the typed currency is kept (the default does not come back).
    await tabTo(page, 'input[maxlength="5"]', 120);
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.type('GBP');
    await page.keyboard.press('Tab');
    expect(await currency.inputValue()).toBe('GBP');
  });
});
