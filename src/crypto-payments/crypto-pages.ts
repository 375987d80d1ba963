/**
 * The hosted checkout page of crypto sessions (same URL as card sessions: `/checkout/<token>`):
 * the buyer's e-mail first, then the payment instructions (exact amount, token, chain, recipient,
 * a QR code rendered server-side as an SVG data: URI), then the transfer's progress. No script:
 * the page refreshes itself with a meta refresh until the payment is confirmed.
 */
import type { NextFunction, Request, Response, Router } from 'express';
import QRCode from 'qrcode';
import type { Logger } from '../kernel/logger.js';
import type { Clock } from '../kernel/clock.js';
import { formatMoney } from '../kernel/money.js';
import { escapeHtml, layout, notFoundPage, pageFailure, sendPage, type MerchantNames, type Page } from '../pages/page.js';
import { receipt, summary } from '../pages/checkout-summary.js';
import { hostedForm } from '../pages/form.js';
import type { CheckoutSession, Order } from '../commerce/model.js';
import type { CryptoQuoteService } from './crypto-quote.service.js';
import type { CryptoQuote } from '../commerce/model.js';
import type { CryptoTransfer } from './crypto.repository.js';
import type { ChainConfig } from './crypto-config.js';

const REFRESH_WAITING_S = 10;
const REFRESH_CONFIRMING_S = 4;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** 25000037 → "25.000037"; 25000000 → "25.00". */
export function tokenAmount(units: number): string {
  const whole = Math.trunc(units / 1_000_000);
  const fraction = String(units % 1_000_000).padStart(6, '0').replace(/0+$/, '');
  return `${whole}.${fraction.padEnd(2, '0')}`;
}

/** EIP-681 request for an ERC-20 transfer, understood by mobile wallets. */
export const paymentUri = (q: CryptoQuote) => `ethereum:${q.tokenAddress}@${q.chainId}/transfer?address=${q.recipient}&uint256=${q.amountUnits}`;

/** What the page needs of checkout (a structural view: crypto-payments does not import checkout). */
interface SessionPages {
  findByPageToken(token: string): Promise<CheckoutSession | undefined>;
  isPayable(session: CheckoutSession): boolean;
  orderOf(session: CheckoutSession): Promise<Order | undefined>;
}

interface PageDeps {
  sessions: SessionPages;
  crypto: CryptoQuoteService;
  clock: Clock;
  merchants: MerchantNames;
}

function emailPage(session: CheckoutSession, merchant: string | undefined, error?: string): Page {
  return {
    status: error ? 400 : 200,
    html: layout(
      `Pay ${session.product.name}`,
      `${summary(session)}
${error ? `<div class="error" role="alert" data-testid="error">${escapeHtml(error)}</div>` : ''}
<form method="post" action="/checkout/${escapeHtml(session.pageToken)}/crypto-email">
<p class="muted" style="margin-top:16px">Pay with ${escapeHtml(session.currency)} (a stablecoin transfer). Enter your e-mail to get the payment instructions; the merchant uses it for your receipt.</p>
<label for="email">E-mail</label><input id="email" name="email" type="email" autocomplete="email" required maxlength="255">
<button type="submit">Continue</button>
</form>`,
      { merchant, rail: 'crypto' },
    ),
  };
}

const txLink = (chain: ChainConfig | undefined, hash: string) =>
  chain ? `<a href="${escapeHtml(`${chain.explorerUrl}/tx/${hash}`)}" rel="noreferrer">${escapeHtml(`${hash.slice(0, 10)}…${hash.slice(-8)}`)}</a>` : `<code>${escapeHtml(hash)}</code>`;

async function instructionsPage(session: CheckoutSession, merchant: string | undefined, quote: CryptoQuote, chain: ChainConfig | undefined, notice?: string): Promise<Page> {
  const amount = tokenAmount(quote.amountUnits!);
  const chainName = chain?.name ?? `chain ${quote.chainId}`;
  const svg = await QRCode.toString(paymentUri(quote), { type: 'svg', errorCorrectionLevel: 'M', margin: 1 });
  const qr = `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`;
  const until = session.expiresAt.toISOString().replace('T', ' ').slice(0, 16);
  return {
    status: 200,
    html: layout(
      `Pay ${session.product.name}`,
      `${summary(session)}
${notice ? `<div class="error" role="alert" data-testid="notice">${escapeHtml(notice)}</div>` : ''}
<div class="ok" data-testid="instructions">Send <strong data-testid="crypto-amount">exactly ${escapeHtml(amount)} ${escapeHtml(quote.tokenSymbol)}</strong> on <strong data-testid="crypto-chain">${escapeHtml(chainName)}</strong> (chain ID ${quote.chainId}) to the address below, in one transfer, before ${escapeHtml(until)} UTC.</div>
<p style="text-align:center;margin:16px 0"><img src="${qr}" alt="QR code of the payment request" width="220" height="220" data-testid="crypto-qr"></p>
<label>Recipient address</label><div data-testid="crypto-recipient"><code style="word-break:break-all">${escapeHtml(quote.recipient)}</code></div>
<label>Amount</label><div><code data-testid="crypto-amount-units">${escapeHtml(amount)}</code> ${escapeHtml(quote.tokenSymbol)} <span class="muted">(${quote.amountUnits} base units)</span></div>
<label>Token contract (${escapeHtml(quote.tokenSymbol)})</label><div data-testid="crypto-token"><code style="word-break:break-all">${escapeHtml(quote.tokenAddress)}</code></div>
<p class="note">The exact amount identifies your payment: send it from a wallet or an exchange that does not deduct fees from it. Only ${escapeHtml(quote.tokenSymbol)} on ${escapeHtml(chainName)} is accepted. This page refreshes by itself and shows your payment as soon as it is seen on chain.</p>
${session.cancelUrl ? `<p class="note"><a href="${escapeHtml(session.cancelUrl)}">Return to ${escapeHtml(merchant ?? 'the merchant')}</a></p>` : ''}`,
      { refreshSeconds: REFRESH_WAITING_S, merchant, rail: 'crypto' },
    ),
  };
}

