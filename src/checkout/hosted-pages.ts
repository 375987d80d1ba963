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
import { escapeHtml, layout, merchantName, notFoundPage, pageFailure, retryLaterPage, sendPage, type MerchantNames, type PageMerchant, type PageRail, pageMerchantOf } from '../pages/page.js';
import { firstChargeText, receipt, summary, trialDaysOf } from '../pages/checkout-summary.js';
import { longDateUtc } from '../kernel/time-zone.js';
import type { CheckoutSessionService, PaymentAttempt } from './checkout-session.service.js';
import { AppError } from '../kernel/errors.js';
import { countryName, countryOptions } from '../tax/tax-location.js';

/**
 * "Add a promotion code" (issue 39): its own small form above the payment form (forms cannot nest),
 * posted to /checkout/<token>/promotion-code; with a code applied, a "Remove" button instead. A
 * refused code is named in a message tied to the field (aria-describedby, role=alert). Its buttons
 * are `<input type=submit>`, so the page's one `<button>` stays the payment's.
 */
/** What the code form says after an attempt; `typed`: the refused code, kept in the field to correct. */
type CodeMessage = { text: string; ok: boolean; typed?: string };

function promotionCodeForm(session: CheckoutSession, codeMessage?: CodeMessage): string {
  const action = `/checkout/${escapeHtml(session.pageToken)}/promotion-code`;
  const message = codeMessage
    ? `<div id="promotion-code-message" class="${codeMessage.ok ? 'ok' : 'error'}" role="${codeMessage.ok ? 'status' : 'alert'}" data-testid="promotion-code-message">${escapeHtml(codeMessage.text)}</div>`
    : '';
  const discount = session.pricing.discount;
  if (discount) {
    return `<form method="post" action="${action}" class="promotion-code">${message}
<input type="hidden" name="remove" value="1"><input type="submit" class="secondary" data-testid="remove-promotion-code" value="Remove ${escapeHtml(discount.code ?? discount.name)}"></form>`;
  }
  // A refused code stays in the field, focused, so the buyer corrects a typo without typing it
  // all again (before: an empty field and the focus on the page's top, for keyboard users too).
  const invalid =
    codeMessage && !codeMessage.ok
      ? ` aria-invalid="true" aria-describedby="promotion-code-message" autofocus${codeMessage.typed ? ` value="${escapeHtml(codeMessage.typed.slice(0, 40))}"` : ''}`
      : '';
  return `<form method="post" action="${action}" class="promotion-code">
<label for="promotion-code">Add a promotion code</label>
<div class="row"><div><input id="promotion-code" name="code" autocomplete="off" autocapitalize="characters" spellcheck="false" maxlength="40" required${invalid}></div>
<div><input type="submit" class="secondary" data-testid="apply-promotion-code" value="Apply"></div></div>${message}</form>`;
}

/**
 * What the hosted page asks about tax: nothing, or the buyer's location (required before paying,
 * or changeable), or — on the Stripe rail — the location step before Stripe's page (`handoff`).
 */
type TaxAsk = 'none' | 'required' | 'changeable' | 'handoff';

