/**
 * Kassa's location step on the Stripe rail in Chromium (issue 39, item 4; docs/tax.md "On Stripe:
 * the buyer's country on Kassa's page"), at 390 px and desktop, axe-core on every Kassa page:
 * - keyboard only: the country list, a bad VAT id explained (what was typed kept), "Continue to
 *   payment" opens the (local, Stripe-shaped) Stripe Checkout page at the total with the German
 *   rate; the browser's back button shows the step with Germany, its tax line and total; France
 *   instead opens a new Stripe page at the French (inclusive) total, the first one expired; paid,
 *   the order equals what Stripe collected;
 * - by mouse: the same step with the mouse.
 * - a promotion code on the step (issue 39, docs/discounts.md), keyboard only at 390 px and by
 *   mouse at desktop: a bad code explained at the field, a good one applied (the amount labelled
 *   "Subtotal, before tax" until a country is chosen), Stripe's page at the discounted total with
 *   tax; back, the code removed (that Stripe page expired), applied again, paid: the order's PRICE,
 *   DISCOUNT and TAX lines are what Stripe collected. The footer names Stripe, not the sandbox.
 * Screenshots: test/e2e/.artifacts/screenshots/console/stripe-step-*.png.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { createTestContext, type TestContext } from '../harness/context.js';
import { chromiumAvailable, launchChromium } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { axeViolations, tabTo } from '../harness/accessibility.js';
import { CONSOLE_SCREENSHOTS, DESKTOP, PHONE } from '../harness/console-browser.js';
import { FakeStripe } from '../processors/stripe-server.js';

let ctx: TestContext;
let server: Server;
let stripe: FakeStripe;
let browser: Browser;
let origin: string;
const pageErrors: string[] = [];

describe.skipIf(!chromiumAvailable)(skippedUnless("Kassa's location step before Stripe Checkout", 'chromium'), () => {
  beforeAll(async () => {
    let app: Express | undefined;
    server = createServer((req, res) => app!(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    stripe = new FakeStripe({ secretKey: 'sk_test_browser', webhookSecret: 'whsec_browser', now: () => ctx.clock.now(), eventsUrl: `${origin}/v1/processors/stripe/events` });
    const stripeBase = await stripe.start();
    ctx = await createTestContext({
      env: { PUBLIC_BASE_URL: origin, STRIPE_SECRET_KEY: 'sk_test_browser', STRIPE_WEBHOOK_SECRET: 'whsec_browser', STRIPE_API_BASE_URL: stripeBase },
    });
    app = ctx.apps.merchant;
    const tax = ctx.services.modules.tax.tax;
    await tax.create(ctx.orgA.orgId, { displayName: 'VAT', percentage: '19', country: 'DE' });
    await tax.create(ctx.orgA.orgId, { displayName: 'TVA', percentage: '20', country: 'FR', inclusive: true });
    await tax.updateSettings(ctx.orgA.orgId, { merchantCountry: 'DE' });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await stripe?.stop();
    await new Promise((resolve) => server?.close(resolve));
    await ctx?.close();
  });

  let keys = 0;
  async function newSession(): Promise<{ id: string; url: string }> {
    // A new rate-limit window per session (the promotion-code limits count per client address for 15 minutes).
    ctx.clock.set(new Date(ctx.clock.now().getTime() + 16 * 60_000).toISOString());
    const created = await ctx.merchant
      .post('/v1/checkout-sessions')
      .set('X-API-Key', ctx.orgA.apiKey)
      .set('Idempotency-Key', `stripe-step-browser-${++keys}`)
      .send({ pricingData: { amount: 1999, currency: 'EUR', productData: { name: 'Design course' } } });
    expect(created.status).toBe(201);
    return created.body.data;
  }
  /** A page without CSP (axe is injected as a script). */
  async function openPage(viewport: { width: number; height: number }): Promise<Page> {
    const context = await browser.newContext({ viewport, bypassCSP: true });
    const page = await context.newPage();
    page.on('pageerror', (err) => pageErrors.push(`${page.url()}: ${err.message}`));
    return page;
  }
  /** axe-core and no horizontal overflow at 390 px and desktop, with a screenshot of each. */
  async function check(page: Page, name: string) {
    for (const [label, size] of [['390', PHONE], ['desktop', DESKTOP]] as const) {
      await page.setViewportSize(size);
      expect(await axeViolations(page), `${name} at ${label}`).toEqual([]);
      expect((await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number, `${name} at ${label}: overflow`).toBeLessThanOrEqual(0);
      await page.screenshot({ path: `${CONSOLE_SCREENSHOTS}/stripe-step-${name}-${label}.png`, fullPage: true });
    }
  }
  const readSession = async (id: string) => (await ctx.merchant.get(`/v1/checkout-sessions/${id}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;

  it('keyboard only at 390 px: country, a bad VAT id explained, Stripe at the German total; back, France, Stripe at the French total; paid', async () => {
    const session = await newSession();
    const page = await openPage(PHONE);
    await page.goto(session.url);
    await page.getByRole('heading', { name: 'Where are you buying from?' }).waitFor();
    expect(await page.locator('#card').count()).toBe(0);
    expect(await page.getByTestId('amount').innerText()).toBe('€19.99');
    await check(page, 'ask');
    await page.setViewportSize(PHONE);

    await tabTo(page, '#country');
    await page.keyboard.type('Germany');
    expect(await page.locator('#country').inputValue()).toBe('DE');
    await tabTo(page, '#taxId');
    await page.keyboard.type('DE123');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    expect(await page.getByTestId('error').innerText()).toContain('does not look right');
    // Shown by the step's own page after a redirect (no POST result in the history); the refused tax id is typed again (never put in a URL).
    expect(new URL(page.url()).searchParams.get('step_error')).toBe('taxId');
    expect(await page.locator('#taxId').inputValue()).toBe('');
    expect(await page.locator('#taxId').getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator('#taxId').getAttribute('aria-describedby')).toBe('taxid-help step-error');
    expect(await page.locator('#country').inputValue()).toBe('DE');
    expect(stripe.sessions.size).toBe(0);
    await check(page, 'bad-vat');
    await page.setViewportSize(PHONE);

    // Continue to Stripe without a VAT id.
    await tabTo(page, '[data-testid=tax-submit]');
    await Promise.all([page.waitForURL(/\/c\/pay\/cs_test_/), page.keyboard.press('Enter')]);
    expect(await page.getByTestId('stripe-amount').innerText()).toBe('EUR 23.79');
    const first = new URL(page.url()).pathname.split('/').pop()!;
    expect(await readSession(session.id)).toMatchObject({ amount: 2379, tax: { country: 'DE' } });

    // Stripe's back link (its cancel_url), then "Return to payment": Kassa's step with Germany, its tax line and total.
    await tabTo(page, 'a[href$="/canceled"]');
    await Promise.all([page.waitForURL(/\/canceled$/), page.keyboard.press('Enter')]);
    await check(page, 'canceled');
    await page.setViewportSize(PHONE);
    await tabTo(page, '[data-testid=resume]');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    await page.getByTestId('tax-location').waitFor();
    expect(await page.getByTestId('tax-location').innerText()).toContain('Germany');
    expect(await page.getByTestId('tax-lines').innerText()).toContain('€3.80');
    expect(await page.getByTestId('amount').innerText()).toBe('€23.79');
    await check(page, 'back');
    await page.setViewportSize(PHONE);

    await tabTo(page, '#country');
    await page.keyboard.type('France');
    expect(await page.locator('#country').inputValue()).toBe('FR');
    await tabTo(page, '[data-testid=tax-submit]');
    await Promise.all([page.waitForURL(/\/c\/pay\/cs_test_/), page.keyboard.press('Enter')]);
    const second = new URL(page.url()).pathname.split('/').pop()!;
    expect(second).not.toBe(first);
    expect(stripe.sessions.get(first)!.status).toBe('expired');
    expect(await page.getByTestId('stripe-amount').innerText()).toBe('EUR 19.99');

    await tabTo(page, '#email');
    await page.keyboard.type('keyboard@example.com');
    await Promise.all([page.waitForURL(/\/complete$/), page.keyboard.press('Enter')]);
    await page.getByText('Payment received').waitFor({ timeout: 20_000 });
    await check(page, 'paid');
    const read = await readSession(session.id);
    expect(read).toMatchObject({ status: 'COMPLETE', amount: 1999, tax: { country: 'FR' } });
    const order = (await ctx.merchant.get(`/v1/orders/${read.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(order.amountCents).toBe(stripe.sessions.get(second)!.amount_total);
    expect(order.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual([['PRICE', 1999], ['TAX', 0]]);
    expect(pageErrors).toEqual([]);
  }, 300_000);

  it('by mouse at desktop: a bad VAT id, the country, "Continue to payment", Stripe at the total with tax; back over the error page without a resubmission; paid', async () => {
    const session = await newSession();
    const page = await openPage(DESKTOP);
    await page.goto(session.url);
    await page.getByLabel('Country').selectOption('DE');
    await page.getByLabel('VAT or tax id (optional)').fill('DE123');
    await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Continue to payment' }).click()]);
    expect(await page.getByTestId('error').innerText()).toContain('does not look right');
    const errorUrl = page.url();
    expect(errorUrl).toContain('step_error=taxId');
    expect(await page.getByLabel('Country').inputValue()).toBe('DE');
    await page.getByLabel('State or region (optional)').click();
    await Promise.all([page.waitForURL(/\/c\/pay\/cs_test_/), page.getByRole('button', { name: 'Continue to payment' }).click()]);
    expect(await page.getByTestId('stripe-amount').innerText()).toBe('EUR 23.79');
    const stripeUrl = page.url();
    // The browser's back button lands on the error's page — a GET, so no "Confirm Form Resubmission" —
    // which now shows Germany's tax; once more back: the step as first opened.
    const back = await page.goBack();
    expect(back?.status()).toBe(400);
    expect(page.url()).toBe(errorUrl);
    await page.getByTestId('tax-location').waitFor();
    await page.goBack();
    expect(page.url()).toBe(session.url);
    await page.getByRole('heading', { name: 'Where are you buying from?' }).waitFor();
    // The step again, with Germany; "Continue to payment" returns to the same Stripe session.
    await page.goForward();
    await page.getByTestId('tax-location').waitFor();
    expect(await page.getByTestId('tax-location').innerText()).toContain('Germany');
    expect(await page.getByTestId('amount').innerText()).toBe('€23.79');
    const creates = stripe.requests.filter((r) => r.path === '/v1/checkout/sessions' && r.method === 'POST').length;
    await Promise.all([page.waitForURL(/\/c\/pay\/cs_test_/), page.getByRole('button', { name: 'Continue to payment' }).click()]);
    expect(page.url()).toBe(stripeUrl);
    expect(stripe.requests.filter((r) => r.path === '/v1/checkout/sessions' && r.method === 'POST').length).toBe(creates);
    await page.locator('#email').click();
    await page.locator('#email').fill('mouse@example.com');
    await Promise.all([page.waitForURL(/\/complete$/), page.getByRole('button', { name: 'Pay' }).click()]);
    await page.getByText('Payment received').waitFor({ timeout: 20_000 });
    const read = await readSession(session.id);
    const order = (await ctx.merchant.get(`/v1/orders/${read.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    expect(order.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual([['PRICE', 1999], ['TAX', 380]]);
    expect(order.amountCents).toBe(2379);
    expect(pageErrors).toEqual([]);
  });
  let codes = 0;
  /** A 20 % ONCE promotion code of organization A. */
  async function promotionCode(): Promise<string> {
    const discounts = ctx.services.modules.discounts.discounts;
    const coupon = await discounts.createCoupon(ctx.orgA.orgId, { name: 'Spring sale', percentOff: '20', duration: 'ONCE' });
    return (await discounts.createPromotionCode(ctx.orgA.orgId, { couponId: coupon.id, code: `SPRING${++codes}` })).code;
  }
  const creates = () => stripe.requests.filter((r) => r.path === '/v1/checkout/sessions' && r.method === 'POST').length;
  const lines = async (id: string) => {
    const read = await readSession(id);
    const order = (await ctx.merchant.get(`/v1/orders/${read.orderId}`).set('X-API-Key', ctx.orgA.apiKey)).body.data;
    return { order, kinds: order.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents]) };
  };

  it('a promotion code on the step, keyboard only at 390 px: a bad code explained, a good one applied, Stripe at the discounted total; back, removed, applied again, paid', async () => {
    const code = await promotionCode();
    const session = await newSession();
    const page = await openPage(PHONE);
    await page.goto(session.url);
    await page.getByRole('heading', { name: 'Where are you buying from?' }).waitFor();
    expect(await page.locator('footer').innerText()).toBe('Secured by Kassa · card payment by Stripe');
    expect(await page.locator('.total').first().innerText()).toContain('Subtotal, before tax');
    expect(await page.getByTestId('tax-pending').innerText()).toBe('Tax is calculated after you choose your country.');

    // A bad code: the message is tied to the field and announced.
    await tabTo(page, '#promotion-code');
    await page.keyboard.type('NOPE-NOPE');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    expect(await page.getByTestId('promotion-code-message').innerText()).toBe('The promotion code NOPE-NOPE is not valid.');
    expect(await page.getByTestId('promotion-code-message').getAttribute('role')).toBe('alert');
    expect(await page.locator('#promotion-code').getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator('#promotion-code').getAttribute('aria-describedby')).toBe('promotion-code-message');
    await check(page, 'code-bad');
    await page.setViewportSize(PHONE);

    await tabTo(page, '#promotion-code');
    await page.keyboard.type(code.toLowerCase());
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    expect(await page.getByTestId('promotion-code-message').innerText()).toBe(`${code} applied.`);
    expect(await page.getByTestId('discount').innerText()).toContain('−€4.00');
    expect(await page.getByTestId('amount').innerText()).toBe('€15.99');
    expect(await page.locator('.total').filter({ has: page.getByTestId('amount') }).innerText()).toContain('Subtotal, before tax');
    await check(page, 'code-applied');
    await page.setViewportSize(PHONE);

    const before = creates();
    await tabTo(page, '#country');
    await page.keyboard.type('Germany');
    await tabTo(page, '[data-testid=tax-submit]');
    await Promise.all([page.waitForURL(/\/c\/pay\/cs_test_/), page.keyboard.press('Enter')]);
    expect(creates()).toBe(before + 1);
    // 19.99 − 20 % (4.00) = 15.99; 19 % = 3.04.
    expect(await page.getByTestId('stripe-amount').innerText()).toBe('EUR 19.03');
    const first = new URL(page.url()).pathname.split('/').pop()!;

    // Back on Kassa's step: the code, the country, the total; "Remove" with the keyboard.
    await tabTo(page, 'a[href$="/canceled"]');
    await Promise.all([page.waitForURL(/\/canceled$/), page.keyboard.press('Enter')]);
    await tabTo(page, '[data-testid=resume]');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    await page.getByTestId('tax-lines').waitFor();
    expect(await page.getByTestId('amount').innerText()).toBe('€19.03');
    await check(page, 'code-back');
    await page.setViewportSize(PHONE);
    await tabTo(page, '[data-testid=remove-promotion-code]');
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    expect(await page.getByTestId('promotion-code-message').innerText()).toBe('Promotion code removed.');
    expect(await page.getByTestId('amount').innerText()).toBe('€23.79');
    expect(stripe.sessions.get(first)!.status).toBe('expired');
    expect(creates()).toBe(before + 1);
    await check(page, 'code-removed');
    await page.setViewportSize(PHONE);

    // Applied again, continued, paid.
    await tabTo(page, '#promotion-code');
    await page.keyboard.type(code);
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    expect(await page.getByTestId('amount').innerText()).toBe('€19.03');
    await tabTo(page, '[data-testid=tax-submit]');
    await Promise.all([page.waitForURL(/\/c\/pay\/cs_test_/), page.keyboard.press('Enter')]);
    const second = new URL(page.url()).pathname.split('/').pop()!;
    expect(second).not.toBe(first);
    expect(await page.getByTestId('stripe-amount').innerText()).toBe('EUR 19.03');
    await tabTo(page, '#email');
    await page.keyboard.type('code-keyboard@example.com');
    await Promise.all([page.waitForURL(/\/complete$/), page.keyboard.press('Enter')]);
    await page.getByText('Payment received').waitFor({ timeout: 20_000 });
    expect(await page.locator('footer').innerText()).toBe('Secured by Kassa · card payment by Stripe');
    const { order, kinds } = await lines(session.id);
    expect(kinds).toEqual([['PRICE', 1999], ['DISCOUNT', -400], ['TAX', 304]]);
    expect(order.amountCents).toBe(stripe.sessions.get(second)!.amount_total);
    expect((await ctx.services.modules.discounts.discounts.listPromotionCodes(ctx.orgA.orgId)).find((p) => p.code === code)!.timesRedeemed).toBe(1);
    expect(pageErrors).toEqual([]);
  }, 300_000);

  it('a promotion code on the step by mouse at desktop: applied, the country, Stripe at the discounted total, paid', async () => {
    const code = await promotionCode();
    const session = await newSession();
    const page = await openPage(DESKTOP);
    await page.goto(session.url);
    await page.getByLabel('Add a promotion code').click();
    await page.getByLabel('Add a promotion code').fill(code);
    await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Apply' }).click()]);
    expect(await page.getByTestId('promotion-code-message').innerText()).toBe(`${code} applied.`);
    expect(await page.getByTestId('amount').innerText()).toBe('€15.99');
    await check(page, 'code-mouse');
    await page.setViewportSize(DESKTOP);
    await page.getByLabel('Country').selectOption('DE');
    await Promise.all([page.waitForURL(/\/c\/pay\/cs_test_/), page.getByRole('button', { name: 'Continue to payment' }).click()]);
    expect(await page.getByTestId('stripe-amount').innerText()).toBe('EUR 19.03');
    // The browser's back button lands on the step's page (a GET: "Apply" answered with a redirect), not on a form resubmission.
    const stripeUrl = page.url();
    await page.goBack();
    await page.getByTestId('tax-lines').waitFor();
    expect(await page.getByTestId('amount').innerText()).toBe('€19.03');
    expect(await page.getByTestId('remove-promotion-code').inputValue()).toBe(`Remove ${code}`);
    const opened = creates();
    await Promise.all([page.waitForURL(/\/c\/pay\/cs_test_/), page.getByRole('button', { name: 'Continue to payment' }).click()]);
    expect(page.url()).toBe(stripeUrl);
    expect(creates()).toBe(opened);
    await page.locator('#email').click();
    await page.locator('#email').fill('code-mouse@example.com');
    await Promise.all([page.waitForURL(/\/complete$/), page.getByRole('button', { name: 'Pay' }).click()]);
    await page.getByText('Payment received').waitFor({ timeout: 20_000 });
    const { order, kinds } = await lines(session.id);
    expect(kinds).toEqual([['PRICE', 1999], ['DISCOUNT', -400], ['TAX', 304]]);
    expect(order.amountCents).toBe(1903);
    expect(pageErrors).toEqual([]);
  }, 300_000);
});
