/**
 * Issue 28's "How to prove it", as one buyer and one merchant live it, end to end over real HTTP:
 * Kassa served on a loopback port (PUBLIC_BASE_URL is that origin, so every link Kassa writes is
 * followed as written), its Stripe SDK client on the local Stripe-shaped server with Stripe's
 * events signed by the SDK, a real SMTP server (smtp-server) receiving the buyer's e-mails, a real
 * HTTPS receiver verifying Kassa's signed webhooks, and headless Chromium where the buyer clicks.
 *
 * A monthly subscription bought through Stripe Checkout with a `successUrl` → the subscription's
 * e-mail → its portal link → sign-in link by e-mail → the portal → cancel at period end (confirm)
 * → e-mail → keep it (Stripe's cancel_at_period_end back to false) → a partial refund from the
 * admin API and one made in the Stripe Dashboard → two `order.refunded` with each amount → a
 * dispute opened then closed → the Dashboard refund fails → amountRefunded back down → a renewal
 * needing 3-D Secure → the e-mail and the portal's "Confirm your payment" → Stripe's hosted
 * invoice page → paid: ACTIVE again and the link gone. The portal's pages on the way are checked
 * with axe-core on a desktop and a 390 px phone, and the sign-in and "Confirm your payment" steps
 * are done with the keyboard only; screenshots in test/e2e/.artifacts/screenshots/scenario-*.png.
 */
import { mkdirSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { chromiumAvailable, launchChromium, serveOnLoopback } from '../harness/browser.js';
import { activate, axeViolations, tabTo } from '../harness/accessibility.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { createStripeContext, type StripeContext } from '../processors/stripe-context.js';
import { receiveOrderWebhooks, type OrderWebhooks } from '../processors/order-webhooks.js';
import { startSmtp, type ReceivedMail } from '../buyer-emails/smtp.js';

const SHOTS = `${process.env.KASSA_SHOTS_DIR ?? 'test/e2e/.artifacts'}/screenshots`;
const EVENTS = ['order.paid', 'order.refunded', 'order.refund_failed', 'order.dispute_created', 'order.dispute_closed', 'subscription.created', 'subscription.updated', 'subscription.action_required'];

let kassaApp: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
let s: StripeContext;
let webhooks: OrderWebhooks;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let priceId: string;

const BUYER = 'lena@example.com';
const SUCCESS_URL = 'https://shop.example.com/thanks';

/** Runs the e-mail job until nothing is due; the messages sent meanwhile. */
async function sendEmails(): Promise<ReceivedMail[]> {
  const before = smtp.received.length;
  while (await s.ctx.services.modules.buyerEmails!.emails.sendDue()) {
    // next batch
  }
  return smtp.received.slice(before);
}

async function waitForMail(match: RegExp, from: number): Promise<ReceivedMail> {
  for (let i = 0; i < 200; i++) {
    const found = smtp.received.slice(from).find((m) => match.test(m.raw));
    if (found) return found;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no e-mail matching ${match}`);
}

const shot = (name: string) => page.screenshot({ path: `${SHOTS}/scenario-${name}.png`, fullPage: true });

/** No serious axe-core violation, no sideways scrolling, and a screenshot: on a desktop, then on a 390 px phone. */
async function check(name: string): Promise<void> {
  for (const viewport of [{ name: 'desktop', width: 1280, height: 900 }, { name: 'phone', width: 390, height: 844 }]) {
    await page.setViewportSize(viewport);
    expect(await axeViolations(page), `${name} (${viewport.name}): axe`).toEqual([]);
    expect((await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number, `${name} (${viewport.name}): overflow`).toBeLessThanOrEqual(0);
    await shot(`${name}-${viewport.name}`);
  }
  await page.setViewportSize({ width: 1280, height: 900 });
}
const merchantGet = (path: string) => s.ctx.merchant.get(path).set('X-API-Key', s.ctx.orgA.apiKey);

async function clickAndLoad(selector: string): Promise<void> {
  await Promise.all([page.waitForNavigation(), page.click(selector)]);
}

describe.skipIf(!chromiumAvailable)(skippedUnless('the after-payment scenario in a browser', 'chromium'), () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    // Kassa's port first, so its PUBLIC_BASE_URL is the origin the browser and the e-mails use.
    served = await serveOnLoopback((req, res) => kassaApp!(req, res));
    smtp = await startSmtp();
    s = await createStripeContext({ WEBHOOK_ALLOW_LOOPBACK: 'true', PUBLIC_BASE_URL: served.origin, SMTP_URL: `${smtp.url}/?ignoreTLS=true`, SMTP_FROM: 'receipts@kassa.test' });
    kassaApp = s.ctx.apps.merchant;
    webhooks = await receiveOrderWebhooks(s.ctx, EVENTS);
    const product = await s.ctx.services.catalog.createProduct(s.ctx.orgA.orgId, { name: 'Pro plan', description: 'Everything, monthly' });
    priceId = (await s.ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'EUR', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH' })).id;
    browser = await launchChromium();
    // bypassCSP: the pages forbid scripts, and axe-core is one.
    context = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
    page = await context.newPage();
  });
  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await webhooks?.close();
    await s?.close();
    await smtp?.close();
    await served?.close();
  });

  let subscriptionId: string;
  let orderId: string;
  let stripeSubId: string;
  let portalSignIn: string;

  it('buys a monthly subscription through Stripe Checkout with a successUrl; the subscription e-mail links the portal', async () => {
    const created = await s.create({ pricingId: priceId, customerEmail: BUYER, successUrl: SUCCESS_URL });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await page.goto(created.body.data.url);
    expect(page.url()).toContain('/c/pay/cs_test_');
    await clickAndLoad('button[type=submit]');
    // Stripe sends the buyer back through Kassa's page; Stripe's event arrives on its own.
    const stripeSessionId = await s.stripeIdOf(created.body.data.id);
    expect((await s.deliver(s.stripe.lastEvent('checkout.session.completed', stripeSessionId))).body.outcome).toBe('applied');
    // Back on Kassa's paid page: a way back to the shop, and one into the portal.
    expect(new URL(page.url()).pathname).toMatch(/^\/checkout\/[\w-]+\/complete$/);
    await page.getByText('Payment received').waitFor({ timeout: 20_000 });
    expect(await page.locator(`a[href="${SUCCESS_URL}"]`).count()).toBe(1);
    expect(await page.getByTestId('open-portal').count()).toBe(1);
    await shot('paid');

    const session = await s.readSession(created.body.data.id);
    orderId = session.orderId;
    const row = await s.ctx.testDb.database.db('subscriptions').where({ checkout_session_id: created.body.data.id }).first();
    subscriptionId = row.id as string;
    stripeSubId = row.processor_subscription_id as string;
    expect(stripeSubId).toMatch(/^sub_/);

    const mails = await sendEmails();
    expect(mails.map((m) => m.to)).toEqual([[BUYER]]);
    expect(mails[0]!.raw).toContain('Your subscription has started');
    portalSignIn = /(http:\/\/127\.0\.0\.1:\d+\/portal\/o\/ORG_\w+)/.exec(mails[0]!.raw)![1]!;
    expect(portalSignIn.startsWith(served.origin)).toBe(true);
    // No bearer token in it: the sign-in page e-mails one, to the customer's own address.
    expect(mails[0]!.raw).not.toMatch(/\/portal\/enter\//);
  });

  it('follows the e-mail to the portal: asks for a link, gets it by e-mail, opens the account', async () => {
    // With the keyboard only, as on the other portal pages.
    await page.goto(portalSignIn);
    await check('sign-in');
    await tabTo(page, '#email');
    await page.keyboard.type(BUYER);
    const from = smtp.received.length;
    await activate(page, '[data-testid=send-link]');
    await expect(page.getByTestId('status').textContent()).resolves.toContain('a link to your account is on its way');
    await check('link-sent');
    const mail = await waitForMail(/\/portal\/enter\//, from);
    expect(mail.to).toEqual([BUYER]);
    const link = /(http:\/\/127\.0\.0\.1:\d+\/portal\/enter\/[0-9A-Za-z]{32})/.exec(mail.raw)![1]!;
    await page.goto(link);
    await activate(page, '[data-testid=enter]');
    expect(new URL(page.url()).pathname).toBe('/portal');
    await expect(page.getByTestId('customer-email').textContent()).resolves.toContain(BUYER);
    await expect(page.getByTestId('subscription-status').textContent()).resolves.toContain('Active: renews on');
    await shot('portal');
  });

  it('cancels at period end after a confirmation (Stripe told, e-mail sent), then keeps it: Stripe’s cancel_at_period_end is false again', async () => {
    await clickAndLoad(`[data-testid=cancel-${subscriptionId}]`);
    await expect(page.getByTestId('confirm-text').textContent()).resolves.toContain('You keep access until');
    await clickAndLoad('[data-testid=confirm-cancel]');
    await expect(page.getByTestId('subscription-status').textContent()).resolves.toContain('Canceled: access ends on');
    expect(s.stripe.subscriptions.get(stripeSubId)!.cancel_at_period_end).toBe(true);
    const canceledMail = await sendEmails();
    expect(canceledMail).toHaveLength(1);
    expect(canceledMail[0]!.raw).toContain('Your subscription is canceled');

    const before = s.stripe.requests.length;
    await clickAndLoad(`[data-testid=keep-${subscriptionId}]`);
    await expect(page.getByTestId('subscription-status').textContent()).resolves.toContain('Active: renews on');
    const calls = s.stripe.requests.slice(before).filter((r) => r.method === 'POST' && r.path === `/v1/subscriptions/${stripeSubId}`);
    expect(calls.map((r) => r.body)).toEqual([{ cancel_at_period_end: 'false' }]);
    expect(s.stripe.subscriptions.get(stripeSubId)!.cancel_at_period_end).toBe(false);
    expect((await merchantGet(`/v1/subscriptions/${subscriptionId}`)).body.data).toMatchObject({ status: 'ACTIVE', cancelAtPeriodEnd: false });
  });

  let dashboardRefundId: string;
  it('a partial refund from the admin API and one from the Stripe Dashboard: two order.refunded with each amount, two refund e-mails', async () => {
    const kassa = await s.ctx.admin.post(`/v1/orders/${orderId}/refund`).send({ amount: 200, reason: 'requested_by_customer' });
    expect(kassa.status).toBe(200);
    const intentId = (await s.ctx.testDb.database.db('orders').where({ id: orderId }).first()).processor_payment_id as string;
    const dashboard = s.stripe.refundInDashboard(intentId, 300);
    dashboardRefundId = dashboard.id;
    expect((await s.deliver(s.stripe.lastEvent('refund.created', dashboard.id))).body.outcome).toBe('applied');

    const refunded = (await webhooks.receivedWithData(orderId)).filter((r) => r.type === 'order.refunded');
    expect(refunded.map((r) => [(r.data.refund as { amountCents: number; source: string }).amountCents, (r.data.refund as { source: string }).source, r.order.amountRefundedCents])).toEqual([
      [200, 'kassa', 200],
      [300, 'dashboard', 500],
    ]);
    const mails = await sendEmails();
    expect(mails.map((m) => /Org A refunded €[\d.]+ for Pro plan/.exec(m.raw)?.[0])).toEqual(['Org A refunded €2.00 for Pro plan', 'Org A refunded €3.00 for Pro plan']);
  });

  it('a dispute is created, then closed: two events with the dispute', async () => {
    const intentId = (await s.ctx.testDb.database.db('orders').where({ id: orderId }).first()).processor_payment_id as string;
    const dispute = s.stripe.openDispute(intentId, 'fraudulent');
    expect((await s.deliver(s.stripe.lastEvent('charge.dispute.created', dispute.id))).body.outcome).toBe('applied');
    s.stripe.closeDispute(dispute.id, 'won');
    expect((await s.deliver(s.stripe.lastEvent('charge.dispute.closed', dispute.id))).body.outcome).toBe('applied');
    const events = (await webhooks.receivedWithData(orderId)).filter((r) => r.type.startsWith('order.dispute_'));
    expect(events.map((e) => [e.type, (e.data.dispute as { status: string }).status])).toEqual([
      ['order.dispute_created', 'needs_response'],
      ['order.dispute_closed', 'won'],
    ]);
    expect((await merchantGet(`/v1/orders/${orderId}/disputes`)).body.data).toMatchObject([{ providerDisputeId: dispute.id, status: 'won', outcome: 'won' }]);
  });

  it('the Dashboard refund fails: amountRefunded goes back down and order.refund_failed says so', async () => {
    s.stripe.failRefund(dashboardRefundId);
    expect((await s.deliver(s.stripe.lastEvent('refund.failed', dashboardRefundId))).body.outcome).toBe('applied');
    expect(await s.readOrder(orderId)).toMatchObject({ status: 'PAID', amountRefundedCents: 200 });
    const failed = (await webhooks.receivedWithData(orderId)).filter((r) => r.type === 'order.refund_failed');
    expect(failed.map((r) => [(r.data.refund as { amountCents: number }).amountCents, r.order.amountRefundedCents])).toEqual([[300, 200]]);
    // The buyer, told earlier that the refund was on its way, hears that it did not go through (issue 37 §28).
    expect((await sendEmails()).map((m) => m.subject)).toEqual(['Pro plan: your refund of €3.00 did not go through']);
    // The buyer's receipt in the portal follows.
    await page.goto(`${served.origin}/portal/orders/${orderId}`);
    await expect(page.getByTestId('refunded').textContent()).resolves.toBe('€2.00');
  });

  it('a renewal needs 3-D Secure: the e-mail and the portal link Stripe’s page; confirmed there and paid, the subscription is ACTIVE and the link is gone', async () => {
    const invoice = s.stripe.renewRequiringAction(stripeSubId);
    expect((await s.deliver(s.stripe.lastEvent('invoice.payment_failed', invoice.id))).body.outcome).toBe('applied');
    expect((await s.deliver(s.stripe.lastEvent('invoice.payment_action_required', invoice.id))).body.outcome).toBe('applied');
    expect((await merchantGet(`/v1/subscriptions/${subscriptionId}`)).body.data.paymentAction).toMatchObject({ hostedInvoiceUrl: invoice.hosted_invoice_url });

    const mails = await sendEmails();
    // One e-mail, the one that says what to do: not also "declined, check your card" (the card was not declined).
    expect(mails.map((m) => /^Subject: (.*)$/m.exec(m.raw)?.[1])).toEqual(['Pro plan: confirm your payment to keep your subscription']);
    const action = mails[0];
    expect(action!.raw).toContain(`Confirm your payment: ${invoice.hosted_invoice_url}`);
    expect(action!.raw).toContain(`href="${invoice.hosted_invoice_url}"`);

    await page.goto(`${served.origin}/portal`);
    await expect(page.getByTestId('subscription-status').textContent()).resolves.toContain('needs your confirmation');
    const confirm = page.getByTestId(`confirm-payment-${subscriptionId}`);
    expect(await confirm.getAttribute('href')).toBe(invoice.hosted_invoice_url);
    await check('action-required');
    await activate(page, `[data-testid=confirm-payment-${subscriptionId}]`);
    expect(page.url()).toBe(invoice.hosted_invoice_url);
    await clickAndLoad('[data-testid=confirm-invoice]');
    await expect(page.getByTestId('invoice-status').textContent()).resolves.toContain('Invoice paid');
    expect(s.stripe.invoicesConfirmed).toEqual([invoice.id]);
    expect((await s.deliver(s.stripe.lastEvent('invoice.paid' as never, invoice.id))).body.outcome).toBe('applied');

    await page.goto(`${served.origin}/portal`);
    await expect(page.getByTestId('subscription-status').textContent()).resolves.toContain('Active: renews on');
    expect(await page.getByTestId(`confirm-payment-${subscriptionId}`).count()).toBe(0);
    expect(await page.getByTestId('payment-action').count()).toBe(0);
    const after = (await merchantGet(`/v1/subscriptions/${subscriptionId}`)).body.data;
    expect(after.status).toBe('ACTIVE');
    expect(after.paymentAction).toBeUndefined();
    const updates = (await webhooks.all()).filter((d) => d.type === 'subscription.action_required' || d.type === 'subscription.updated');
    expect(updates.filter((d) => d.type === 'subscription.action_required')).toHaveLength(1);
    expect(updates.at(-1)!.data.subscription).not.toHaveProperty('paymentAction');
    expect((await sendEmails()).map((m) => /Your subscription renewed/.test(m.raw))).toEqual([true]);
    await check('recovered');
  });
});
