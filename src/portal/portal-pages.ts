/**
 * The customer portal's pages under `/portal` (see portal.service.ts for how a buyer gets in).
 * Same layout, headers, rate limits, input guard and cross-site check as the checkout pages;
 * every POST also carries the session's form token (`csrf`), and the session cookie is
 * `__Host-kassa_portal`: HttpOnly, SameSite=Lax, Secure, Path=/.
 */
import { lineDetail } from '../commerce/order-line-text.js';
import type { Request, Response, Router } from 'express';
import { formatMoney } from '../kernel/money.js';
import type { Logger } from '../kernel/logger.js';
import type { Order, OrderLine, Subscription } from '../commerce/model.js';
import type { UsageEstimate } from '../commerce/usage-estimate.js';
import type { PlanChangeRequest } from '../commerce/plan-change.js';
import { hostedForm } from '../pages/form.js';
import { escapeHtml, layout, merchantName, messagePage, notFoundPage, pageFailure, sendPage, type MerchantNames, type Page, type PageMerchant, pageMerchantOf } from '../pages/page.js';
import { cancelConfirmation, inTrial, paymentActionBlock, subscriptionPrice, subscriptionState } from '../subscriptions/manage-pages.js';
import type { PortalSession } from './portal.repository.js';
import { SESSION_TTL_MS, type PortalService } from './portal.service.js';

/**
 * `__Host-`: the browser keeps it only when Secure, Path=/ and without Domain, so no sibling
 * subdomain or plain-http page can plant or overwrite it (issue 37 §15). Always Secure, as the
 * console's cookie: browsers keep Secure cookies of http://localhost and 127.0.0.1 (secure contexts).
 */
export const PORTAL_COOKIE = '__Host-kassa_portal';
const portalCookie = (maxAgeMs: number) => ({ httpOnly: true, sameSite: 'lax' as const, secure: true, path: '/', maxAge: maxAgeMs });
const DATE = new Intl.DateTimeFormat('en-GB', { dateStyle: 'long', timeZone: 'UTC' });
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

function cookieToken(req: Request): string | undefined {
  for (const part of (req.header('cookie') ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === PORTAL_COOKIE) return value.join('=');
  }
  return undefined;
}

/** "Card ending in 4242", "USDC on chain 8453": what the buyer recognizes, never a full identifier. */
export function paymentMethodSummary(order: Order): string {
  if (order.provider === 'CRYPTO') return `${order.currency} transfer${order.chain ? ` on ${order.chain}` : ''}${order.txHash ? ` (${order.txHash.slice(0, 10)}…)` : ''}`;
  const last4 = /_(\d{4})$/.exec(order.paymentMethod ?? '')?.[1];
  return last4 ? `Card ending in ${last4}` : 'Card';
}

const orderStatusText = (o: Order, failedRefundCents = 0) =>
  (o.status === 'REFUNDED' ? 'Refunded' : o.amountRefundedCents > 0 ? `Paid, ${formatMoney(o.amountRefundedCents, o.currency)} refunded` : o.status === 'UNDERPAID' ? 'Underpaid' : 'Paid') +
  // A refund the buyer was told about that failed later (issue 37 §28).
  (failedRefundCents > 0 ? `; a refund of ${formatMoney(failedRefundCents, o.currency)} did not go through` : '');

const hidden = (csrf: string) => `<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">`;

function subscriptionItem(s: Subscription, session: PortalSession, csrf: string, firstCharge?: number): string {
  const base = `/portal/subscriptions/${escapeHtml(s.id)}`;
  const actions: string[] = [];
  // A merchant's session whose creator may not manage subscriptions shows them without the buttons (issue 37 §6).
  if (!session.canChangeSubscriptions) actions.push('<p class="muted" data-testid="no-changes">To change this subscription, ask the merchant.</p>');
  else if (s.status === 'ACTIVE' && !s.cancelAtPeriodEnd) actions.push(`<a class="button secondary" data-testid="cancel-${escapeHtml(s.id)}" href="${base}/cancel">Cancel subscription…</a>`);
  else if (s.status === 'ACTIVE' && s.cancelAtPeriodEnd) actions.push(`<form method="post" action="${base}/resume">${hidden(csrf)}<button type="submit" data-testid="keep-${escapeHtml(s.id)}">Keep my subscription</button></form>`);
  if (session.canChangeSubscriptions && (session.planChangePriceIds?.length || session.allowQuantityChange) && s.status === 'ACTIVE' && !s.cancelAtPeriodEnd) {
    actions.push(`<a class="button secondary" data-testid="change-${escapeHtml(s.id)}" href="${base}/change">Change plan…</a>`);
  }
  if (session.canChangeSubscriptions && session.allowCancelNow && (s.status === 'ACTIVE' || s.status === 'PAUSED')) actions.push(`<a class="button secondary" data-testid="cancel-now-${escapeHtml(s.id)}" href="${base}/cancel?now=1">Cancel now…</a>`);
  // A scheduled downgrade sits with the status it changes, above the buttons (issue 39).
  const scheduled = s.scheduledChange
    ? `<div data-testid="scheduled-change">Changes on ${escapeHtml(DATE.format(s.currentPeriodEnd))} to ${escapeHtml(planText(s.scheduledChange.quantity, s.scheduledChange.productName, s.scheduledChange.amountCents, s))}.</div>`
    : '';
  return `<li class="item" data-testid="subscription"><h3>${escapeHtml(s.productName)}</h3><div class="muted" data-testid="subscription-price">${escapeHtml(seatsPrice(s))}</div>
${trialBlock(s, firstCharge)}<div data-testid="subscription-status">${escapeHtml(subscriptionState(s))}</div>${scheduled}${paymentActionBlock(s, `confirm-payment-${s.id}`)}${actions.join('')}</li>`;
}

