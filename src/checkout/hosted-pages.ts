/**
 * The buyer-facing pages on {base_url}: the hosted checkout page at a session's `url`, its Pay
 * form, the "processing / paid" page, and the entry point of payment links. Plain server-rendered
 * HTML with one stylesheet inline and no script, no external asset: it works on any phone and
 * under a strict Content-Security-Policy.
 */
import type { Request, Response, Router } from 'express';
import { AppError } from '../kernel/errors.js';
import { statusOf, toAppError } from '../http/errors.js';
import { hostedForm } from './hosted-form.js';
import { formatMoney } from '../kernel/money.js';
import type { Logger } from '../kernel/logger.js';
import type { CheckoutSession } from '../commerce/model.js';
import type { CheckoutSessionService, PaymentAttempt } from './checkout-session.service.js';
import type { Order } from '../commerce/model.js';
import type { SubscriptionService } from '../subscriptions/subscription.service.js';
import type { Subscription } from '../commerce/model.js';

export const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** No script at all; styles only inline; forms post to us; never framed. */
export const HOSTED_PAGE_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self' https:; frame-ancestors 'none'; base-uri 'none'";

/** The headers of every hosted page. */
export const HOSTED_PAGE_HEADERS = { 'Content-Security-Policy': HOSTED_PAGE_CSP, 'X-Frame-Options': 'DENY', 'Referrer-Policy': 'no-referrer', 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' };

const STYLE = `
*{box-sizing:border-box}body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#f4f5f7;color:#1d2330}
main{max-width:440px;margin:0 auto;padding:24px 16px}
.card{background:#fff;border-radius:14px;box-shadow:0 1px 3px rgba(16,24,40,.1),0 8px 24px rgba(16,24,40,.06);padding:24px}
.brand{font-weight:700;letter-spacing:.02em;color:#4338ca;margin-bottom:16px}
h1{font-size:1.25rem;margin:0 0 4px}.muted{color:#667085;font-size:.9rem}
.total{display:flex;justify-content:space-between;align-items:baseline;border-top:1px solid #eaecf0;margin-top:16px;padding-top:16px}
.total strong{font-size:1.5rem}
label{display:block;font-size:.85rem;font-weight:600;margin:14px 0 6px}
input{width:100%;font:inherit;padding:12px;border:1px solid #d0d5dd;border-radius:10px;background:#fff}
input:focus{outline:2px solid #6366f1;border-color:#6366f1}
.row{display:flex;gap:12px}.row>div{flex:1}
button{width:100%;margin-top:20px;padding:14px;font:inherit;font-weight:700;color:#fff;background:#4338ca;border:0;border-radius:10px;cursor:pointer}
button:hover{background:#3730a3}
.error{background:#fef3f2;color:#b42318;border:1px solid #fecdca;border-radius:10px;padding:10px 12px;margin-top:16px}
.ok{background:#ecfdf3;color:#067647;border:1px solid #abefc6;border-radius:10px;padding:10px 12px;margin-top:16px}
.note{margin-top:16px;font-size:.8rem;color:#667085}.note code{background:#f2f4f7;padding:1px 4px;border-radius:4px}
a{color:#4338ca}footer{text-align:center;margin-top:16px;font-size:.8rem;color:#98a2b3}
`;

export function layout(title: string, body: string, options: { refreshSeconds?: number; refreshUrl?: string } = {}): string {
  const target = options.refreshUrl ? `;url=${escapeHtml(options.refreshUrl)}` : '';
  const refresh = options.refreshSeconds ? `<meta http-equiv="refresh" content="${options.refreshSeconds}${target}">` : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">${refresh}<title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body><main><div class="card"><div class="brand">Kassa</div>${body}</div><footer>Secured by Kassa · sandbox</footer></main></body></html>`;
}

export function summary(session: CheckoutSession): string {
  const unit = formatMoney(session.pricing.amount, session.currency);
  const interval = session.pricing.pricingType === 'SUBSCRIPTION' && session.pricing.billingInterval
    ? ` every ${session.pricing.billingIntervalCount > 1 ? `${session.pricing.billingIntervalCount} ` : ''}${session.pricing.billingInterval.toLowerCase()}${session.pricing.billingIntervalCount > 1 ? 's' : ''}`
    : '';
  return `<h1 data-testid="product-name">${escapeHtml(session.product.name)}</h1>
${session.product.description ? `<div class="muted">${escapeHtml(session.product.description)}</div>` : ''}
<div class="muted" data-testid="quantity">${session.quantity} × ${escapeHtml(unit)}${escapeHtml(interval)}</div>
<div class="total"><span>Total</span><strong data-testid="amount">${escapeHtml(formatMoney(session.amount, session.currency))}</strong></div>`;
}

function checkoutPage(session: CheckoutSession, error?: string): string {
  const emailField = session.customerEmail
    ? `<div class="muted" style="margin-top:14px">Paying as ${escapeHtml(session.customerEmail)}</div>`
    : `<label for="email">E-mail</label><input id="email" name="email" type="email" autocomplete="email" required maxlength="255">`;
  return layout(
    `Pay ${session.product.name}`,
    `${summary(session)}
${error ? `<div class="error" role="alert" data-testid="error">${escapeHtml(error)}</div>` : ''}
<form method="post" action="/checkout/${escapeHtml(session.pageToken)}/pay" autocomplete="on">
${emailField}
<label for="card">Card number</label><input id="card" name="cardNumber" inputmode="numeric" autocomplete="cc-number" placeholder="4242 4242 4242 4242" required maxlength="23">
<div class="row"><div><label for="exp">Expiry (MM/YY)</label><input id="exp" name="expiry" autocomplete="cc-exp" placeholder="12/30" required maxlength="7"></div>
<div><label for="cvc">CVC</label><input id="cvc" name="cvc" inputmode="numeric" autocomplete="cc-csc" placeholder="123" required maxlength="4"></div></div>
<button type="submit">Pay ${escapeHtml(formatMoney(session.amount, session.currency))}</button>
</form>
${session.cancelUrl ? `<p class="note"><a href="${escapeHtml(session.cancelUrl)}">Cancel and return to the merchant</a></p>` : ''}
<p class="note">Sandbox: pay with <code>4242 4242 4242 4242</code>, any future expiry and any CVC. <code>4000 0000 0000 0002</code> is declined; <code>4000 0000 0000 0077</code> settles a few seconds later.</p>`,
  );
}

function statusPage(
  session: CheckoutSession,
  order: Order | undefined,
  subscription?: Subscription,
  options: { processing?: boolean } = {},
): { status: number; html: string } {
  const back = session.successUrl ? `<p class="note"><a href="${escapeHtml(session.successUrl)}">Return to the merchant</a></p>` : '';
  const manage = subscription ? `<p class="note"><a data-testid="manage" href="/subscriptions/manage/${escapeHtml(subscription.manageToken)}">Manage your subscription</a></p>` : '';
  if (order?.status === 'PAID' || order?.status === 'REFUNDED') {
    return { status: 200, html: layout('Payment received', `${summary(session)}<div class="ok" data-testid="status">Payment received. Thank you!</div>${manage}${back}`) };
  }
  // PENDING, or (`processing`) a payment the processor accepted a moment ago whose order is still
  // being written by a concurrent request (a double click): both are "processing", never "expired".
  if (order?.status === 'PENDING' || options.processing) {
    return {
      status: 200,
      html: layout('Processing payment', `${summary(session)}<div class="ok" data-testid="status">Your payment is processing. This page refreshes by itself.</div>`, { refreshSeconds: 2, refreshUrl: `/checkout/${session.pageToken}/complete` }),
    };
  }
  if (order?.status === 'FAILED' || session.status === 'FAILED') {
    return { status: 200, html: layout('Payment failed', `${summary(session)}<div class="error" data-testid="status">The payment failed. Please contact the merchant.</div>`) };
  }
  return { status: 410, html: layout('Checkout closed', `${summary(session)}<div class="error" data-testid="status">This checkout has expired and can no longer be paid.</div>`) };
}

const DATE = new Intl.DateTimeFormat('en-GB', { dateStyle: 'long', timeZone: 'UTC' });

function managePage(s: Subscription, notice?: string): string {
  const price = `${formatMoney(s.amountCents, s.currency)} every ${s.billingIntervalCount > 1 ? `${s.billingIntervalCount} ` : ''}${s.billingInterval.toLowerCase()}${s.billingIntervalCount > 1 ? 's' : ''}`;
  let state: string;
  if (s.status === 'ACTIVE' && s.cancelAtPeriodEnd) state = `Canceled: access ends on ${DATE.format(s.currentPeriodEnd)}.`;
  else if (s.status === 'ACTIVE') state = `Active: renews on ${DATE.format(s.currentPeriodEnd)}.`;
  else if (s.status === 'PAUSED') state = 'Paused.';
  else state = `${s.status.charAt(0)}${s.status.slice(1).toLowerCase()}${s.endedAt ? ` on ${DATE.format(s.endedAt)}` : ''}.`;
  const cancel =
    s.status === 'ACTIVE' && !s.cancelAtPeriodEnd
      ? `<form method="post" action="/subscriptions/manage/${escapeHtml(s.manageToken)}/cancel"><button type="submit">Cancel at the end of the period</button></form>`
      : '';
  return layout(
    `Manage ${s.productName}`,
    `<h1>${escapeHtml(s.productName)}</h1><div class="muted">${escapeHtml(price)}</div>
${notice ? `<div class="ok">${escapeHtml(notice)}</div>` : ''}
<div class="total"><span>Status</span><strong data-testid="subscription-status" style="font-size:1rem">${escapeHtml(state)}</strong></div>${cancel}`,
  );
}

function messagePage(status: number, title: string, message: string): { status: number; html: string } {
  return { status, html: layout(title, `<h1>${escapeHtml(title)}</h1><div class="error" data-testid="status">${escapeHtml(message)}</div>`) };
}

const waitText = (seconds: number) => (seconds > 90 ? `about ${Math.ceil(seconds / 60)} minutes` : `${seconds} seconds`);

/**
 * A 429 (too many requests from this client) or 503 (no exact amount free, database unreachable)
 * as a page a buyer understands, keeping the status and Retry-After; undefined for other errors.
 */
export function retryLaterPage(err: unknown): { status: number; html: string; retryAfter: string } | undefined {
  const { error } = toAppError(err);
  if (statusOf(error) !== 429 && statusOf(error) !== 503) return undefined;
  const retryAfter = error.options.headers?.['Retry-After'] ?? '30';
  const wait = waitText(Number(retryAfter));
  if (statusOf(error) === 429) {
    return { status: 429, retryAfter, html: layout('Too many requests', `<h1>Too many requests</h1><div class="error" data-testid="status">Too many requests came from your network. Please try again in ${escapeHtml(wait)}.</div>`) };
  }
  const title = Number(retryAfter) > 300 ? 'Try again later' : 'Try again shortly';
  return { status: 503, retryAfter, html: layout(title, `<h1>${title}</h1><div class="error" data-testid="status">This checkout is busy right now. Please try again in ${escapeHtml(wait)}.</div>`) };
}

function parseExpiry(text: string): { expMonth: number; expYear: number } | undefined {
  const match = /^\s*(\d{1,2})\s*\/\s*(\d{2}|\d{4})\s*$/.exec(text);
  if (!match) return undefined;
  const year = Number(match[2]);
  return { expMonth: Number(match[1]), expYear: year < 100 ? 2000 + year : year };
}

export function registerHostedPages(router: Router, sessions: CheckoutSessionService, subscriptions: SubscriptionService, logger: Logger): void {
  const send = (res: Response, page: { status: number; html: string }) => {
    res.status(page.status).set({ 'Content-Security-Policy': HOSTED_PAGE_CSP, 'X-Frame-Options': 'DENY', 'Referrer-Policy': 'no-referrer', 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' }).type('html').send(page.html);
  };
  const fail = (req: Request, res: Response, err: unknown) => {
    const retry = retryLaterPage(err);
    if (retry) {
      (req.log ?? logger).warn({ err }, 'hosted page unavailable');
      return send(res.set('Retry-After', retry.retryAfter), retry);
    }
    if (err instanceof AppError && statusOf(err) < 500) return send(res, messagePage(statusOf(err) === 404 ? 404 : 400, statusOf(err) === 404 ? 'Not found' : 'Cannot open this checkout', err.message));
    (req.log ?? logger).error({ err }, 'hosted page failed');
    send(res, messagePage(500, 'Something went wrong', 'Please try again in a moment.'));
  };

  router.get('/checkout/:token', async (req, res) => {
    try {
      const session = await sessions.findByPageToken(req.params.token);
      if (!session) return send(res, messagePage(404, 'Not found', 'This checkout does not exist.'));
      if (sessions.isPayable(session)) return send(res, { status: 200, html: checkoutPage(session, session.lastError ? 'Your last payment attempt was declined. Try another card.' : undefined) });
      send(res, statusPage(session, await sessions.orderOf(session)));
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.get('/checkout/:token/complete', async (req, res) => {
    try {
      const session = await sessions.findByPageToken(req.params.token);
      if (!session) return send(res, messagePage(404, 'Not found', 'This checkout does not exist.'));
      send(res, statusPage(session, await sessions.orderOf(session), await subscriptions.findBySession(session.id)));
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/checkout/:token/pay', hostedForm({ limit: '8kb', parameterLimit: 10 }), async (req, res) => {
    try {
      const form = (req.body ?? {}) as Record<string, string | undefined>;
      const expiry = parseExpiry(form.expiry ?? '');
      const current = await sessions.findByPageToken(req.params.token);
      if (!current) return send(res, messagePage(404, 'Not found', 'This checkout does not exist.'));
      if (!expiry) return send(res, { status: 400, html: checkoutPage(current, 'Enter the card expiry as MM/YY.') });
      const attempt: PaymentAttempt = await sessions.pay(req.params.token, {
        email: form.email,
        card: { number: form.cardNumber ?? '', cvc: (form.cvc ?? '').trim(), ...expiry },
      });
      switch (attempt.kind) {
        case 'declined':
          return send(res, { status: 402, html: checkoutPage(attempt.session, attempt.message) });
        case 'not_payable':
          return send(res, statusPage(attempt.session, await sessions.orderOf(attempt.session)));
        case 'processing':
          return send(res, statusPage(attempt.session, await sessions.orderOf(attempt.session), undefined, { processing: true }));
        case 'paid':
          // The browser return is a convenience: merchants confirm payment through the API or webhooks.
          return res.redirect(303, attempt.session.successUrl ?? `/checkout/${req.params.token}/complete`);
        case 'pending':
          return res.redirect(303, `/checkout/${req.params.token}/complete`);
      }
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.get('/subscriptions/manage/:token', async (req, res) => {
    try {
      const subscription = await subscriptions.findByManageToken(req.params.token);
      if (!subscription) return send(res, messagePage(404, 'Not found', 'This subscription does not exist.'));
      send(res, { status: 200, html: managePage(subscription) });
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/subscriptions/manage/:token/cancel', async (req, res) => {
    try {
      const subscription = await subscriptions.cancelByManageToken(req.params.token);
      send(res, { status: 200, html: managePage(subscription, 'Your subscription will end at the end of the paid period.') });
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.get('/pay/:linkToken', async (req, res) => {
    try {
      const session = await sessions.startFromPaymentLink(req.params.linkToken, req.query as Record<string, unknown>);
      res.redirect(303, `/checkout/${session.pageToken}`);
    } catch (err) {
      fail(req, res, err);
    }
  });
}
