/**
 * The buyer e-mails' words: subject, plain text and HTML (inline styles only, no images, no
 * script), each with the merchant's portal sign-in link. No e-mail carries a bearer token: the
 * portal link opens the sign-in page, which e-mails a 30-minute single-use link to the customer's
 * own address (the only e-mail that carries a token, and only for as long as it is meant to work).
 */
import { formatMoney } from '../kernel/money.js';
import type { Order, Subscription } from '../commerce/model.js';
import type { BuyerEmailKind } from './buyer-email.repository.js';
import type { Brand } from '../pages/page.js';
import { contrastRatio } from '../kernel/colour.js';
import { lineDetail } from '../commerce/order-line-text.js';
import { shownName } from '../kernel/names.js';

/** Kassa's indigo, or the organization's accent where it keeps 4.5:1 on the white card. */
const inkOf = (brand: Brand | undefined): string => {
  const accent = brand?.accentColor;
  return accent && /^#[0-9a-f]{6}$/.test(accent) && contrastRatio(accent, '#ffffff') >= 4.5 ? accent : '#4338ca';
};

export interface EmailContext {
  kind: BuyerEmailKind;
  merchant: string;
  /** The organization's branding: its logo above the name, its accent on the name and link (when readable on white). */
  brand?: Brand;
  order?: Order;
  subscription?: Subscription;
  /** A trial's first charge as the renewal at its end prices it (coupon and tax included); default the stored amount. */
  firstChargeCents?: number;
  /** refund_issued, refund_failed: this refund. */
  refundCents?: number | null;
  portalUrl: string;
}

export interface RenderedEmail {
  subject: string;
  text: string;
  html: string;
}

const DATE = new Intl.DateTimeFormat('en-GB', { dateStyle: 'long', timeZone: 'UTC' });
const esc = (text: string): string => text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function price(s: Subscription): string {
  return `${formatMoney(s.amountCents, s.currency)} every ${s.billingIntervalCount > 1 ? `${s.billingIntervalCount} ` : ''}${s.billingInterval.toLowerCase()}${s.billingIntervalCount > 1 ? 's' : ''}`;
}

