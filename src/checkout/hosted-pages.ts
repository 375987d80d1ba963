/**
 * The buyer-facing pages on {base_url}: the hosted checkout page at a session's `url`, its Pay
 * form, the "processing / paid" page, and the entry point of payment links. Plain server-rendered
 * HTML with one stylesheet inline and no script, no external asset: it works on any phone and
 * under a strict Content-Security-Policy.
 */
import type { Response, Router } from 'express';
import { formatMoney } from '../kernel/money.js';
import type { Logger } from '../kernel/logger.js';
import type { CheckoutSession, Order, Subscription } from '../commerce/model.js';
import { hostedForm } from '../pages/form.js';
import { FixedWindowRateLimiter, clientAddressKey } from '../http/rate-limit.js';
import type { Clock } from '../kernel/clock.js';
import { escapeHtml, layout, merchantName, notFoundPage, pageFailure, retryLaterPage, sendPage, type MerchantNames, type PageMerchant, pageMerchantOf } from '../pages/page.js';
import { receipt, summary, trialDaysOf } from '../pages/checkout-summary.js';
import type { CheckoutSessionService, PaymentAttempt } from './checkout-session.service.js';

/**
 * "Add a promotion code" (issue 39): its own small form above the payment form (forms cannot nest),
 * posted to /checkout/<token>/promotion-code; with a code applied, a "Remove" button instead. A
 * refused code is named in a message tied to the field (aria-describedby, role=alert). Its buttons
 * are `<input type=submit>`, so the page's one `<button>` stays the payment's.
 */
function promotionCodeForm(session: CheckoutSession, codeMessage?: { text: string; ok: boolean }): string {
  const action = `/checkout/${escapeHtml(session.pageToken)}/promotion-code`;
  const message = codeMessage
    ? `<div id="promotion-code-message" class="${codeMessage.ok ? 'ok' : 'error'}" role="${codeMessage.ok ? 'status' : 'alert'}" data-testid="promotion-code-message">${escapeHtml(codeMessage.text)}</div>`
    : '';
  const discount = session.pricing.discount;
  if (discount) {
    return `<form method="post" action="${action}" class="promotion-code">${message}
<input type="hidden" name="remove" value="1"><input type="submit" class="secondary" data-testid="remove-promotion-code" value="Remove ${escapeHtml(discount.code ?? discount.name)}"></form>`;
  }
  const invalid = codeMessage && !codeMessage.ok ? ' aria-invalid="true" aria-describedby="promotion-code-message"' : '';
  return `<form method="post" action="${action}" class="promotion-code">
<label for="promotion-code">Add a promotion code</label>
<div class="row"><div><input id="promotion-code" name="code" autocomplete="off" autocapitalize="characters" spellcheck="false" maxlength="40" required${invalid}></div>
<div><input type="submit" class="secondary" data-testid="apply-promotion-code" value="Apply"></div></div>${message}</form>`;
}

function checkoutPage(session: CheckoutSession, merchant: PageMerchant | undefined, error?: string, options: { promotionCodes?: boolean; codeMessage?: { text: string; ok: boolean } } = {}): string {
  const emailField = session.customerEmail
    ? `<div class="muted" style="margin-top:14px">Paying as ${escapeHtml(session.customerEmail)}</div>`
    : `<label for="email">E-mail</label><input id="email" name="email" type="email" autocomplete="email" required maxlength="255">`;
  // A trial that may start without a card (IF_REQUIRED): the card fields are optional.
  const optionalCard = trialDaysOf(session) > 0 && session.pricing.trialPaymentMethodCollection === 'IF_REQUIRED';
  const required = optionalCard ? ' aria-describedby="card-optional"' : ' required';
  return layout(
    `Pay ${session.product.name}`,
    `${summary(session)}
${options.promotionCodes ? promotionCodeForm(session, options.codeMessage) : ''}
${error ? `<div class="error" role="alert" data-testid="error">${escapeHtml(error)}</div>` : ''}
<form method="post" action="/checkout/${escapeHtml(session.pageToken)}/pay" autocomplete="on">
${emailField}
${optionalCard ? '<p class="muted" id="card-optional" data-testid="card-optional">A card is optional: without one the trial ends without a charge.</p>' : ''}
<label for="card">Card number</label><input id="card" name="cardNumber" inputmode="numeric" autocomplete="cc-number" placeholder="4242 4242 4242 4242"${required} maxlength="23">
<div class="row"><div><label for="exp">Expiry (MM/YY)</label><input id="exp" name="expiry" autocomplete="cc-exp" placeholder="12/30"${required} maxlength="7"></div>
<div><label for="cvc">CVC</label><input id="cvc" name="cvc" inputmode="numeric" autocomplete="cc-csc" placeholder="123"${required} maxlength="4"></div></div>
<button type="submit">${trialDaysOf(session) > 0 ? 'Start free trial' : `Pay ${escapeHtml(formatMoney(session.amount, session.currency))}`}</button>
</form>
${session.cancelUrl ? `<p class="note"><a href="${escapeHtml(session.cancelUrl)}">Cancel and return to ${escapeHtml(merchantName(merchant) ?? 'the merchant')}</a></p>` : ''}
<p class="note">Sandbox: pay with <code>4242 4242 4242 4242</code>, any future expiry and any CVC. <code>4000 0000 0000 0002</code> is declined; <code>4000 0000 0000 0077</code> settles a few seconds later.</p>`,
    { merchant },
  );
}

