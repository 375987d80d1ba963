/**
 * The buyer's subscription page (`/subscriptions/manage/<token>`, linked from the paid checkout):
 * what the subscription costs, its state, cancellation at the end of the paid period (after a
 * confirmation step) and undoing a scheduled cancellation. Every POST here passes the hosted
 * forms' cross-site check first (src/pages/cross-site.ts); cancel changes something only when the
 * confirmation form's `confirm=yes` comes with it, any other POST shows that confirmation.
 */
import type { Router } from 'express';
import { formatMoney } from '../kernel/money.js';
import type { Logger } from '../kernel/logger.js';
import type { Subscription } from '../commerce/model.js';
import { hostedForm } from '../pages/form.js';
import { escapeHtml, layout, notFoundPage, pageFailure, sendPage, type MerchantNames, type PageMerchant } from '../pages/page.js';
import type { SubscriptionService } from './subscription.service.js';

const DATE = new Intl.DateTimeFormat('en-GB', { dateStyle: 'long', timeZone: 'UTC' });

/** "$9.00 every month". */
export function subscriptionPrice(s: Pick<Subscription, 'amountCents' | 'currency' | 'billingInterval' | 'billingIntervalCount'>): string {
  return `${formatMoney(s.amountCents, s.currency)} every ${s.billingIntervalCount > 1 ? `${s.billingIntervalCount} ` : ''}${s.billingInterval.toLowerCase()}${s.billingIntervalCount > 1 ? 's' : ''}`;
}

/** The processor's page where the buyer confirms a renewal's payment (Stripe's hosted invoice page), when one waits. */
export function paymentActionUrl(s: Subscription): string | undefined {
  const url = s.status === 'ACTIVE' || s.status === 'PAUSED' ? s.paymentAction?.url : undefined;
  return url && /^https?:\/\//.test(url) ? url : undefined;
}

/**
 * A renewal waiting for the buyer (3-D Secure on an off-session charge): what is asked and a
 * "Confirm your payment" link to the processor's page. Empty when nothing waits.
 */
export function paymentActionBlock(s: Subscription, testId: string): string {
  const url = paymentActionUrl(s);
  if (!url) return '';
  return `<div class="error" data-testid="payment-action">Your bank asks you to confirm the renewal payment of ${escapeHtml(formatMoney(s.amountCents, s.currency))}. Until you do, the renewal is not paid.</div>
<a class="button primary" href="${escapeHtml(url)}" rel="noreferrer" data-testid="${escapeHtml(testId)}">Confirm your payment<span class="visually-hidden"> for ${escapeHtml(s.productName)} on the payment provider's secure page</span></a>`;
}

/** One line on where the subscription stands ("Active: renews on 1 December 2026."). */
export function subscriptionState(s: Subscription): string {
  if (s.status === 'ACTIVE' && paymentActionUrl(s)) return 'Active: the renewal payment needs your confirmation.';
  if (s.status === 'ACTIVE' && s.cancelAtPeriodEnd) return inTrial(s) ? `Canceled: the free trial ends on ${DATE.format(s.currentPeriodEnd)}, with no charge.` : `Canceled: access ends on ${DATE.format(s.currentPeriodEnd)}.`;
  if (s.status === 'ACTIVE') return `Active: renews on ${DATE.format(s.currentPeriodEnd)}.`;
  if (s.status === 'PAUSED') return 'Paused.';
  return `${s.status.charAt(0)}${s.status.slice(1).toLowerCase()}${s.endedAt ? ` on ${DATE.format(s.endedAt)}` : ''}.`;
}

export interface ManagePageOptions {
  notice?: string;
  /** Where the buyer finds all their purchases with this merchant (the portal's sign-in page). */
  portalUrl?: string;
}

function managePage(s: Subscription, merchant: string | undefined, options: ManagePageOptions = {}): string {
  const base = `/subscriptions/manage/${escapeHtml(s.manageToken)}`;
  const actions =
    s.status === 'ACTIVE' && !s.cancelAtPeriodEnd
      ? `<p><a class="button secondary" data-testid="cancel" href="${base}/cancel">Cancel subscription…</a></p>`
      : s.status === 'ACTIVE' && s.cancelAtPeriodEnd
        ? `<form method="post" action="${base}/resume"><button type="submit" data-testid="keep">Keep my subscription</button></form>`
        : '';
  const portal = options.portalUrl ? `<p class="note"><a data-testid="portal" href="${escapeHtml(options.portalUrl)}">All your orders and receipts with ${escapeHtml(merchant ?? 'this merchant')}</a></p>` : '';
  return layout(
    `Manage ${s.productName}`,
    `<h1>${escapeHtml(s.productName)}</h1><div class="muted">${escapeHtml(subscriptionPrice(s))}</div>
${options.notice ? `<div class="ok" role="status">${escapeHtml(options.notice)}</div>` : ''}
<div class="total"><span>Status</span><strong data-testid="subscription-status" style="font-size:1rem">${escapeHtml(subscriptionState(s))}</strong></div>${paymentActionBlock(s, 'confirm-payment')}${actions}${portal}`,
    { merchant },
  );
}