/** Lines of the message body (paragraphs) and the facts table, per kind. */
function content(c: EmailContext): { subject: string; heading: string; paragraphs: string[]; facts: Array<[string, string]>; action?: { label: string; url: string } } {
  const o = c.order;
  const s = c.subscription;
  // A product named before control characters were refused stays on one line in the subject (issue 37 §27).
  const product = shownName(o?.productName ?? s?.productName ?? 'your purchase');
  // One fact per order line (what it is made of, then its amount), then the total.
  const lineFacts: Array<[string, string]> = o
    ? o.lines.map((l): [string, string] => {
        const detail = lineDetail(l, o.currency);
        return [l.description, `${detail ? `${detail} = ` : ''}${formatMoney(l.amount, o.currency)}`];
      })
    : [];
  const orderFacts: Array<[string, string]> = o
    ? [
        ...lineFacts,
        ...(o.lines.some((l) => l.kind === 'TAX') ? [] : [['Tax', 'None charged'] as [string, string]]),
        ['Total', formatMoney(o.amountCents, o.currency)],
        ['Date', DATE.format(o.createdAt)],
        ['Order', o.id],
      ]
    : [];
  switch (c.kind) {
    case 'payment_receipt':
      return { subject: `Your receipt from ${c.merchant}`, heading: 'Thank you for your payment', paragraphs: [`${c.merchant} received your payment for ${product}.`], facts: orderFacts };
    case 'trial_will_end': {
      const end = s?.trialEnd ?? s?.currentPeriodEnd;
      const charge = s ? formatMoney(c.firstChargeCents ?? s.amountCents, s.currency) : '';
      return {
        subject: `${product}: your free trial ends${end ? ` on ${DATE.format(end)}` : ' soon'}`,
        heading: 'Your free trial ends soon',
        paragraphs: [
          `Your free trial of ${product} with ${c.merchant} ends${end ? ` on ${DATE.format(end)}` : ' soon'}.`,
          s && (s.paymentMethod !== 'none' || s.processorSubscriptionId)
            ? `Then your subscription starts and the card you gave is charged ${charge} (${price(s)}). To not be charged, cancel it from your account before then.`
            : 'No card is on file, so nothing will be charged: the subscription ends with the trial. Contact the merchant to keep it.',
        ],
        facts: s ? [['Trial ends', end ? DATE.format(end) : ''], ['First charge', charge]] : [],
      };
    }
    case 'subscription_started':
      return {
        subject: `Your ${product} subscription with ${c.merchant}`,
        heading: 'Your subscription has started',
        paragraphs: [
          `You are subscribed to ${product} (${s ? price(s) : ''}).`,
          s?.trialEnd
            ? `Your free trial runs until ${DATE.format(s.trialEnd)}; the first charge of ${formatMoney(c.firstChargeCents ?? s.amountCents, s.currency)} is then. You can cancel at any time from your account, and nothing is charged if you cancel before then.`
            : s ? `It renews on ${DATE.format(s.currentPeriodEnd)}. You can cancel at any time from your account.` : '',
        ],
        facts: orderFacts,
      };
    case 'renewal_succeeded':
      return {
        subject: `${product}: renewed`,
        heading: 'Your subscription renewed',
        paragraphs: [`Your ${product} subscription with ${c.merchant} renewed${s ? `; the next renewal is on ${DATE.format(s.currentPeriodEnd)}` : ''}.`],
        facts: orderFacts,
      };
    case 'renewal_failed':
      return {
        subject: `${product}: your payment did not go through`,
        heading: 'We could not renew your subscription',
        paragraphs: [
          `The payment for your ${product} subscription with ${c.merchant} was declined.`,
          'What to do: make sure the card you subscribed with is valid and has funds. We will try again automatically over the next few days; if every attempt fails, the subscription ends. You can also cancel it from your account, or contact the merchant to pay another way.',
        ],
        facts: orderFacts,
      };
    case 'renewal_action_required': {
      // Stripe's hosted invoice page (https, Stripe's own): where the bank's check (3-D Secure) is done.
      // Read when the e-mail is sent: once the buyer confirmed, the page is gone from the subscription.
      const url = s?.paymentAction && /^https?:\/\//.test(s.paymentAction.url) ? s.paymentAction.url : undefined;
      return {
        subject: `${product}: confirm your payment to keep your subscription`,
        heading: 'Your renewal needs your confirmation',
        paragraphs: [
          `Your bank asks you to confirm the renewal payment${s ? ` of ${formatMoney(s.amountCents, s.currency)}` : ''} for your ${product} subscription with ${c.merchant}. Until you do, the renewal is not paid.`,
          url
            ? 'Confirm it on the secure payment page (the button below, also in your account). If you have already confirmed it, there is nothing to do.'
            : 'It no longer needs you: the payment was confirmed or the renewal settled since. Your account shows where your subscription stands.',
        ],
        facts: [],
        ...(url ? { action: { label: 'Confirm your payment', url } } : {}),
      };
    }
    case 'subscription_canceled':
      return {
        subject: `${product}: canceled`,
        heading: 'Your subscription is canceled',
        paragraphs: [`Your ${product} subscription with ${c.merchant} will not renew.`, s
            ? s.trialEnd && s.periodNumber === 0
              ? `Your free trial ends on ${DATE.format(s.currentPeriodEnd)} and you will not be charged. Changed your mind? Keep it from your account before then.`
              : `You keep access until ${DATE.format(s.currentPeriodEnd)}, and you will not be charged again. Changed your mind? Keep it from your account before then.`
            : ''],
        facts: [],
      };
    case 'plan_changed': {
      const next = s?.scheduledChange;
      return {
        subject: `${product}: your plan changed`,
        heading: 'Your plan changed',
        paragraphs: [
          s && next
            ? `Your subscription with ${c.merchant} changes to ${next.quantity} × ${next.productName} (${formatMoney(next.amountCents, s.currency)}) on ${DATE.format(s.currentPeriodEnd)}, when it renews; until then it stays as it is.`
            : s
              ? `Your subscription with ${c.merchant} is now ${s.quantity} × ${s.productName}: ${price(s)}. Any amount charged for the rest of the current period, or credited to your balance for the next renewals, is on your receipt in your account.`
              : '',
        ],
        facts: s ? [['Next renewal', DATE.format(s.currentPeriodEnd)], ['Amount then', formatMoney(next?.amountCents ?? s.amountCents, s.currency)]] : [],
      };
    }
    case 'subscription_ended':
      return {
        subject: `${product}: your subscription has ended`,
        heading: 'Your subscription has ended',
        paragraphs: [`Your ${product} subscription with ${c.merchant} ended${s?.endedAt ? ` on ${DATE.format(s.endedAt)}` : ''}. You will not be charged again.`],
        facts: [],
      };
    case 'refund_issued':
      return {
        subject: `${c.merchant} refunded ${o && c.refundCents ? formatMoney(c.refundCents, o.currency) : 'your payment'}`,
        heading: 'Your refund is on its way',
        paragraphs: [
          `${c.merchant} refunded ${o && c.refundCents ? formatMoney(c.refundCents, o.currency) : 'your payment'} for ${product}.`,
          'It goes back to the card or account you paid with; depending on your bank this takes 5–10 business days to show.',
        ],
        facts: o ? [['Product', product], ['Amount', formatMoney(o.amountCents, o.currency)], ['Refunded', formatMoney(c.refundCents ?? o.amountRefundedCents, o.currency)], ['Order', o.id]] : [],
      };
    case 'refund_failed': {
      const amount = o && c.refundCents ? formatMoney(c.refundCents, o.currency) : 'your refund';
      return {
        subject: `${product}: your refund of ${amount} did not go through`,
        heading: 'Your refund did not go through',
        paragraphs: [
          `The refund of ${amount} for ${product} that ${c.merchant} sent did not reach your card or account: your bank or the payment processor returned it.`,
          `What to do: contact ${c.merchant} so they can refund you another way. Your account shows the order as it stands now.`,
        ],
        facts: o ? [['Product', product], ['Amount', formatMoney(o.amountCents, o.currency)], ['Refund failed', amount], ['Order', o.id]] : [],
      };
    }
  }
}