/**
 * The page after paying (and of a session that can no longer be paid). A paid card payment with a
 * `successUrl` is redirected there at once; this page is what the buyer sees without one, after an
 * asynchronous payment settles, or on opening the checkout link again: the same receipt each time.
 */
function statusPage(
  session: CheckoutSession,
  merchant: PageMerchant | undefined,
  order: Order | undefined,
  subscription?: Pick<Subscription, 'manageToken'>,
  options: { processing?: boolean; portalOpen?: boolean } = {},
): { status: number; html: string } {
  const manage = subscription ? `<p class="note"><a data-testid="manage" href="/subscriptions/manage/${escapeHtml(subscription.manageToken)}">Manage your subscription</a></p>` : '';
  // A form, not a link: the portal session starts on this page's POST, never from a URL that could travel.
  const portal = options.portalOpen
    ? `<form method="post" action="/checkout/${escapeHtml(session.pageToken)}/portal"><button type="submit" class="secondary" data-testid="open-portal">Your orders and receipts</button></form>`
    : '';
  if (order?.status === 'PAID' || order?.status === 'REFUNDED') {
    return {
      status: 200,
      html: layout('Payment received', `${summary(session)}<div class="ok" data-testid="status">Payment received. Thank you!</div>${receipt(session, order, merchantName(merchant) ?? 'the merchant')}${manage}${portal}`, { merchant }),
    };
  }
  // PENDING, or (`processing`) a payment the processor accepted a moment ago whose order is still
  // being written by a concurrent request (a double click): both are "processing", never "expired".
  if (order?.status === 'PENDING' || options.processing) {
    return {
      status: 200,
      html: layout('Processing payment', `${summary(session)}<div class="ok" data-testid="status">Your payment is processing. This page refreshes by itself.</div>`, { refreshSeconds: 2, refreshUrl: `/checkout/${session.pageToken}/complete`, merchant }),
    };
  }
  if (order?.status === 'FAILED' || session.status === 'FAILED') {
    return { status: 200, html: layout('Payment failed', `${summary(session)}<div class="error" data-testid="status">The payment failed. Please contact the merchant.</div>`, { merchant }) };
  }
  return { status: 410, html: layout('Checkout closed', `${summary(session)}<div class="error" data-testid="status">This checkout has expired and can no longer be paid.</div>`, { merchant }) };
}

function parseExpiry(text: string): { expMonth: number; expYear: number } | undefined {
  const match = /^\s*(\d{1,2})\s*\/\s*(\d{2}|\d{4})\s*$/.exec(text);
  if (!match) return undefined;
  const year = Number(match[2]);
  return { expMonth: Number(match[1]), expYear: year < 100 ? 2000 + year : year };
}

/** The customer portal, opened from the paid page for a while after paying (src/portal). */
export interface CheckoutPortalEntry {
  isOpen(order: Pick<Order, 'status' | 'createdAt'> | undefined): boolean;
  /** Starts a portal session for the buyer (sets its cookie on `res`); false when no longer offered. */
  enter(res: Response, session: CheckoutSession, order: Order | undefined): Promise<boolean>;
}