/**
 * Whether the subscription is in its free trial (issue 39): period 0 of a subscription started with
 * one. Nothing has been charged yet, so cancelling says "you will not be charged", not "again".
 */
export function inTrial(s: Pick<Subscription, 'trialEnd' | 'periodNumber'>): boolean {
  return !!s.trialEnd && s.periodNumber === 0;
}

/** The confirmation step of a cancellation: what ends when, and a way back that changes nothing. */
export function cancelConfirmation(s: Subscription, merchant: PageMerchant | undefined, form: { action: string; back: string; hidden?: string }): string {
  const trial = inTrial(s);
  const text = trial
    ? `Your free trial ends on <strong>${escapeHtml(DATE.format(s.currentPeriodEnd))}</strong> and your subscription will not start. You will not be charged.`
    : `Your subscription will not renew. You keep access until <strong>${escapeHtml(DATE.format(s.currentPeriodEnd))}</strong>, and you will not be charged again.`;
  return layout(
    `Cancel ${s.productName}?`,
    `<h1>Cancel ${escapeHtml(s.productName)}?</h1><div class="muted">${escapeHtml(subscriptionPrice(s))}</div>
<p data-testid="confirm-text">${text}</p>
<form method="post" action="${escapeHtml(form.action)}">${form.hidden ?? ''}<input type="hidden" name="confirm" value="yes"><button type="submit" class="danger" data-testid="confirm-cancel">${trial ? 'Yes, cancel at the end of the trial' : 'Yes, cancel at the end of the period'}</button></form>
<p><a class="button secondary" data-testid="back" href="${escapeHtml(form.back)}">No, keep my subscription</a></p>`,
    { merchant },
  );
}

export function registerManagePages(router: Router, subscriptions: SubscriptionService, merchants: MerchantNames, logger: Logger, portalUrlOf?: (orgId: string) => string): void {
  const fail = pageFailure(logger, 'Cannot open this subscription');
  const options = (s: Subscription, notice?: string): ManagePageOptions => ({ notice, portalUrl: portalUrlOf?.(s.orgId) });
  router.get('/subscriptions/manage/:token', async (req, res) => {
    try {
      const subscription = await subscriptions.findByManageToken(req.params.token);
      if (!subscription) return sendPage(res, notFoundPage('This subscription does not exist.'));
      sendPage(res, { status: 200, html: managePage(subscription, await merchants.displayNameOf(subscription.orgId), options(subscription)) });
    } catch (err) {
      fail(req, res, err);
    }
  });

  const confirmation = async (token: string) => {
    const subscription = await subscriptions.findByManageToken(token);
    if (!subscription) return notFoundPage('This subscription does not exist.');
    const merchant = await merchants.displayNameOf(subscription.orgId);
    const base = `/subscriptions/manage/${subscription.manageToken}`;
    if (subscription.status !== 'ACTIVE' || subscription.cancelAtPeriodEnd) return { status: 200, html: managePage(subscription, merchant, options(subscription)) };
    return { status: 200, html: cancelConfirmation(subscription, merchant, { action: `${base}/cancel`, back: base }) };
  };

  router.get('/subscriptions/manage/:token/cancel', async (req, res) => {
    try {
      sendPage(res, await confirmation(req.params.token));
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/subscriptions/manage/:token/cancel', hostedForm({ limit: '2kb', parameterLimit: 5 }), async (req, res) => {
    try {
      const form = (req.body ?? {}) as Record<string, string | undefined>;
      // Without the confirmation form's field (a bookmarked or replayed POST) nothing changes yet.
      if (form.confirm !== 'yes') return sendPage(res, await confirmation(req.params.token));
      const subscription = await subscriptions.cancelByManageToken(req.params.token);
      sendPage(res, { status: 200, html: managePage(subscription, await merchants.displayNameOf(subscription.orgId), options(subscription, 'Your subscription will end at the end of the paid period.')) });
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/subscriptions/manage/:token/resume', hostedForm({ limit: '2kb', parameterLimit: 5 }), async (req, res) => {
    try {
      const subscription = await subscriptions.keepRenewingByManageToken(req.params.token);
      sendPage(res, { status: 200, html: managePage(subscription, await merchants.displayNameOf(subscription.orgId), options(subscription, 'Your subscription continues and renews as before.')) });
    } catch (err) {
      fail(req, res, err);
    }
  });
}