export function renderBuyerEmail(c: EmailContext): RenderedEmail {
  const { subject, heading, paragraphs, facts, action } = content(c);
  const body = paragraphs.filter((p) => p !== '');
  const text = [
    heading,
    '',
    ...body.flatMap((p) => [p, '']),
    ...facts.map(([k, v]) => `${k}: ${v}`),
    ...(facts.length ? [''] : []),
    ...(action ? [`${action.label}: ${action.url}`, ''] : []),
    `Your orders, receipts and subscriptions with ${c.merchant}: ${c.portalUrl}`,
    '',
    `${c.merchant} · sent by Kassa`,
  ].join('\n');
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(subject)}</title></head><body style="margin:0;background:#f4f5f7;font:16px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d2330">
<div style="max-width:520px;margin:0 auto;padding:24px 16px"><div style="background:#fff;border-radius:14px;padding:24px">
${c.brand?.logoUrl?.startsWith('https://') ? `<img src="${esc(c.brand.logoUrl)}" alt="${esc(c.merchant)}" height="40" style="display:block;max-height:40px;max-width:160px;margin-bottom:8px">` : ''}<div style="font-weight:700;color:${inkOf(c.brand)};margin-bottom:16px">${esc(c.merchant)}</div>
<h1 style="font-size:1.25rem;margin:0 0 12px">${esc(heading)}</h1>
${body.map((p) => `<p>${esc(p)}</p>`).join('\n')}
${action ? `<p style="margin:20px 0"><a href="${esc(action.url)}" style="display:inline-block;background:#4338ca;color:#fff;text-decoration:none;font-weight:600;padding:10px 18px;border-radius:8px">${esc(action.label)}</a></p>` : ''}
${facts.length ? `<table role="presentation" style="font-size:.9rem;border-collapse:collapse">${facts.map(([k, v]) => `<tr><td style="color:#5b6474;padding:2px 12px 2px 0">${esc(k)}</td><td>${esc(v)}</td></tr>`).join('')}</table>` : ''}
<p style="margin-top:20px"><a href="${esc(c.portalUrl)}" style="color:${inkOf(c.brand)}">Your orders, receipts and subscriptions</a></p>
</div><p style="text-align:center;font-size:.8rem;color:#5b6474">${esc(c.merchant)} · sent by Kassa</p></div></body></html>`;
  return { subject, text, html };
}

/** The portal sign-in e-mail: the one e-mail with a token, valid as long as the link works. */
export function renderSignInEmail(input: { merchant: string; url: string; expiresAt: Date }): RenderedEmail {
  const subject = `Your link to your ${input.merchant} account`;
  const text = `Open your orders, receipts and subscriptions with ${input.merchant}:\n\n${input.url}\n\nThe link works once, until ${input.expiresAt.toISOString().slice(11, 16)} UTC. If you did not ask for it, ignore this e-mail.\n\n${input.merchant} · sent by Kassa`;
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(subject)}</title></head><body style="font:16px/1.5 system-ui,sans-serif;color:#1d2330"><p>Open your orders, receipts and subscriptions with ${esc(input.merchant)}:</p><p><a href="${esc(input.url)}" style="color:#4338ca">Open your account</a></p><p style="color:#5b6474">The link works once, until ${esc(input.expiresAt.toISOString().slice(11, 16))} UTC. If you did not ask for it, ignore this e-mail.</p></body></html>`;
  return { subject, text, html };
}

/** A console invite: the link is the proof that the invitee controls this address (issue 37). */
export function renderInviteEmail(input: { organization: string; role: string; url: string; expiresAt: Date }): RenderedEmail {
  const subject = `You are invited to ${input.organization} on Kassa`;
  const until = input.expiresAt.toISOString().slice(0, 10);
  const text = `You are invited to join ${input.organization} as ${input.role}.\n\nAccept the invite:\n\n${input.url}\n\nThe link works once, until ${until}. If you already have an account, sign in first. If you did not expect this e-mail, ignore it.\n\nsent by Kassa`;
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(subject)}</title></head><body style="font:16px/1.5 system-ui,sans-serif;color:#1d2330"><p>You are invited to join ${esc(input.organization)} as ${esc(input.role)}.</p><p><a href="${esc(input.url)}" style="color:#4338ca">Accept the invite</a></p><p style="color:#5b6474">The link works once, until ${esc(until)}. If you already have an account, sign in first. If you did not expect this e-mail, ignore it.</p></body></html>`;
  return { subject, text, html };
}
