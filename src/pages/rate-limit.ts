/**
 * Per-client rate limits of the hosted pages (anyone can reach them, no key to count on): every
 * request per client address, and more tightly the ones that open or change something — opening
 * a payment link (a new checkout session), the crypto e-mail step (reserves an exact amount), a
 * card payment attempt, a subscription cancellation, an x402 payment to a paywall. Over a limit
 * the buyer gets a 429 page.
 */
import type { NextFunction, Request, Response, Router } from 'express';
import type { Clock } from '../kernel/clock.js';
import { FixedWindowRateLimiter, clientAddressKey } from '../http/rate-limit.js';
import { retryLaterPage, sendPage } from './page.js';

const HOSTED_PATH = /^\/(checkout|pay|subscriptions\/manage|x402\/prices|portal)(\/|$)/;

/** GET (and HEAD) of /pay/… opens a checkout session: a write, like every form post. */
const isWrite = (req: Request) => req.path.startsWith('/pay/') || (req.method !== 'GET' && req.method !== 'HEAD') || req.header('payment-signature') !== undefined;

export function registerHostedRateLimits(router: Router, limits: { perMinute: number; writesPerMinute: number }, clock: Clock): void {
  const requests = new FixedWindowRateLimiter(limits.perMinute, 60_000, clock, 'your network address');
  const writes = new FixedWindowRateLimiter(limits.writesPerMinute, 60_000, clock, 'your network address');
  router.use((req: Request, res: Response, next: NextFunction) => {
    if (!HOSTED_PATH.test(req.path)) return next();
    const client = clientAddressKey(req.ip);
    try {
      requests.hit(client);
      if (isWrite(req)) writes.hit(client);
    } catch (err) {
      const page = retryLaterPage(err);
      if (!page) return next(err);
      return sendPage(res, page);
    }
    next();
  });
}