/** The buyer's country, region and tax id (issue 39): a form of its own, posted before the payment. */
function taxLocationForm(session: CheckoutSession, ask: TaxAsk, values?: { country?: string; region?: string; taxId?: string }, invalid?: { field: 'country' | 'region' | 'taxId'; messageId: string }, errorHtml = ''): string {
  if (ask === 'none') return '';
  // The field a refusal names is marked invalid and described by the message too.
  const mark = (field: 'country' | 'region' | 'taxId', describedBy: string | undefined) => {
    const ids = [describedBy, invalid?.field === field ? invalid.messageId : undefined].filter(Boolean).join(' ');
    return `${invalid?.field === field ? ' aria-invalid="true"' : ''}${ids ? ` aria-describedby="${ids}"` : ''}`;
  };
  const current = { country: values?.country ?? session.tax?.location.country ?? '', region: values?.region ?? session.tax?.location.region ?? '', taxId: values?.taxId ?? session.tax?.location.taxId ?? '' };
  const options = countryOptions()
    .map((c) => `<option value="${c.code}"${c.code === current.country ? ' selected' : ''}>${escapeHtml(c.name)}</option>`)
    .join('');
  const where = session.tax ? `<p class="muted" data-testid="tax-location">Tax for ${escapeHtml(countryName(session.tax.location.country))}${session.tax.location.region ? ` (${escapeHtml(session.tax.location.region)})` : ''}${session.tax.reverseCharge ? ': reverse charge, no VAT charged' : ''}.</p>` : '';
  const why = ask === 'handoff'
    ? `<p class="muted" id="tax-why">Tax depends on your country. You pay on the card payment page next, which charges the total shown here for the country you choose.</p>${where}`
    : ask === 'required' ? '<p class="muted" id="tax-why">Tax depends on your country; the total is shown before you pay.</p>' : where;
  const described = ask === 'required' || ask === 'handoff';
  const button = ask === 'handoff' ? 'Continue to payment' : ask === 'required' ? 'Continue' : 'Update total';
  return `<form method="post" action="/checkout/${escapeHtml(session.pageToken)}/tax" data-testid="tax-form" aria-labelledby="tax-heading">
<h2 id="tax-heading">${ask === 'changeable' ? 'Billing country' : 'Where are you buying from?'}</h2>
${why}${errorHtml}
<label for="country">Country</label><select id="country" name="country" autocomplete="country" required${mark('country', described ? 'tax-why' : undefined)}><option value="">Choose your country</option>${options}</select>
<label for="region">State or region (optional)</label><input id="region" name="region" autocomplete="address-level1" maxlength="6" placeholder="e.g. CA" value="${escapeHtml(current.region)}"${mark('region', 'region-help')}><p class="muted" id="region-help">The code of your state or province, if tax depends on it.</p>
<label for="taxId">VAT or tax id (optional)</label><input id="taxId" name="taxId" maxlength="40" autocomplete="off" value="${escapeHtml(current.taxId)}"${mark('taxId', 'taxid-help')}><p class="muted" id="taxid-help">Businesses in the EU: your VAT number, e.g. DE136695976.</p>
<button type="submit"${ask === 'changeable' ? ' class="secondary"' : ''} data-testid="tax-submit">${button}</button>
</form>`;
}

/**
 * The location step of a Stripe-rail session (docs/tax.md): the summary (the amount before tax
 * until a country is chosen; with the TAX lines of the country chosen last, when the buyer comes
 * back), "Add a promotion code" (issue 39, docs/discounts.md: the sandbox page's form, redeemed
 * when Stripe's page opens), the country form, the way back to the merchant. No card field: the
 * card is taken on Stripe's page.
 */
function locationStepPage(session: CheckoutSession, merchant: PageMerchant | undefined, error?: string, values?: CheckoutPageOptions['values'], field?: 'country' | 'region' | 'taxId', options: { promotionCodes?: boolean; codeMessage?: CodeMessage } = {}): string {
  return layout(
    `Pay ${session.product.name}`,
    `${summary(session, { beforeTax: !session.tax })}
${options.promotionCodes ? promotionCodeForm(session, options.codeMessage) : ''}
${taxLocationForm(session, 'handoff', values, error && field ? { field, messageId: 'step-error' } : undefined, error ? `<div class="error" role="alert" id="step-error" data-testid="error">${escapeHtml(error)}</div>` : '')}
${session.cancelUrl ? `<p class="note"><a href="${escapeHtml(session.cancelUrl)}">Cancel and return to ${escapeHtml(merchantName(merchant) ?? 'the merchant')}</a></p>` : ''}`,
    { merchant, rail: 'stripe' },
  );
}

/** The form field a refused location names (the API's message names the request field). */
function taxErrorField(err: AppError): 'country' | 'region' | 'taxId' | undefined {
  if (err.message.includes('.country')) return 'country';
  if (err.message.includes('.region')) return 'region';
  if (err.message.includes('.taxId')) return 'taxId';
  return undefined;
}

