/**
 * Catalog → a product → New price in the console (issues 38 and 39), Chromium, desktop and 390 px,
 * axe-core, keyboard: a subscription price with a free trial and a usage component (a meter, 0.04
 * per 1,000 units, 10,000 included), as docs/trials.md and docs/usage-billing.md say the console
 * makes them. Before, the form had neither field: a merchant could make a trial or a metered price
 * only with the admin API. Screenshots: test/e2e/.artifacts/screenshots/console/price-form-*.png.
 *
 * Two prices of one product told apart (the walk-through's finding: the form had no name, so both
 * were named after the product and read "€9.00"): a name per price, the label "Monthly — €9.00 /
 * month" in the list, the payment links and the x402/plan pickers (shared/price-label.ts), and a
 * rename (keyboard at 390 px, mouse on desktop). Screenshots: price-names-*.png.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { startConsoleHarness, PHONE, type ConsoleHarness } from '../harness/console-browser.js';
import { tabTo } from '../harness/accessibility.js';

let h: ConsoleHarness;
let productId: string;
let meterId: string;

describe.skipIf(!chromiumAvailable)(skippedUnless('the console price form', 'chromium'), () => {
  beforeAll(async () => {
    h = await startConsoleHarness();
    productId = (await h.ctx.services.catalog.createProduct(h.ctx.orgA.orgId, { name: 'Team plan' })).id;
    const meter = await h.ctx.merchant
      .post('/v1/meters')
      .set('X-API-Key', h.ctx.orgA.apiKey)
      .send({ name: 'Tokens', source: 'EVENTS', filter: { eventName: 'llm_tokens' }, aggregation: 'sum', property: 'tokens' });
    expect(meter.status, JSON.stringify(meter.body)).toBe(201);
    meterId = meter.body.data.id;
  });
  afterAll(async () => {
    await h?.close();
  });

  it('adds a subscription price with a free trial and a usage component, submitted with Enter', async () => {
    const page = await h.signedInPage('owner');
    await page.goto(`${h.origin}/console/catalog/products/${productId}`);
    await page.getByText('No prices yet.').waitFor();
    const form = page.locator('form[aria-labelledby="new-price-title"]');
    await form.getByLabel('Amount').fill('20.00');
    await form.getByLabel('Currency').selectOption('EUR');
    await form.getByLabel('Type').selectOption('SUBSCRIPTION');
    // A trial outside 1–730 days is marked and cannot be sent.
    await form.getByLabel('Free trial, days (optional)').fill('0');
    expect(await form.getByLabel('Free trial, days (optional)').getAttribute('aria-invalid')).toBe('true');
    expect(await form.getByRole('button', { name: 'Add price' }).isDisabled()).toBe(true);
    await form.getByLabel('Free trial, days (optional)').fill('14');
    await form.getByLabel('Meter').selectOption({ label: 'Tokens' });
    await form.getByLabel('Usage price (EUR)').fill('0.04');
    await form.getByLabel('For every').selectOption({ label: '1,000 units' });
    await form.getByLabel('Included units per period').fill('10,000');
    await form.getByRole('status').filter({ hasText: 'a unit' }).waitFor();
    await h.check(page, 'price-form-filled');
    await form.getByLabel('Included units per period').press('Enter');
    const row = page.getByRole('row', { name: /every month/ });
    await row.waitFor();
    expect(await row.innerText()).toMatch(/14-day free trial[\s\S]*\+ Tokens at €0\.00004 a unit, 10,000 included/);

    const prices = await h.ctx.admin.get(`/v1/products/${productId}/prices`);
    expect(prices.status).toBe(200);
    const [price] = prices.body.data;
    expect(price).toMatchObject({ amount: 2000, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', trialDays: 14 });
    expect(price.meteredComponents).toEqual([expect.objectContaining({ meterId, includedUnits: 10_000, pricing: expect.objectContaining({ model: 'PER_UNIT', unitAmountDecimal: '0.004' }) })]);

    const phone = await h.signedInPage('owner', PHONE);
    await phone.goto(`${h.origin}/console/catalog/products/${productId}`);
    await phone.getByRole('row', { name: /every month/ }).waitFor();
    await phone.locator('form[aria-labelledby="new-price-title"]').getByLabel('Type').selectOption('SUBSCRIPTION');
    await phone.getByLabel('Meter').selectOption({ label: 'Tokens' });
    await h.check(phone, 'price-form-listed');
  });

  it('names two prices of one product and shows them apart; a rename by keyboard (390 px) and by mouse (desktop)', async () => {
    const named = (await h.ctx.services.catalog.createProduct(h.ctx.orgA.orgId, { name: 'Pro plan' })).id;
    // Keyboard, 390 px: the monthly price, named, sent with Enter.
    const phone = await h.signedInPage('owner', PHONE);
    await phone.goto(`${h.origin}/console/catalog/products/${named}`);
    await phone.getByText('No prices yet.').waitFor();
    const form = phone.locator('form[aria-labelledby="new-price-title"]');
    await tabTo(phone, 'form[aria-labelledby="new-price-title"] input[aria-describedby="price-name-help"]');
    await phone.keyboard.type('Monthly');
    await tabTo(phone, 'form[aria-labelledby="new-price-title"] input[inputmode="decimal"]');
    await phone.keyboard.type('9');
    await form.getByLabel('Currency').selectOption('EUR');
    await form.getByLabel('Type').selectOption('SUBSCRIPTION');
    await form.getByLabel('Amount').press('Enter');
    await phone.getByTestId('price-label').filter({ hasText: 'Monthly — €9.00 / month' }).waitFor();
    expect(await form.getByLabel('Name (optional)').inputValue()).toBe('');

    // Mouse, desktop: a yearly price with no name (the product's), and a payment link for each.
    const desk = await h.signedInPage('owner');
    await desk.goto(`${h.origin}/console/catalog/products/${named}`);
    await desk.getByTestId('price-label').first().waitFor();
    const deskForm = desk.locator('form[aria-labelledby="new-price-title"]');
    await deskForm.getByLabel('Amount').click();
    await desk.keyboard.type('90');
    await deskForm.getByLabel('Currency').selectOption('EUR');
    await deskForm.getByLabel('Type').selectOption('SUBSCRIPTION');
    await deskForm.getByLabel('Every').selectOption('YEAR');
    await deskForm.getByRole('button', { name: 'Add price' }).click();
    await desk.getByTestId('price-label').filter({ hasText: /^€90\.00 \/ year$/ }).waitFor();
    expect((await desk.getByTestId('price-label').allInnerTexts()).sort()).toEqual(['Monthly — €9.00 / month', '€90.00 / year']);
    await desk.getByRole('button', { name: 'Create payment link for Monthly — €9.00 / month' }).click();
    await desk.getByTestId('payment-link-url').waitFor();
    await desk.getByRole('button', { name: 'Create payment link for €90.00 / year' }).click();
    await h.check(desk, 'price-names-list');

    // Rename the yearly price with the mouse: the dialog, the new name, the label.
    await desk.getByRole('button', { name: 'Rename €90.00 / year' }).click();
    const dialog = desk.getByRole('dialog', { name: 'Rename €90.00 / year' });
    await dialog.getByLabel('Name').fill('Yearly');
    await h.check(desk, 'price-names-rename');
    await dialog.getByRole('button', { name: 'Save name' }).click();
    await desk.getByTestId('price-label').filter({ hasText: 'Yearly — €90.00 / year' }).waitFor();

    // Rename the monthly one by keyboard at 390 px: Tab to its button, Enter, type, Enter.
    await phone.reload();
    await phone.getByTestId('price-label').filter({ hasText: 'Yearly — €90.00 / year' }).waitFor();
    const onRename = () => phone.evaluate('document.activeElement?.tagName === "BUTTON" && document.activeElement.textContent.trim().startsWith("Rename Monthly")') as Promise<boolean>;
    for (let i = 0; i < 80 && !(await onRename()); i++) await phone.keyboard.press('Tab');
    expect(await onRename()).toBe(true);
    await phone.keyboard.press('Enter');
    const phoneDialog = phone.getByRole('dialog', { name: 'Rename Monthly — €9.00 / month' });
    await phoneDialog.getByLabel('Name').waitFor();
    // The dialog takes the focus to its field, filled with the current name.
    expect(await phone.evaluate('document.activeElement?.closest("dialog") !== null && document.activeElement.tagName === "INPUT"')).toBe(true);
    expect(await phoneDialog.getByLabel('Name').inputValue()).toBe('Monthly');
    await phone.keyboard.press('Control+A');
    await phone.keyboard.type('Monthly (EU)');
    await phone.keyboard.press('Enter');
    await phone.getByTestId('price-label').filter({ hasText: 'Monthly (EU) — €9.00 / month' }).waitFor();
    await h.check(phone, 'price-names-renamed');

    // The payment links list says which price each link sells, by name and terms.
    await desk.goto(`${h.origin}/console/catalog/payment-links`);
    await desk.getByRole('heading', { name: 'Payment links' }).waitFor();
    await expect.poll(async () => (await desk.getByTestId('link-price').allInnerTexts()).filter((t) => /€/.test(t)).sort(), { timeout: 15_000 }).toEqual(['Monthly (EU) — €9.00 / month', 'Yearly — €90.00 / year']);
    await h.check(desk, 'price-names-links');
    const stored = (await h.ctx.admin.get(`/v1/products/${named}/prices`)).body.data.map((p: { pricingName: string; amount: number }) => [p.pricingName, p.amount]).sort();
    expect(stored).toEqual([['Monthly (EU)', 900], ['Yearly', 9000]]);
    expect(h.pageErrors).toEqual([]);
  });
});
