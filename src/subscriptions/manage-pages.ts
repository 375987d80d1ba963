/**
 * The buyer's subscription page (`/subscriptions/manage/<token>`, linked from the paid checkout):
 * what the subscription costs, its state, and cancellation at the end of the paid period.
 */
import type { Router } from 'express';
import { formatMoney } from '../kernel/money.js';
import type { Logger } from '../kernel/logger.js';
import type { Subscription } from '../commerce/model.js';
import { escapeHtml, layout, notFoundPage, pageFailure, sendPage, type MerchantNames } from '../pages/page.js';
import type { SubscriptionService } from './subscription.service.js';

const DATE = new Intl.DateTimeFormat('en-GB', { dateStyle: 'long', timeZone: 'UTC' });

function managePage(s: Subscription, merchant: string | undefined, notice?: string): string {
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
    { merchant },
  );
}

export function registerManagePages(router: Router, subscriptions: SubscriptionService, merchants: MerchantNames, logger: Logger): void {
  const fail = pageFailure(logger, 'Cannot open this subscription');
  router.get('/subscriptions/manage/:token', async (req, res) => {
    try {
      const subscription = await subscriptions.findByManageToken(req.params.token);
      if (!subscription) return sendPage(res, notFoundPage('This subscription does not exist.'));
      sendPage(res, { status: 200, html: managePage(subscription, await merchants.displayNameOf(subscription.orgId)) });
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/subscriptions/manage/:token/cancel', async (req, res) => {
    try {
      const subscription = await subscriptions.cancelByManageToken(req.params.token);
      sendPage(res, { status: 200, html: managePage(subscription, await merchants.displayNameOf(subscription.orgId), 'Your subscription will end at the end of the paid period.') });
    } catch (err) {
      fail(req, res, err);
    }
  });
}