/** A bad location as the buyer reads it (the API's message names the request field). */
function humanTaxError(err: AppError): string {
  if (err.message.includes('.country')) return 'Choose your country from the list.';
  if (err.message.includes('.region')) return 'Enter your state or region as its short code (for example CA for California), or leave it empty.';
  if (err.message.includes('.taxId')) return 'This VAT or tax id does not look right for the country you chose. Check it (with its country prefix, e.g. DE136695976), or leave it empty.';
  return 'Check your country, region and tax id.';
}

/**
 * A refusal of the Stripe rail's location step, as its redirect names it (`?step_error=`): the
 * step answers a refused POST with a 303 to its own page, which shows the message (no POST result
 * in the browser's history, so its back button never asks to resubmit a form).
 */
const STEP_ERRORS = {
  country: { status: 400, text: 'Choose your country from the list.' },
  region: { status: 400, text: 'Enter your state or region as its short code (for example CA for California), or leave it empty.' },
  taxId: { status: 400, text: 'This VAT or tax id does not look right for the country you chose. Check it (with its country prefix, e.g. DE136695976), or leave it empty.' },
  location: { status: 400, text: 'Check your country, region and tax id.' },
  processor: { status: 400, text: 'The card payment page could not be opened for this checkout. Contact the merchant.' },
  changed: { status: 409, text: 'This checkout changed meanwhile (in another tab?). Check the country and total, then continue again.' },
} as const;
type StepError = keyof typeof STEP_ERRORS;

/**
 * The step's page showing a refusal: the kind and, to fill the form again, the country and region
 * typed when they are well-formed (never the tax id: a buyer's id stays out of URLs and logs; a
 * refused one is typed again).
 */
function stepErrorUrl(token: string, kind: StepError, values: { country?: string; region?: string }): string {
  const query = new URLSearchParams({ step_error: kind });
  if (values.country && /^[A-Za-z]{2}$/.test(values.country)) query.set('country', values.country.toUpperCase());
  if (values.region && /^[A-Za-z0-9-]{1,6}$/.test(values.region)) query.set('region', values.region);
  return `/checkout/${token}?${query.toString()}`;
}

/** What the payment page shows besides the payment: the promotion-code form (issue 39) and the tax step (issue 39). */
interface CheckoutPageOptions {
  /** The rail named in the footer (Kassa's own card page: the sandbox). */
  rail?: PageRail;
  promotionCodes?: boolean;
  codeMessage?: CodeMessage;
  ask?: TaxAsk;
  values?: { country?: string; region?: string; taxId?: string };
  /** The customer's credit balance this checkout draws (issue 39): shown as "Applied balance", the card pays the rest. */
  appliedBalance?: number;
}