/** The subscription a paid checkout started (its manage link on the paid page). */
export interface SubscriptionOfSession {
  findBySession(checkoutSessionId: string): Promise<Pick<Subscription, 'manageToken'> | undefined>;
}

/** Promotion-code attempts (issue 39): per checkout and per client address, so codes cannot be guessed by brute force. */
export const PROMOTION_CODE_LIMITS = { perSession: 10, perAddress: 30, windowMs: 15 * 60_000 };

export function registerHostedPages(router: Router, sessions: CheckoutSessionService, subscriptions: SubscriptionOfSession, merchants: MerchantNames, logger: Logger, portal?: CheckoutPortalEntry, clock?: Clock): void {
  const fail = pageFailure(logger);
  const codeClock = clock ?? { now: () => new Date() };
  const codesPerSession = new FixedWindowRateLimiter(PROMOTION_CODE_LIMITS.perSession, PROMOTION_CODE_LIMITS.windowMs, codeClock, 'promotion codes on this checkout');
  const codesPerAddress = new FixedWindowRateLimiter(PROMOTION_CODE_LIMITS.perAddress, PROMOTION_CODE_LIMITS.windowMs, codeClock, 'promotion codes from your network address');
  const page = (session: CheckoutSession, merchant: PageMerchant | undefined, error?: string, codeMessage?: { text: string; ok: boolean }) =>
    checkoutPage(session, merchant, error, { promotionCodes: sessions.acceptsPromotionCodes(session), codeMessage });

  router.get('/checkout/:token', async (req, res) => {
    try {
      const session = await sessions.findByPageToken(req.params.token);
      if (!session) return sendPage(res, notFoundPage('This checkout does not exist.'));
      const merchant = await pageMerchantOf(merchants, session.orgId);
      // The card processor's own page takes the card (Stripe Checkout): Kassa never sees it.
      if (sessions.isPayable(session) && session.processorUrl) return res.redirect(303, session.processorUrl);
      if (sessions.isPayable(session)) return sendPage(res, { status: 200, html: page(session, merchant, session.lastError ? 'Your last payment attempt was declined. Try another card.' : undefined) });
      const order = await sessions.orderOf(session);
      sendPage(res, statusPage(session, merchant, order, await subscriptions.findBySession(session.id), { portalOpen: portal?.isOpen(order) }));
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.get('/checkout/:token/complete', async (req, res) => {
    try {
      const session = await sessions.findByPageToken(req.params.token);
      if (!session) return sendPage(res, notFoundPage('This checkout does not exist.'));
      // Back from the processor's page before its event arrived: processing, not "expired".
      const awaitingEvent = sessions.isPayable(session) && session.processorUrl !== null;
      const order = await sessions.orderOf(session);
      sendPage(res, statusPage(session, await pageMerchantOf(merchants, session.orgId), order, await subscriptions.findBySession(session.id), { processing: awaitingEvent, portalOpen: portal?.isOpen(order) }));
    } catch (err) {
      fail(req, res, err);
    }
  });

  // The processor's page sends the buyer here when they leave it without paying.
  router.get('/checkout/:token/canceled', async (req, res) => {
    try {
      const session = await sessions.findByPageToken(req.params.token);
      if (!session) return sendPage(res, notFoundPage('This checkout does not exist.'));
      const merchant = await pageMerchantOf(merchants, session.orgId);
      if (!sessions.isPayable(session)) return sendPage(res, statusPage(session, merchant, await sessions.orderOf(session)));
      const back = session.cancelUrl ? `<p class="note"><a href="${escapeHtml(session.cancelUrl)}">Return to ${escapeHtml(merchantName(merchant) ?? 'the merchant')}</a></p>` : '';
      sendPage(res, {
        status: 200,
        html: layout('Payment not completed', `${summary(session)}<div class="muted" data-testid="status">You left the payment page without paying.</div><p class="note"><a data-testid="resume" href="/checkout/${escapeHtml(session.pageToken)}">Return to payment</a></p>${back}`, { merchant }),
      });
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/checkout/:token/pay', hostedForm({ limit: '8kb', parameterLimit: 10 }), async (req, res) => {
    try {
      const form = (req.body ?? {}) as Record<string, string | undefined>;
      const expiry = parseExpiry(form.expiry ?? '');
      const current = await sessions.findByPageToken(req.params.token);
      if (!current) return sendPage(res, notFoundPage('This checkout does not exist.'));
      const merchant = await pageMerchantOf(merchants, current.orgId);
      // No card at all: a trial that may start without one (the service refuses it otherwise).
      const noCard = trialDaysOf(current) > 0 && current.pricing.trialPaymentMethodCollection === 'IF_REQUIRED' && !form.cardNumber?.trim() && !form.expiry?.trim() && !form.cvc?.trim();
      if (!expiry && !noCard) return sendPage(res, { status: 400, html: page(current, merchant, 'Enter the card expiry as MM/YY.') });
      const attempt: PaymentAttempt = await sessions.pay(req.params.token, {
        email: form.email,
        ...(expiry && !noCard ? { card: { number: form.cardNumber ?? '', cvc: (form.cvc ?? '').trim(), ...expiry } } : {}),
      });
      switch (attempt.kind) {
        case 'declined':
          return sendPage(res, { status: 402, html: page(attempt.session, merchant, attempt.message) });
        case 'not_payable':
          return sendPage(res, statusPage(attempt.session, merchant, await sessions.orderOf(attempt.session)));
        case 'processing':
          return sendPage(res, statusPage(attempt.session, merchant, await sessions.orderOf(attempt.session), undefined, { processing: true }));
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

  router.post('/checkout/:token/promotion-code', hostedForm({ limit: '1kb', parameterLimit: 3 }), async (req, res) => {
    try {
      const form = (req.body ?? {}) as Record<string, string | undefined>;
      const current = await sessions.findByPageToken(req.params.token);
      if (!current) return sendPage(res, notFoundPage('This checkout does not exist.'));
      const merchant = await pageMerchantOf(merchants, current.orgId);
      if (!sessions.isPayable(current)) return sendPage(res, statusPage(current, merchant, await sessions.orderOf(current)));
      const remove = form.remove === '1';
      if (!remove) {
        try {
          codesPerSession.hit(current.id);
          codesPerAddress.hit(clientAddressKey(req.ip));
        } catch (err) {
          const limited = retryLaterPage(err);
          if (!limited) throw err;
          return sendPage(res, { status: 429, html: page(current, merchant, undefined, { text: 'Too many promotion code attempts. Wait a few minutes, then try again.', ok: false }) });
        }
      }
      const result = await sessions.setPromotionCode(req.params.token, remove ? null : (form.code ?? ''));
      if (result.message) return sendPage(res, { status: 400, html: page(result.session, merchant, undefined, { text: result.message, ok: false }) });
      const applied = result.session.pricing.discount;
      sendPage(res, { status: 200, html: page(result.session, merchant, undefined, { text: applied ? `${applied.code ?? applied.name} applied.` : 'Promotion code removed.', ok: true }) });
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/checkout/:token/portal', hostedForm({ limit: '1kb', parameterLimit: 2 }), async (req, res) => {
    try {
      const session = await sessions.findByPageToken(req.params.token);
      if (!session) return sendPage(res, notFoundPage('This checkout does not exist.'));
      const order = await sessions.orderOf(session);
      if (portal && (await portal.enter(res, session, order))) return res.redirect(303, '/portal');
      // Past the window (or never paid): the receipt page again, without the button.
      res.redirect(303, `/checkout/${req.params.token}/complete`);
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.get('/pay/:linkToken', async (req, res) => {
    try {
      const session = await sessions.startFromPaymentLink(req.params.linkToken, req.query as Record<string, unknown>);
      res.redirect(303, `/checkout/${session.pageToken}`);
    } catch (err) {
      // A refused link (inactive, bad query, merchant frozen) still says whose link it is.
      const orgId = await sessions.paymentLinkOrgId(req.params.linkToken).catch(() => undefined);
      fail(req, res, err, orgId ? await pageMerchantOf(merchants, orgId).catch(() => undefined) : undefined);
    }
  });
}