/** "every month", "every 3 months". */
const everyText = (s: Pick<Subscription, 'billingInterval' | 'billingIntervalCount'>) => subscriptionPrice({ amountCents: 0, currency: 'USD', ...s }).replace(/^\S+ /, '');
/** A plan choice's name: the product's, and the price's own name when it says more (two prices of one product told apart). */
const planChoiceName = (side: { productName: string; priceName?: string }): string =>
  side.priceName && side.priceName.trim() !== '' && side.priceName !== side.productName ? `${side.productName} — ${side.priceName}` : side.productName;
/** "2 × Team plan, $40.00 every month". */
const planText = (quantity: number, productName: string, amount: number, s: Subscription) => `${quantity} × ${productName}, ${formatMoney(amount, s.currency)} ${everyText(s)}`;
/** The price with its seats: "$9.00 every month", "2 seats × $20.00 = $40.00 every month" (issue 39: a buyer sees how many seats they pay for). */
function seatsPrice(s: Subscription): string {
  if (s.quantity <= 1) return subscriptionPrice(s);
  return `${s.quantity} seats × ${formatMoney(Math.round(s.amountCents / s.quantity), s.currency)} = ${subscriptionPrice(s)}`;
}

/** Whether the subscription is still in its free trial (period 0 of a trial): its usage is counted, never billed (docs/trials.md). */

/** A subscription still in its free trial (period 0 of a trial): when it ends and what is then charged (issue 39). */
function trialBlock(s: Subscription, firstCharge = s.amountCents): string {
  if (!s.trialEnd || s.periodNumber !== 0 || s.status !== 'ACTIVE') return '';
  const charge = s.cancelAtPeriodEnd ? 'nothing will be charged' : `first charge ${formatMoney(firstCharge, s.currency)}`;
  return `<div class="muted" data-testid="trial">Free trial until ${escapeHtml(DATE.format(s.trialEnd))} · ${escapeHtml(charge)}</div>`;
}

/** Lines in words: what each charges and how (quantity × unit price, usage, included units), then its amount. */
function linesTable(lines: readonly OrderLine[], currency: string, caption: string, testId: string, footer = ''): string {
  const rows = lines
    .map((l) => {
      const detail = lineDetail(l, currency);
      return `<tr data-testid="${testId}-line"><td>${escapeHtml(l.description)}${detail ? `<div class="muted">${escapeHtml(detail)}</div>` : ''}</td><td class="num">${escapeHtml(formatMoney(l.amount, currency))}</td></tr>`;
    })
    .join('');
  return `<table class="lines" data-testid="${testId}-lines"><caption class="visually-hidden">${escapeHtml(caption)}</caption><thead><tr><th scope="col">Item</th><th scope="col" class="num">Amount</th></tr></thead><tbody>${rows}</tbody>${footer}</table>`;
}

/** The receipt's lines. */
export function orderLinesTable(order: Order): string {
  return linesTable(order.lines, order.currency, 'What you paid for', 'receipt');
}

/**
 * A metered subscription's usage this period and its estimated next charge (issue 38 §9): the lines
 * the renewal would charge if the period closed now (fee + usage, priced like the renewal).
 */