function checkoutPage(session: CheckoutSession, merchant: PageMerchant | undefined, error?: string, options: CheckoutPageOptions = {}): string {
  const ask = options.ask ?? 'none';
  const values = options.values;
  // The billing country decides the tax, so it is read (and tabbed to) before the pay button: on
  // the first visit it is the only form (`required`); once chosen, its "Update total" form stays
  // above the payment form (`changeable`; it was below the pay button). A promotion code may be
  // added on either step (the DISCOUNT is taken before TAX, src/commerce/tax.ts), so its form is on both.
  if (ask === 'required') {
    return layout(
      `Pay ${session.product.name}`,
      `${summary(session, { beforeTax: true })}
${options.promotionCodes ? promotionCodeForm(session, options.codeMessage) : ''}
${error ? `<div class="error" role="alert" data-testid="error">${escapeHtml(error)}</div>` : ''}
${taxLocationForm(session, ask, values)}`,
      { merchant, rail: options.rail },
    );
  }
  const emailField = session.customerEmail
    ? `<div class="muted" style="margin-top:14px">Paying as ${escapeHtml(session.customerEmail)}</div>`
    : `<label for="email">E-mail</label><input id="email" name="email" type="email" autocomplete="email" required maxlength="255">`;
  // A trial that may start without a card (IF_REQUIRED): the card fields are optional.
  const optionalCard = trialDaysOf(session) > 0 && session.pricing.trialPaymentMethodCollection === 'IF_REQUIRED';
  const required = optionalCard ? ' aria-describedby="card-optional"' : ' required';
  const applied = options.appliedBalance ?? 0;
  const due = session.amount - applied;
  // Covered whole by the balance: the card is still asked, checked for 0 and saved for the renewals.
  const payLabel = trialDaysOf(session) > 0 ? 'Start free trial' : applied > 0 && due === 0 ? 'Subscribe' : `Pay ${escapeHtml(formatMoney(due, session.currency))}`;
  const coveredNote = applied > 0 && due === 0 ? '<p class="muted" id="card-saved" data-testid="card-saved">Your credit balance pays today’s amount. Your card is saved for the renewals; nothing is charged today.</p>' : '';
  return layout(
    `Pay ${session.product.name}`,
    `${summary(session, { appliedBalance: applied })}
${options.promotionCodes ? promotionCodeForm(session, options.codeMessage) : ''}
${taxLocationForm(session, ask, values)}
${error ? `<div class="error" role="alert" data-testid="error">${escapeHtml(error)}</div>` : ''}
<form method="post" action="/checkout/${escapeHtml(session.pageToken)}/pay" autocomplete="on">
<input type="hidden" name="amount" value="${session.amount}">
<input type="hidden" name="due" value="${due}">
${emailField}
${coveredNote}
${optionalCard ? '<p class="muted" id="card-optional" data-testid="card-optional">A card is optional: without one the trial ends without a charge.</p>' : ''}
<label for="card">Card number</label><input id="card" name="cardNumber" inputmode="numeric" autocomplete="cc-number" placeholder="4242 4242 4242 4242"${required} maxlength="23">
<div class="row"><div><label for="exp">Expiry (MM/YY)</label><input id="exp" name="expiry" autocomplete="cc-exp" placeholder="12/30"${required} maxlength="7"></div>
<div><label for="cvc">CVC</label><input id="cvc" name="cvc" inputmode="numeric" autocomplete="cc-csc" placeholder="123"${required} maxlength="4"></div></div>
<button type="submit">${payLabel}</button>
</form>
${session.cancelUrl ? `<p class="note"><a href="${escapeHtml(session.cancelUrl)}">Cancel and return to ${escapeHtml(merchantName(merchant) ?? 'the merchant')}</a></p>` : ''}
<p class="note">Sandbox: pay with <code>4242 4242 4242 4242</code>, any future expiry and any CVC. <code>4000 0000 0000 0002</code> is declined; <code>4000 0000 0000 0077</code> settles a few seconds later.</p>`,
    { merchant, rail: options.rail },
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
  subscription?: Pick<Subscription, 'manageToken' | 'trialEnd' | 'paymentMethod'>,
  options: { processing?: boolean; portalOpen?: boolean; rail?: PageRail } = {},
): { status: number; html: string } {
  const rail = options.rail;
  const manage = subscription ? `<p class="note"><a data-testid="manage" href="/subscriptions/manage/${escapeHtml(subscription.manageToken)}">Manage your subscription</a></p>` : '';
  // A form, not a link: the portal session starts on this page's POST, never from a URL that could travel.
  const portal = options.portalOpen
    ? `<form method="post" action="/checkout/${escapeHtml(session.pageToken)}/portal"><button type="submit" class="secondary" data-testid="open-portal">Your orders and receipts</button></form>`
    : '';
  // A free trial's start (issue 39): nothing was paid; the page says the trial started, when it
  // ends and what its first charge is (as the renewal prices it), or that it ends without a charge.
  if (order?.status === 'PAID' && order.amountCents === 0 && trialDaysOf(session) > 0) {
    const ends = subscription?.trialEnd ? longDateUtc(subscription.trialEnd) : undefined;
    const charge = subscription?.paymentMethod === 'none'
      ? `No card was given: the trial ends${ends ? ` on ${ends}` : ''} without a charge.`
      : `Your first charge${ends ? `, on ${ends},` : ''} is ${firstChargeText(session)}. Nothing was charged today.`;
    return {
      status: 200,
      html: layout('Trial started', `${summary(session)}<div class="ok" data-testid="status">Your free trial has started. ${escapeHtml(charge)}</div>${receipt(session, order, merchantName(merchant) ?? 'the merchant', { trial: true })}${manage}${portal}`, { merchant, rail }),
    };
  }
  if (order?.status === 'PAID' || order?.status === 'REFUNDED') {
    return {
      status: 200,
      html: layout('Payment received', `${summary(session, { appliedBalance: session.pricing.balance?.amountCents })}<div class="ok" data-testid="status">Payment received. Thank you!</div>${receipt(session, order, merchantName(merchant) ?? 'the merchant')}${manage}${portal}`, { merchant, rail }),
    };
  }
  // PENDING, or (`processing`) a payment the processor accepted a moment ago whose order is still
  // being written by a concurrent request (a double click): both are "processing", never "expired".
  if (order?.status === 'PENDING' || options.processing) {
    return {
      status: 200,
      html: layout('Processing payment', `${summary(session)}<div class="ok" data-testid="status">Your payment is processing. This page refreshes by itself.</div>`, { refreshSeconds: 2, refreshUrl: `/checkout/${session.pageToken}/complete`, merchant, rail }),
    };
  }
  if (order?.status === 'FAILED' || session.status === 'FAILED') {
    return { status: 200, html: layout('Payment failed', `${summary(session)}<div class="error" data-testid="status">The payment failed. Please contact the merchant.</div>`, { merchant, rail }) };
  }
  return { status: 410, html: layout('Checkout closed', `${summary(session)}<div class="error" data-testid="status">This checkout has expired and can no longer be paid.</div>`, { merchant, rail }) };
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
  findBySession(checkoutSessionId: string): Promise<Pick<Subscription, 'manageToken' | 'trialEnd' | 'paymentMethod'> | undefined>;
}

/** Promotion-code attempts (issue 39): per checkout and per client address, so codes cannot be guessed by brute force. */
export const PROMOTION_CODE_LIMITS = { perSession: 10, perAddress: 30, windowMs: 15 * 60_000 };

export function registerHostedPages(router: Router, sessions: CheckoutSessionService, subscriptions: SubscriptionOfSession, merchants: MerchantNames, logger: Logger, portal?: CheckoutPortalEntry, clock?: Clock): void {
  const fail = pageFailure(logger);
  const codeClock = clock ?? { now: () => new Date() };
  const codesPerSession = new FixedWindowRateLimiter(PROMOTION_CODE_LIMITS.perSession, PROMOTION_CODE_LIMITS.windowMs, codeClock, 'promotion codes on this checkout');
  const codesPerAddress = new FixedWindowRateLimiter(PROMOTION_CODE_LIMITS.perAddress, PROMOTION_CODE_LIMITS.windowMs, codeClock, 'promotion codes from your network address');
  /** Kassa's own card page asks the location when the organization has tax rates: first (required), then to change it. */
  const taxAsk = async (session: CheckoutSession): Promise<TaxAsk> => {
    if (await sessions.needsTaxLocation(session)) return 'required';
    // Once the payment has started the total is fixed: no form to change the country (as the promotion code's).
    return session.tax && sessions.takesTaxLocation(session) && !session.pricing.paymentStarted ? 'changeable' : 'none';
  };

  /**
   * The payment page with both the promotion-code form and the tax step, as the session stands;
   * on the Stripe rail's location step, the step with its promotion-code form.
   */
  const page = async (session: CheckoutSession, merchant: PageMerchant | undefined, error?: string, codeMessage?: CodeMessage, values?: CheckoutPageOptions['values']) =>
    sessions.takesLocationStep(session)
      ? locationStepPage(session, merchant, error, values, undefined, { promotionCodes: sessions.acceptsPromotionCodes(session), codeMessage })
      : checkoutPage(session, merchant, error, { rail: sessions.railOf(session), promotionCodes: sessions.acceptsPromotionCodes(session), codeMessage, ask: await taxAsk(session), values, appliedBalance: (await sessions.balanceQuote(session)).applied });

  // The buyer's location (issue 39): the session's tax and total, then the page again (POST-redirect-GET).
  router.post('/checkout/:token/tax', hostedForm({ limit: '2kb', parameterLimit: 5 }), async (req, res) => {
    try {
      const form = (req.body ?? {}) as Record<string, string | undefined>;
      const current = await sessions.findByPageToken(req.params.token);
      if (!current) return sendPage(res, notFoundPage('This checkout does not exist.'));
      const merchant = await pageMerchantOf(merchants, current.orgId);
      const values = { country: form.country ?? '', region: form.region ?? '', taxId: form.taxId ?? '' };
      // The Stripe rail: the location, then Stripe's page opened for it.
      if (sessions.isPayable(current) && sessions.takesLocationStep(current)) {
        let handedOff: Awaited<ReturnType<CheckoutSessionService['handOffWithLocation']>>;
        try {
          handedOff = await sessions.handOffWithLocation(current, values);
        } catch (err) {
          // Refusals are shown by the step's own page (redirect-after-POST, STEP_ERRORS).
          if (err instanceof AppError && err.code === 'VALIDATION_ERROR') {
            // A refusal by the card processor is not the buyer's input: it names no field of the form.
            const processor = err.message.startsWith('The card processor refused');
            return res.redirect(303, stepErrorUrl(req.params.token, processor ? 'processor' : (taxErrorField(err) ?? 'location'), values));
          }
          if (err instanceof AppError && err.code === 'CONFLICT') {
            const now = await sessions.findByPageToken(req.params.token);
            if (!now || !sessions.isPayable(now)) return res.redirect(303, `/checkout/${req.params.token}`);
            return res.redirect(303, stepErrorUrl(req.params.token, 'changed', values));
          }
          throw err;
        }
        if (handedOff.kind === 'paid') return res.redirect(303, `/checkout/${req.params.token}/complete`);
        // The promotion code was used up (or expired) since it was typed: taken off, the new total shown.
        if (handedOff.kind === 'discount_refused') {
          return sendPage(res, { status: 400, html: locationStepPage(handedOff.session, merchant, undefined, values, undefined, { promotionCodes: sessions.acceptsPromotionCodes(handedOff.session), codeMessage: { text: handedOff.message, ok: false } }) });
        }
        return res.redirect(303, handedOff.url);
      }
      if (!sessions.isPayable(current) || !sessions.takesTaxLocation(current)) return res.redirect(303, `/checkout/${req.params.token}`);
      try {
        await sessions.setTaxLocation(current, values);
      } catch (err) {
        if (err instanceof AppError && err.code === 'VALIDATION_ERROR') {
          return sendPage(res, { status: 400, html: await page(current, merchant, humanTaxError(err), undefined, values) });
        }
        if (err instanceof AppError && err.code === 'CONFLICT') return res.redirect(303, `/checkout/${req.params.token}`);
        throw err;
      }
      res.redirect(303, `/checkout/${req.params.token}`);
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.get('/checkout/:token', async (req, res) => {
    try {
      const session = await sessions.findByPageToken(req.params.token);
      if (!session) return sendPage(res, notFoundPage('This checkout does not exist.'));
      const merchant = await pageMerchantOf(merchants, session.orgId);
      // Kassa asks the country before Stripe's page (docs/tax.md): the step, also when the buyer
      // comes back to it (the browser's back button, "Return to payment"), to continue or change it.
      if (sessions.isPayable(session) && sessions.takesLocationStep(session)) {
        // After "Apply"/"Remove" (redirect-after-POST, so the back button from Stripe's page lands
        // on this GET): the status is said from the session itself, never from text in the URL.
        const promotion = req.query.promotion;
        const discount = session.pricing.discount;
        const codeMessage = promotion === 'applied' && discount ? { text: `${discount.code ?? discount.name} applied.`, ok: true } : promotion === 'removed' && !discount ? { text: 'Promotion code removed.', ok: true } : undefined;
        // A refused step (STEP_ERRORS): the message by its kind, the form with what was typed (country, region).
        const asked = req.query.step_error;
        const kind = typeof asked === 'string' && (Object.keys(STEP_ERRORS) as string[]).includes(asked) ? (asked as StepError) : undefined;
        if (kind) {
          // Absent: the location stored last (a refused tax id is typed again).
          const values = {
            country: typeof req.query.country === 'string' ? req.query.country : undefined,
            region: typeof req.query.region === 'string' ? req.query.region : undefined,
            taxId: kind === 'taxId' ? '' : undefined,
          };
          const field = kind === 'country' || kind === 'region' || kind === 'taxId' ? kind : undefined;
          return sendPage(res, { status: STEP_ERRORS[kind].status, html: locationStepPage(session, merchant, STEP_ERRORS[kind].text, values, field, { promotionCodes: sessions.acceptsPromotionCodes(session) }) });
        }
        return sendPage(res, { status: 200, html: locationStepPage(session, merchant, undefined, undefined, undefined, { promotionCodes: sessions.acceptsPromotionCodes(session), codeMessage }) });
      }
      // The card processor's own page takes the card (Stripe Checkout): Kassa never sees it.
      if (sessions.isPayable(session) && session.processorUrl) return res.redirect(303, session.processorUrl);
      if (sessions.isPayable(session)) return sendPage(res, { status: 200, html: await page(session, merchant, session.lastError ? 'Your last payment attempt was declined. Try another card.' : undefined) });
      const order = await sessions.orderOf(session);
      sendPage(res, statusPage(session, merchant, order, await subscriptions.findBySession(session.id), { portalOpen: portal?.isOpen(order), rail: sessions.railOf(session) }));
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.get('/checkout/:token/complete', async (req, res) => {
    try {
      const session = await sessions.findByPageToken(req.params.token);
      if (!session) return sendPage(res, notFoundPage('This checkout does not exist.'));
      // Back from the processor's page before its event arrived: processing, not "expired".
      // (A Checkout Session the buyer paid while the location step was closing it has no url any more.)
      const awaitingEvent = sessions.isPayable(session) && session.processorSessionId !== null;
      const order = await sessions.orderOf(session);
      sendPage(res, statusPage(session, await pageMerchantOf(merchants, session.orgId), order, await subscriptions.findBySession(session.id), { processing: awaitingEvent, portalOpen: portal?.isOpen(order), rail: sessions.railOf(session) }));
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
      if (!sessions.isPayable(session)) return sendPage(res, statusPage(session, merchant, await sessions.orderOf(session), undefined, { rail: sessions.railOf(session) }));
      const back = session.cancelUrl ? `<p class="note"><a href="${escapeHtml(session.cancelUrl)}">Return to ${escapeHtml(merchantName(merchant) ?? 'the merchant')}</a></p>` : '';
      sendPage(res, {
        status: 200,
        html: layout('Payment not completed', `${summary(session)}<div class="muted" data-testid="status">You left the payment page without paying.</div><p class="note"><a data-testid="resume" href="/checkout/${escapeHtml(session.pageToken)}">Return to payment</a></p>${back}`, { merchant, rail: sessions.railOf(session) }),
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
      // A Stripe-rail session takes no card here: its page is the location step.
      if (sessions.takesLocationStep(current)) return res.redirect(303, `/checkout/${req.params.token}`);
      const merchant = await pageMerchantOf(merchants, current.orgId);
      // No card at all: a trial that may start without one (the service refuses it otherwise).
      const noCard = trialDaysOf(current) > 0 && current.pricing.trialPaymentMethodCollection === 'IF_REQUIRED' && !form.cardNumber?.trim() && !form.expiry?.trim() && !form.cvc?.trim();
      const ask = await taxAsk(current);
      if (ask === 'required') return sendPage(res, { status: 400, html: await page(current, merchant, 'Choose your country first: the total depends on it.') });
      // The total changed since the page was shown (the location or the promotion code changed it in another tab): show it again, charge nothing.
      if (sessions.isPayable(current) && form.amount !== undefined && form.amount !== String(current.amount)) {
        return sendPage(res, { status: 409, html: await page(current, merchant, 'The total changed. Check it and pay again.') });
      }
      if (!expiry && !noCard) return sendPage(res, { status: 400, html: await page(current, merchant, 'Enter the card expiry as MM/YY.') });
      // The amount due the page showed (the total less the customer's balance, issue 39): compared under the balance's lock.
      const expectedDue = form.due !== undefined && /^\d{1,16}$/.test(form.due) ? Number(form.due) : form.due !== undefined ? -1 : undefined;
      const attempt: PaymentAttempt = await sessions.pay(req.params.token, {
        email: form.email,
        ...(expectedDue !== undefined ? { expectedDue } : {}),
        ...(expiry && !noCard ? { card: { number: form.cardNumber ?? '', cvc: (form.cvc ?? '').trim(), ...expiry } } : {}),
      });
      switch (attempt.kind) {
        case 'declined':
          return sendPage(res, { status: 402, html: await page(attempt.session, merchant, attempt.message) });
        case 'changed':
          return sendPage(res, { status: 409, html: await page(attempt.session, merchant, attempt.message) });
        case 'not_payable':
          return sendPage(res, statusPage(attempt.session, merchant, await sessions.orderOf(attempt.session), undefined, { rail: sessions.railOf(attempt.session) }));
        case 'processing':
          return sendPage(res, statusPage(attempt.session, merchant, await sessions.orderOf(attempt.session), undefined, { processing: true, rail: sessions.railOf(attempt.session) }));
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
      if (!sessions.isPayable(current)) return sendPage(res, statusPage(current, merchant, await sessions.orderOf(current), undefined, { rail: sessions.railOf(current) }));
      // On the Stripe rail only on Kassa's location step (docs/discounts.md); Stripe's page fixes its coupon.
      if (sessions.takesLocationStep(current) && !sessions.acceptsPromotionCodes(current)) return res.redirect(303, `/checkout/${req.params.token}`);
      const remove = form.remove === '1';
      if (!remove) {
        try {
          codesPerSession.hit(current.id);
          codesPerAddress.hit(clientAddressKey(req.ip));
        } catch (err) {
          const limited = retryLaterPage(err);
          if (!limited) throw err;
          return sendPage(res, { status: 429, html: await page(current, merchant, undefined, { text: 'Too many promotion code attempts. Wait a few minutes, then try again.', ok: false }) });
        }
      }
      const result = await sessions.setPromotionCode(req.params.token, remove ? null : (form.code ?? ''));
      // The buyer paid the Stripe Checkout Session opened for the old code meanwhile (another tab): nothing changed.
      if (result.paid) return res.redirect(303, `/checkout/${req.params.token}/complete`);
      if (result.message) return sendPage(res, { status: 400, html: await page(result.session, merchant, undefined, { text: result.message, ok: false, typed: form.code }) });
      const applied = result.session.pricing.discount;
      // The location step answers with a redirect to its page (the buyer goes on to Stripe's page and may come back with the back button).
      if (sessions.takesLocationStep(result.session)) return res.redirect(303, `/checkout/${req.params.token}?promotion=${applied ? 'applied' : 'removed'}`);
      sendPage(res, { status: 200, html: await page(result.session, merchant, undefined, { text: applied ? `${applied.code ?? applied.name} applied.` : 'Promotion code removed.', ok: true }) });
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