function progressPage(session: CheckoutSession, merchant: string | undefined, order: Order, transfer: CryptoTransfer | undefined, chain: ChainConfig | undefined): Page {
  const tx = order.txHash ? `<p class="note">Transaction ${txLink(chain, order.txHash)}</p>` : '';
  const received = order.amountReceivedCents != null ? formatMoney(order.amountReceivedCents, order.currency) : '';
  switch (order.status) {
    case 'PAID':
    case 'REFUNDED':
      return {
        status: 200,
        html: layout('Payment received', `${summary(session)}<div class="ok" data-testid="status">Payment received (${escapeHtml(received)}). Thank you!</div>${receipt(session, order, merchant ?? 'the merchant')}${tx}`, { merchant, rail: 'crypto' }),
      };
    case 'UNDERPAID':
      return {
        status: 200,
        html: layout(
          'Payment incomplete',
          `${summary(session)}<div class="error" data-testid="status">We received ${escapeHtml(received)}, less than the amount due. Please contact the merchant to settle the difference.</div>${tx}`,
          { merchant, rail: 'crypto' },
        ),
      };
    case 'PENDING': {
      const needed = chain?.confirmations ?? 1;
      const have = Math.min(transfer?.confirmations ?? 0, needed);
      return {
        status: 200,
        html: layout(
          'Payment detected',
          `${summary(session)}<div class="ok" data-testid="status">Payment of ${escapeHtml(received)} detected. Waiting for confirmations: ${have} of ${needed}. This page refreshes by itself.</div>${tx}`,
          { refreshSeconds: REFRESH_CONFIRMING_S, merchant, rail: 'crypto' },
        ),
      };
    }
    default:
      return {
        status: 200,
        html: layout('Payment failed', `${summary(session)}<div class="error" data-testid="status">Your transfer is no longer on the chain and this checkout has closed. Please contact the merchant.</div>${tx}`, { merchant, rail: 'crypto' }),
      };
  }
}

function closedPage(session: CheckoutSession, merchant: string | undefined): Page {
  return {
    status: 410,
    html: layout(
      'Checkout closed',
      `${summary(session)}<div class="error" data-testid="status">This checkout has expired and can no longer be paid. A transfer you already sent is still recorded for the merchant; contact them if needed.</div>`,
      { merchant, rail: 'crypto' },
    ),
  };
}

export async function renderCryptoCheckout(deps: PageDeps, session: CheckoutSession): Promise<Page> {
  const order = await deps.sessions.orderOf(session);
  let quote = await deps.crypto.quoteOf(session.id);
  const chain = quote ? deps.crypto.chain(quote.chainId) : undefined;
  const payable = deps.sessions.isPayable(session);
  const merchant = await deps.merchants.displayNameOf(session.orgId);
  if (order && order.status !== 'FAILED') return progressPage(session, merchant, order, await deps.crypto.latestTransferOf(session.id), chain);
  if (!payable || !quote) return order ? progressPage(session, merchant, order, undefined, chain) : closedPage(session, merchant);
  if (quote.amountUnits === null) {
    if (!session.customerEmail) return emailPage(session, merchant);
    quote = (await deps.crypto.identifyBuyer(session.id, session.customerEmail, (s) => deps.sessions.isPayable(s)))!;
  }
  return instructionsPage(
    session,
    merchant,
    quote,
    chain,
    order ? 'Your earlier transfer is no longer on the chain (a chain reorganization). If your wallet shows it as dropped, send it again.' : undefined,
  );
}

/** Registered before the card pages: it answers for crypto sessions and passes the rest on. */
export function registerCryptoPages(router: Router, deps: PageDeps, logger: Logger): void {
  const fail = pageFailure(logger);

  router.get('/checkout/:token', async (req: Request<{ token: string }>, res: Response, next: NextFunction) => {
    try {
      const session = await deps.sessions.findByPageToken(req.params.token);
      if (!session || session.provider !== 'CRYPTO') return next();
      sendPage(res, await renderCryptoCheckout(deps, session));
    } catch (err) {
      fail(req, res, err);
    }
  });

  router.post('/checkout/:token/crypto-email', hostedForm({ limit: '4kb', parameterLimit: 5 }), async (req: Request<{ token: string }>, res: Response) => {
    try {
      const session = await deps.sessions.findByPageToken(req.params.token);
      if (!session || session.provider !== 'CRYPTO') return sendPage(res, notFoundPage('This checkout does not exist.'));
      const email = String((req.body as Record<string, unknown> | undefined)?.email ?? '').trim();
      if (!session.customerEmail && deps.sessions.isPayable(session)) {
        if (!EMAIL.test(email) || Buffer.byteLength(email) > 255) return sendPage(res, emailPage(session, await deps.merchants.displayNameOf(session.orgId), 'Enter a valid e-mail address.'));
        await deps.crypto.identifyBuyer(session.id, email, (s) => deps.sessions.isPayable(s));
      }
      // Post/redirect/get: the instructions page can then refresh itself without resubmitting.
      res.redirect(303, `/checkout/${req.params.token}`);
    } catch (err) {
      fail(req, res, err);
    }
  });
}