export function usageItem(e: UsageEstimate): string {
  const s = e.subscription;
  const id = escapeHtml(s.id);
  const total = `<tfoot><tr><th scope="row">Estimated next charge</th><td class="num" data-testid="usage-estimate-total"><strong>${escapeHtml(formatMoney(e.total, s.currency))}</strong></td></tr></tfoot>`;
  return `<li class="item" data-testid="usage-subscription" data-subscription="${id}"><h3>${escapeHtml(s.productName)}</h3>
<div class="muted" data-testid="usage-period">Usage from ${escapeHtml(DATE.format(s.currentPeriodStart))} to ${escapeHtml(DATE.format(s.currentPeriodEnd))}, so far</div>
${linesTable(e.lines, s.currency, `Estimated next charge of ${s.productName}`, 'usage', total)}
${inTrial(s) ? `<p class="muted" data-testid="usage-trial">Usage during your free trial (until ${escapeHtml(DATE.format(s.trialEnd!))}) is counted but not billed.</p>\n` : ''}<p class="muted">Charged on ${escapeHtml(DATE.format(e.estimatedChargeAt))}${s.cancelAtPeriodEnd ? ' (usage only: the subscription ends then)' : ''}. Usage keeps counting until the period ends; the amount is an estimate until then.</p></li>`;
}

function orderItem(o: Order, failedRefundCents?: number): string {
  return `<li class="item" data-testid="order"><h3>${escapeHtml(o.productName ?? 'Purchase')}</h3>
<div class="muted">${escapeHtml(DATE.format(o.createdAt))} · ${escapeHtml(formatMoney(o.amountCents, o.currency))} · ${escapeHtml(orderStatusText(o, failedRefundCents))}</div>
<a href="/portal/orders/${escapeHtml(o.id)}" data-testid="receipt-link">Receipt<span class="visually-hidden"> for ${escapeHtml(o.productName ?? 'this purchase')}, ${escapeHtml(DATE.format(o.createdAt))}</span></a></li>`;
}

const section = (title: string, id: string, body: string) => `<section aria-labelledby="${id}"><h2 id="${id}">${title}</h2>${body}</section>`;

/** What the paid checkout page uses to open the portal (src/checkout/hosted-pages.ts). */
export function checkoutPortalEntry(portal: PortalService) {
  return {
    isOpen: (order: Pick<Order, 'status' | 'createdAt'> | undefined) => portal.checkoutEntryOpen(order),
    /** Opens a portal session for the paid checkout's buyer (its cookie set on `res`); false once the window closed. */
    enter: async (res: Response, session: Parameters<PortalService['enterFromCheckout']>[0], order: Order | undefined): Promise<boolean> => {
      const entered = await portal.enterFromCheckout(session, order);
      if (!entered) return false;
      res.cookie(PORTAL_COOKIE, entered.cookieToken, portalCookie(SESSION_TTL_MS));
      return true;
    },
  };
}

