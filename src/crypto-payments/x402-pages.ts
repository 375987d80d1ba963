/**
 * The public URL of Kassa's x402 paywalls, `{base_url}/x402/prices/{id}` (see X402PaywallService):
 * x402 v2 over HTTP headers (`PAYMENT-REQUIRED`, `PAYMENT-SIGNATURE`, `PAYMENT-RESPONSE`) for
 * machines, a short page for a person who opens it in a browser. Never a 500 for what a client
 * sends: an id no price can have is 404, an undecodable payment header a 402 naming it.
 */
import type { Request, Response, Router } from 'express';
import { decodePaymentSignatureHeader, encodePaymentRequiredHeader, encodePaymentResponseHeader } from '@x402/core/http';
import { AppError } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import { escapeHtml, layout, messagePage, pageFailure, sendPage } from '../pages/page.js';
import type { PaywallAnswer, X402PaywallService } from './x402-paywall.service.js';
import { X402_REASONS } from './x402-reasons.js';

export const PAYWALL_PATH_PREFIX = '/x402/prices/';
/** Price ids are `PRC_` and base62; anything else names no paywall. */
const PRICE_ID = /^PRC_[A-Za-z0-9]{1,60}$/;

/** A browser (it asks for HTML) gets a page; every other client the JSON body. */
const wantsHtml = (req: Request) => req.accepts(['application/json', 'text/html']) === 'text/html' && !req.header('payment-signature');

type Header = Parameters<typeof encodePaymentRequiredHeader>[0];
type SettleHeader = Parameters<typeof encodePaymentResponseHeader>[0];

function send(req: Request, res: Response, answer: PaywallAnswer): void {
  res.set('Cache-Control', 'no-store');
  switch (answer.kind) {
    case 'not_found':
    case 'gone': {
      const status = answer.kind === 'gone' ? 410 : 404;
      if (wantsHtml(req)) return sendPage(res, messagePage(status, status === 410 ? 'No longer sold' : 'Not found', answer.message));
      res.status(status).json({ success: false, message: answer.message, error: { code: 'NOT_FOUND', message: answer.message } });
      return;
    }
    case 'payment_required': {
      res.set('PAYMENT-REQUIRED', encodePaymentRequiredHeader(answer.paymentRequired as unknown as Header));
      if (answer.settlement) res.set('PAYMENT-RESPONSE', encodePaymentResponseHeader(answer.settlement as unknown as SettleHeader));
      if (wantsHtml(req)) {
        return sendPage(res, {
          status: 402,
          html: layout(
            'Payment required',
            `<h1>${escapeHtml(answer.productName)}</h1><div class="note" data-testid="status">This resource is sold per request to x402 clients (for example an AI agent with a wallet): the payment terms are in this answer's PAYMENT-REQUIRED header.</div>`,
          ),
        });
      }
      res.status(402).json(answer.paymentRequired);
      return;
    }
    case 'redirect':
      res.set('PAYMENT-RESPONSE', encodePaymentResponseHeader(answer.settlement as unknown as SettleHeader));
      res.redirect(303, answer.location);
      return;
    case 'receipt':
      res.set('PAYMENT-RESPONSE', encodePaymentResponseHeader(answer.settlement as unknown as SettleHeader));
      res.status(200).set(answer.headers).type('application/json').send(answer.body);
      return;
  }
}

export function registerX402Pages(router: Router, paywalls: X402PaywallService, logger: Logger): void {
  const fail = pageFailure(logger, 'Cannot open this resource');
  router.get(`${PAYWALL_PATH_PREFIX}:id`, async (req: Request<{ id: string }>, res: Response) => {
    try {
      const id = req.params.id;
      if (!PRICE_ID.test(id)) return send(req, res, { kind: 'not_found', message: 'No x402 resource is sold at this address.' });
      // HEAD has no body to carry the receipt: it gets the terms, and a payment is never settled for it.
      const header = req.method === 'HEAD' ? undefined : req.header('payment-signature');
      let payment: Parameters<X402PaywallService['answer']>[1];
      let paymentError: string | undefined;
      if (header) {
        try {
          payment = decodePaymentSignatureHeader(header) as unknown as typeof payment;
          // Only the outer shape here; every field inside is checked by the facilitator's verification.
          if (payment === null || typeof payment !== 'object' || Array.isArray(payment)) throw new Error('not a payment payload');
        } catch {
          payment = undefined;
          paymentError = X402_REASONS.payload;
        }
      }
      send(req, res, await paywalls.answer(id, payment, paymentError));
    } catch (err) {
      // The chain's node unreachable (503, Retry-After): an x402 client gets the envelope, a browser the page.
      if (err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE' && !wantsHtml(req)) {
        logger.warn({ err }, 'x402 paywall unavailable');
        res.status(503).set({ 'Cache-Control': 'no-store', ...err.options.headers }).json({ success: false, message: err.message, error: { code: err.code, message: err.message } });
        return;
      }
      fail(req, res, err);
    }
  });
}