export function registerPortalPages(router: Router, portal: PortalService, merchants: MerchantNames, logger: Logger): void {
  const fail = pageFailure(logger, 'Cannot open your account');

  const signedOut = (merchant?: PageMerchant): Page => ({
    status: 401,
    html: layout(
      'Sign in to your account',
      `<h1>Your session has ended</h1><div class="error" role="alert" data-testid="status">Open your account again from the link in your e-mail, from the merchant's site, or from your receipt.</div>`,
      { merchant },
    ),
  });

  /** The session of this request, or a signed-out page sent. */
  async function sessionOf(req: Request, res: Response): Promise<{ session: PortalSession; token: string; merchant: PageMerchant | undefined } | undefined> {
    const token = cookieToken(req);
    const session = await portal.authenticate(token);
    if (!session || !token) {
      sendPage(res, signedOut());
      return undefined;
    }
    return { session, token, merchant: await pageMerchantOf(merchants, session.orgId) };
  }

  /** A POST of a signed-in form: the session, after its form token was checked. */
  async function formSession(req: Request, res: Response) {
    const found = await sessionOf(req, res);
    if (!found) return undefined;
    if (!portal.csrfValid(found.token, (req.body as Record<string, string | undefined>)?.csrf)) {
      sendPage(res, messagePage(403, 'Form expired', 'This form is no longer valid. Go back to your account and try again.', found.merchant));
      return undefined;
    }
    return found;
  }

  async function overviewPage(session: PortalSession, token: string, merchant: PageMerchant | undefined, notice?: string): Promise<Page> {
    const { customer, orders, subscriptions, products, usage, creditBalances, firstCharges } = await portal.overview(session);
    const csrf = portal.csrfToken(token);
    const back = session.returnUrl ? `<p class="note"><a data-testid="return" href="${escapeHtml(session.returnUrl)}">Return to ${escapeHtml(merchantName(merchant) ?? 'the merchant')}</a></p>` : '';
    const subs = subscriptions.length ? `<ul class="items">${subscriptions.map((s) => subscriptionItem(s, session, csrf, firstCharges[s.id])).join('')}</ul>` : '<p class="muted">No subscriptions.</p>';
    const failed = await portal.failedRefunds(session, orders);
    const ords = orders.length ? `<ul class="items">${orders.map((o) => orderItem(o, failed.get(o.id))).join('')}</ul>` : '<p class="muted">No purchases yet.</p>';
    // A session opened from a checkout page for an address the buyer typed shows that purchase only (issue 37 §2).
    const scoped = session.scopeOrderId
      ? `<p class="note" data-testid="scope-note">This shows the purchase you just made.${
          portal.canEmailLinks ? ` <a href="/portal/o/${escapeHtml(session.orgId)}" data-testid="all-purchases">See all your purchases</a> with a link sent to your e-mail.` : ''
        }</p>`
      : '';
    const prods = products.length ? `<ul class="items">${products.map((p) => `<li class="item" data-testid="product">${escapeHtml(p.productName)} <span class="muted">(${p.type === 'SUBSCRIPTION' ? 'subscription' : 'purchased'})</span></li>`).join('')}</ul>` : '<p class="muted">None right now.</p>';
    return {
      status: 200,
      html: layout(
        'Your account',
        `<h1>Your account</h1><div class="muted" data-testid="customer-email">Signed in as ${escapeHtml(customer.email)}</div>
${notice ? `<div class="ok" role="status" data-testid="notice">${escapeHtml(notice)}</div>` : ''}${scoped}
${section('Subscriptions', 'subs', subs)}${creditBalances.length ? section('Credit balance', 'credit', `<ul class="items">${creditBalances.map((b) => `<li class="item" data-testid="credit-balance">${escapeHtml(formatMoney(b.amountCents, b.currency))} <span class="muted">taken off your next renewals in ${escapeHtml(b.currency)}</span></li>`).join('')}</ul>`) : ''}${usage.length ? section('Usage this period', 'usage', `<ul class="items">${usage.map(usageItem).join('')}</ul>`) : ''}${section('Orders and receipts', 'orders', ords)}${section('Your products', 'products', prods)}
<form method="post" action="/portal/sign-out">${hidden(csrf)}<button type="submit" class="link" data-testid="sign-out">Sign out</button></form>${back}`,
        { merchant },
      ),
    };
  }

  router.get('/portal', async (req, res) => {
    try {
      const found = await sessionOf(req, res);
      if (found) sendPage(res, await overviewPage(found.session, found.token, found.merchant));
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.get('/portal/orders/:token', async (req, res) => {
    try {
      const found = await sessionOf(req, res);
      if (!found) return;
      const order = await portal.order(found.session, req.params.token);
      const merchant = merchantName(found.merchant) ?? 'the merchant';
      const failedCents = (await portal.failedRefunds(found.session, [order])).get(order.id);
      const refunded =
        (order.amountRefundedCents > 0 ? `<dt>Refunded</dt><dd data-testid="refunded">${escapeHtml(formatMoney(order.amountRefundedCents, order.currency))}</dd>` : '') +
        (failedCents ? `<dt>Refund failed</dt><dd data-testid="refund-failed">${escapeHtml(formatMoney(failedCents, order.currency))} did not reach you; ask ${escapeHtml(merchant)} to refund you another way</dd>` : '');
      sendPage(res, {
        status: 200,
        html: layout(
          `Receipt ${order.id}`,
          `<h1>Receipt</h1><div class="muted">${escapeHtml(DATE.format(order.createdAt))}</div>
${orderLinesTable(order)}
<dl class="receipt" data-testid="receipt"><dt>Paid to</dt><dd data-testid="receipt-merchant">${escapeHtml(merchant)}</dd>
${order.lines.some((l) => l.kind === 'TAX') ? '' : '<dt>Tax</dt><dd>None charged</dd>'}
<dt>Total</dt><dd data-testid="receipt-total"><strong>${escapeHtml(formatMoney(order.amountCents, order.currency))}</strong></dd>${refunded}
<dt>Date</dt><dd>${escapeHtml(DATE.format(order.createdAt))}</dd>
<dt>Payment</dt><dd data-testid="receipt-method">${escapeHtml(paymentMethodSummary(order))}</dd>
<dt>Order</dt><dd><code data-testid="receipt-order">${escapeHtml(order.id)}</code></dd>${order.merchantReference ? `<dt>Reference</dt><dd>${escapeHtml(order.merchantReference)}</dd>` : ''}</dl>
<p class="note noprint"><a href="/portal" data-testid="back">Back to your account</a> · Print this page to keep a copy.</p>`,
          { merchant: found.merchant },
        ),
      });
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.get('/portal/subscriptions/:token/cancel', async (req, res) => {
    try {
      const found = await sessionOf(req, res);
      if (!found) return;
      const s = await portal.subscription(found.session, req.params.token);
      if (!found.session.canChangeSubscriptions) return sendPage(res, await overviewPage(found.session, found.token, found.merchant));
      const now = req.query.now === '1' && found.session.allowCancelNow;
      const csrf = hidden(portal.csrfToken(found.token));
      if (now) {
        return sendPage(res, {
          status: 200,
          html: layout(
            `Cancel ${s.productName} now?`,
            `<h1>Cancel ${escapeHtml(s.productName)} now?</h1><p data-testid="confirm-text">${inTrial(s) ? 'Your free trial ends now and you lose access. You will not be charged.' : 'Your subscription ends immediately and you lose access now. The current period is not refunded.'}</p>
<form method="post" action="/portal/subscriptions/${escapeHtml(s.id)}/cancel">${csrf}<input type="hidden" name="when" value="now"><input type="hidden" name="confirm" value="yes"><button type="submit" class="danger" data-testid="confirm-cancel">Yes, cancel now</button></form>
<p><a class="button secondary" href="/portal" data-testid="back">No, keep my subscription</a></p>`,
            { merchant: found.merchant },
          ),
        });
      }
      if (s.status !== 'ACTIVE' || s.cancelAtPeriodEnd) return sendPage(res, await overviewPage(found.session, found.token, found.merchant));
      sendPage(res, { status: 200, html: cancelConfirmation(s, found.merchant, { action: `/portal/subscriptions/${s.id}/cancel`, back: '/portal', hidden: csrf }) });
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/portal/subscriptions/:token/cancel', hostedForm({ limit: '2kb', parameterLimit: 5 }), async (req, res) => {
    try {
      const found = await formSession(req, res);
      if (!found) return;
      const form = req.body as Record<string, string | undefined>;
      if (form.confirm !== 'yes') return res.redirect(303, `/portal/subscriptions/${encodeURIComponent(req.params.token)}/cancel`);
      const s = form.when === 'now' ? await portal.cancelNow(found.session, req.params.token, req.ip ?? null) : await portal.cancelAtPeriodEnd(found.session, req.params.token, req.ip ?? null);
      // During a free trial nothing was charged (issue 39): "not charged", never "not charged again".
      const trial = inTrial(s);
      const notice =
        s.status === 'CANCELED'
          ? trial ? `Your free trial of ${s.productName} is canceled; you were not charged.` : `${s.productName} is canceled.`
          : trial ? `Your free trial of ${s.productName} ends on ${DATE.format(s.currentPeriodEnd)}; you will not be charged.` : `${s.productName} will end on ${DATE.format(s.currentPeriodEnd)}; you will not be charged again.`;
      sendPage(res, await overviewPage(found.session, found.token, found.merchant, notice));
    } catch (err) {
      fail(req, res, err);
    }
  });

  /**
   * The renewals after a change in words: "Then €38.08 at each renewal", or with a coupon that ends
   * "Then €38.08 at the next 2 renewals (your discount), then €47.60 at each renewal".
   */
  const renewalsText = (r: { next: number; full: number; discounted: number | null }, currency: string): string => {
    if (r.next === r.full || r.discounted === null) return `Then ${formatMoney(r.next, currency)} at each renewal.`;
    const span = r.discounted === 1 ? 'the next renewal' : `the next ${r.discounted} renewals`;
    return `Then ${formatMoney(r.next, currency)} at ${span} (your discount), then ${formatMoney(r.full, currency)} at each renewal.`;
  };

  /** Plan change (issue 39): the merchant's listed prices and/or seats; a preview, then a confirmation that charges exactly it. */
  router.get('/portal/subscriptions/:token/change', async (req, res) => {
    try {
      const found = await sessionOf(req, res);
      if (!found) return;
      const s = await portal.subscription(found.session, req.params.token);
      const scope = portal.planScope(found.session);
      if (!scope || s.status !== 'ACTIVE') return sendPage(res, await overviewPage(found.session, found.token, found.merchant));
      const options = await portal.planOptions(found.session, s.id);
      // The plans side by side on one basis: the quotes' fees, before tax (a subscription's stored
      // amount holds its exclusive tax: before, "Keep" said 23.80 a seat with 19 % VAT beside the
      // other plans' 40.00 before tax). Without a listed price, the stored amount as before.
      const from = options[0]?.from;
      const taxed = from !== undefined && from.amount !== s.amountCents;
      const keepUnit = from ? Math.round(from.amount / (from.quantity || 1)) : Math.round(s.amountCents / (s.quantity || 1));
      const radios = [
        `<label class="choice"><input type="radio" name="priceId" value="" checked> <span>Keep ${escapeHtml(planChoiceName(from ?? s))} <span class="muted">${escapeHtml(formatMoney(keepUnit, s.currency))} per seat ${escapeHtml(everyText(s))}</span></span></label>`,
        ...options.map((q) => `<label class="choice"><input type="radio" name="priceId" value="${escapeHtml(q.to.priceId ?? '')}"> <span>${escapeHtml(planChoiceName(q.to))} <span class="muted">${escapeHtml(formatMoney(q.to.unitAmount, s.currency))} per seat ${escapeHtml(everyText(s))}</span></span></label>`),
      ].join('');
      // A downgrade takes effect at the period's end unless the buyer asks for it now, with credit for the unused time (on Stripe, Stripe's customer balance: docs/plan-changes.md).
      const when = `<fieldset data-testid="downgrade-when"><legend>If the new plan costs less, change</legend><label class="choice"><input type="radio" name="when" value="period_end" checked> <span>At the end of the period, on ${escapeHtml(DATE.format(s.currentPeriodEnd))} <span class="muted">nothing is charged or credited now</span></span></label><label class="choice"><input type="radio" name="when" value="now"> <span>Now, with credit for the unused time <span class="muted">added to your credit balance and taken off your next renewals</span></span></label></fieldset>`;
      const seats = scope.allowQuantity ? `<p><label for="quantity">Seats</label> <input id="quantity" name="quantity" type="number" min="1" max="100" step="1" value="${s.quantity}" inputmode="numeric" required></p>` : '';
      sendPage(res, {
        status: 200,
        html: layout(
          `Change ${s.productName}`,
          `<h1>Change ${escapeHtml(s.productName)}</h1><p class="muted" data-testid="plan-now">Now: ${escapeHtml(from ? planText(from.quantity, planChoiceName(from), from.amount, s) : planText(s.quantity, s.productName, s.amountCents, s))}${taxed ? ' before tax' : ''}</p>${
            taxed ? '<p class="muted" data-testid="plan-tax">Prices before tax: the review shows the tax of the change, as your receipts do.</p>' : ''
          }
<form method="post" action="/portal/subscriptions/${escapeHtml(s.id)}/change">${hidden(portal.csrfToken(found.token))}<fieldset><legend>Plan</legend>${radios}</fieldset>${seats}${when}<input type="hidden" name="step" value="preview"><button type="submit" data-testid="preview-change">Review the change</button></form>
<p><a class="button secondary" href="/portal" data-testid="back">Back to your account</a></p>`,
          { merchant: found.merchant },
        ),
      });
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/portal/subscriptions/:token/change', hostedForm({ limit: '2kb', parameterLimit: 12 }), async (req, res) => {
    try {
      const found = await formSession(req, res);
      if (!found) return;
      const form = req.body as Record<string, string | undefined>;
      const quantity = form.quantity ? Number(form.quantity) : undefined;
      if (quantity !== undefined && (!Number.isInteger(quantity) || quantity < 1 || quantity > 100)) {
        return sendPage(res, messagePage(400, 'Seats must be a whole number from 1 to 100', 'Go back and enter the number of seats again.', found.merchant));
      }
      const s = await portal.subscription(found.session, req.params.token);
      const request: PlanChangeRequest = { ...(form.priceId ? { priceId: form.priceId } : {}), ...(quantity !== undefined && quantity !== s.quantity ? { quantity } : {}) };
      const now = form.when === 'now';
      if (form.step === 'confirm') {
        const immediate = now && form.effective === 'IMMEDIATE';
        const expectedCredit = Number(form.expectedCredit ?? '0');
        const { subscription, quote, pending } = await portal.changePlan(
          found.session,
          s.id,
          { ...request, ...(immediate && { effective: 'IMMEDIATE' as const, expectedBalanceCreditCents: Number.isSafeInteger(expectedCredit) ? expectedCredit : -1 }), prorationDate: new Date(Number(form.prorationDate) * 1000), expectedAmountDueCents: Number(form.expected) },
          req.ip ?? null,
        );
        const credited = quote.balanceCredit ?? 0;
        const notice = pending
          ? `${formatMoney(quote.amountDue, s.currency)} was charged; your change to ${quote.to.quantity} × ${quote.to.productName} is being applied and shows here shortly.`
          : quote.effective === 'PERIOD_END'
            ? `From ${DATE.format(subscription.currentPeriodEnd)} your subscription is ${planText(quote.to.quantity, quote.to.productName, quote.to.amount, s)}; nothing was charged now.`
            : `Your subscription is now ${subscription.quantity} × ${subscription.productName}${quote.amountDue > 0 ? `; ${formatMoney(quote.amountDue, s.currency)} was charged` : ''}${credited > 0 ? `; ${formatMoney(credited, s.currency)} was added to your credit balance` : ''}.`;
        return sendPage(res, await overviewPage(found.session, found.token, found.merchant, notice));
      }
      // Only a downgrade asks when: its default is the period's end; "now" quotes it again taking effect at once.
      const first = await portal.previewPlanChange(found.session, s.id, request);
      const q = now && first.effective === 'PERIOD_END' ? await portal.previewPlanChange(found.session, s.id, { ...request, effective: 'IMMEDIATE' }) : first;
      const credit = q.balanceCredit ?? 0;
      const rows = q.lines.map((l) => `<tr data-testid="preview-line"><td>${escapeHtml(l.description)}</td><td class="num">${escapeHtml(formatMoney(l.amount, s.currency))}</td></tr>`).join('');
      // The receipt's table style: amounts never wrap (at 390 px "−$6.00" broke over three lines).
      const when =
        q.effective === 'PERIOD_END'
          ? `<p data-testid="preview-when">This takes effect on ${escapeHtml(DATE.format(q.periodEnd))}, when your subscription renews. Nothing is charged now.</p>`
          : `<table class="lines" data-testid="preview-lines"><caption class="visually-hidden">${credit > 0 ? 'This change now' : 'Charged now'}</caption><thead><tr><th scope="col">${credit > 0 ? 'This change now' : 'Charged now'}</th><th scope="col" class="num">Amount</th></tr></thead><tbody>${rows}</tbody><tfoot><tr><th scope="row">Total due now</th><td class="num" data-testid="preview-total">${escapeHtml(formatMoney(q.amountDue, s.currency))}</td></tr></tfoot></table>`;
      sendPage(res, {
        status: 200,
        html: layout(
          'Confirm the change',
          `<h1>Confirm the change</h1><p data-testid="preview-summary">From ${escapeHtml(planText(q.from.quantity, q.from.productName, q.from.amount, s))}<br>to ${escapeHtml(planText(q.to.quantity, q.to.productName, q.to.amount, s))}</p>${when}
${credit > 0 ? `<p data-testid="preview-credit">${escapeHtml(formatMoney(credit, s.currency))} is added to your credit balance and taken off your next renewals. It is not paid out.</p>` : ''}<p data-testid="preview-next">${escapeHtml(renewalsText(await portal.renewalsAfterChange(found.session, s.id, q), s.currency))}</p>
<form method="post" action="/portal/subscriptions/${escapeHtml(s.id)}/change">${hidden(portal.csrfToken(found.token))}<input type="hidden" name="priceId" value="${escapeHtml(form.priceId ?? '')}">${quantity !== undefined ? `<input type="hidden" name="quantity" value="${quantity}">` : ''}<input type="hidden" name="prorationDate" value="${q.prorationDate.getTime() / 1000}"><input type="hidden" name="expected" value="${q.amountDue}">${q.effective === 'IMMEDIATE' && now ? `<input type="hidden" name="when" value="now"><input type="hidden" name="effective" value="IMMEDIATE"><input type="hidden" name="expectedCredit" value="${credit}">` : ''}<input type="hidden" name="step" value="confirm"><button type="submit" data-testid="confirm-change">${q.amountDue > 0 ? `Confirm and pay ${escapeHtml(formatMoney(q.amountDue, s.currency))}` : 'Confirm the change'}</button></form>
<p><a class="button secondary" href="/portal" data-testid="back">Cancel, keep my plan</a></p>`,
          { merchant: found.merchant },
        ),
      });
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/portal/subscriptions/:token/resume', hostedForm({ limit: '2kb', parameterLimit: 5 }), async (req, res) => {
    try {
      const found = await formSession(req, res);
      if (!found) return;
      const s = await portal.keepRenewing(found.session, req.params.token, req.ip ?? null);
      sendPage(res, await overviewPage(found.session, found.token, found.merchant, `${s.productName} continues and renews on ${DATE.format(s.currentPeriodEnd)}.`));
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/portal/sign-out', hostedForm({ limit: '2kb', parameterLimit: 5 }), async (req, res) => {
    try {
      const found = await formSession(req, res);
      if (!found) return;
      await portal.signOut(found.token);
      res.clearCookie(PORTAL_COOKIE, { httpOnly: true, sameSite: 'lax', secure: true, path: '/' });
      sendPage(res, { status: 200, html: layout('Signed out', `<h1>Signed out</h1><div class="ok" role="status" data-testid="status">You are signed out of your account.</div>`, { merchant: found.merchant }) });
    } catch (err) {
      fail(req, res, err);
    }
  });

  // ---- entry ----

  const linkGone = (merchant?: PageMerchant, orgId?: string): Page => ({
    status: 410,
    html: layout(
      'Link expired',
      `<h1>This link has expired</h1><div class="error" role="alert" data-testid="status">Links to your account work once, for a few minutes.${orgId && portal.canEmailLinks ? '' : ' Ask the merchant for a new one.'}</div>${
        orgId && portal.canEmailLinks ? `<p><a class="button" href="/portal/o/${escapeHtml(orgId)}" data-testid="sign-in">Get a new link by e-mail</a></p>` : ''
      }`,
      { merchant },
    ),
  });

  // A GET never uses the link: mail scanners and link previews fetch it before the buyer does.
  router.get('/portal/enter/:token', async (req, res) => {
    try {
      const session = await portal.findEnterable(req.params.token);
      if (!session) return sendPage(res, linkGone());
      const merchant = await pageMerchantOf(merchants, session.orgId);
      sendPage(res, {
        status: 200,
        html: layout(
          'Open your account',
          `<h1>Your account with ${escapeHtml(merchantName(merchant) ?? 'this merchant')}</h1><p class="muted">Your orders, receipts and subscriptions.</p>
<form method="post" action="/portal/enter/${escapeHtml(req.params.token)}"><button type="submit" data-testid="enter">Continue to your account</button></form>`,
          { merchant },
        ),
      });
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/portal/enter/:token', hostedForm({ limit: '1kb', parameterLimit: 2 }), async (req, res) => {
    try {
      const entered = await portal.enter(req.params.token);
      if (!entered) return sendPage(res, linkGone());
      res.cookie(PORTAL_COOKIE, entered.cookieToken, portalCookie(SESSION_TTL_MS));
      res.redirect(303, '/portal');
    } catch (err) {
      fail(req, res, err);
    }
  });

  const signInPage = (orgId: string, merchant: PageMerchant | undefined, status = 200, notice?: string): Page => ({
    status,
    html: layout(
      'Sign in to your account',
      `<h1>Your orders and subscriptions</h1>${
        portal.canEmailLinks
          ? `${notice ? `<div class="ok" role="status" data-testid="status">${escapeHtml(notice)}</div>` : `<p class="muted">Enter the e-mail address you paid with. We will send you a link that opens your account.</p>`}
<form method="post" action="/portal/o/${escapeHtml(orgId)}"><label for="email">E-mail</label><input id="email" name="email" type="email" autocomplete="email" required maxlength="255"><button type="submit" data-testid="send-link">E-mail me a link</button></form>`
          : `<div class="muted" data-testid="status">Ask ${escapeHtml(merchantName(merchant) ?? 'the merchant')} for a link to your account, or use the link on your receipt page.</div>`
      }`,
      { merchant },
    ),
  });

  router.get('/portal/o/:token', async (req, res) => {
    try {
      const merchant = await pageMerchantOf(merchants, req.params.token);
      if (merchant === undefined) return sendPage(res, notFoundPage());
      sendPage(res, signInPage(req.params.token, merchant));
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/portal/o/:token', hostedForm({ limit: '2kb', parameterLimit: 3 }), async (req, res) => {
    try {
      const orgId = req.params.token;
      const merchant = await pageMerchantOf(merchants, orgId);
      if (merchant === undefined) return sendPage(res, notFoundPage());
      if (!portal.canEmailLinks) return sendPage(res, signInPage(orgId, merchant));
      const email = ((req.body as Record<string, string | undefined>).email ?? '').trim();
      if (!EMAIL.test(email) || email.length > 255) return sendPage(res, signInPage(orgId, merchant, 400, 'Enter the e-mail address you paid with.'));
      await portal.requestSignInLink(orgId, email);
      // The same answer whether or not the address bought anything here.
      sendPage(res, signInPage(orgId, merchant, 200, `If ${email} has purchases with ${merchantName(merchant)}, a link to your account is on its way. It works once, for 30 minutes.`));
    } catch (err) {
      fail(req, res, err);
    }
  });
}
