/**
 * The input guard of the buyer-facing pages (hosted checkout, crypto checkout, payment links and
 * the subscription manage page). Whatever a browser, a crawler or an attacker sends there is
 * answered with a human page and a 4xx before it reaches a service or the database: a token no
 * page can have is 404, a form or query a page cannot read is 400/413/415 naming the problem
 * (forms: src/pages/form.ts). Any other path under a hosted prefix is a 404 page too,
 * and an unexpected failure a 500 page (logged), never the JSON error body of the APIs.
 *
 * Registered around the pages: guardHostedPages() before them, hostedPageFallbacks() after.
 */
import type { NextFunction, Request, Response, Router } from 'express';
import { AppError } from '../kernel/errors.js';
import { statusOf } from '../http/errors.js';
import type { Logger } from '../kernel/logger.js';
import { messagePage, notFoundPage, sendPage, type Page } from './page.js';
import { PageInputError, controlCharacterIn, shownName } from './form.js';

/** Path prefixes of the buyer-facing pages; nothing of the APIs lives under them. */
export const HOSTED_PAGE_PREFIXES = ['/checkout', '/pay', '/subscriptions/manage', '/portal', '/x402/prices'];

/**
 * Prefixes of the hosted pages whose POSTs are a buyer's forms (src/pages/cross-site.ts refuses
 * them from another site). Not the x402 paywall: programs call it, like an API, with a payment header.
 */
export const HOSTED_FORM_PREFIXES = ['/checkout', '/pay', '/subscriptions/manage', '/portal'];

/** Routes whose first segment after the prefix is a page token (or a payment link's token). */
const TOKEN_ROUTES = ['/checkout/:token', '/pay/:token', '/subscriptions/manage/:token', '/portal/enter/:token', '/portal/o/:token', '/portal/orders/:token', '/portal/subscriptions/:token'];

/**
 * The route a hosted path matched, for logs: the page token (a key to a checkout, a portal entry,
 * a long-lived manage page) becomes `:token`, and any other segment that is not a lowercase word
 * of a route becomes `:segment`, so a log line never carries a token (issue 37 §12).
 */
export function hostedRoutePattern(path: string): string {
  const route = TOKEN_ROUTES.map((r) => r.slice(0, -'/:token'.length)).find((prefix) => path.startsWith(`${prefix}/`));
  const rest = route === undefined ? path : path.slice(route.length);
  const segments = rest.split('/').map((segment, i) => (route !== undefined && i === 1 ? ':token' : segment === '' || /^[a-z]+(-[a-z]+)*$/.test(segment) ? segment : ':segment'));
  return `${route ?? ''}${segments.join('/')}`;
}

/**
 * Page, manage and payment-link tokens are 32 base62 characters (randomToken). Any base64url text
 * up to 64 characters passes, so a change of token format stays compatible; anything else (NUL,
 * which PostgreSQL cannot hold, spaces, slashes, non-ASCII, 5000 characters) names no page.
 */
const TOKEN = /^[A-Za-z0-9_-]{1,64}$/;

/** Before the pages: the token every page looks up, and the query string every page gets. */
export function guardHostedPages(router: Router): void {
  router.use(TOKEN_ROUTES, (req: Request, res: Response, next: NextFunction) => {
    if (!TOKEN.test(String(req.params.token))) return sendPage(res, notFoundPage());
    const field = controlCharacterIn(req.query);
    if (field !== undefined) return sendPage(res, messagePage(400, 'Cannot open this page', `The link's parameter "${shownName(field)}" contains a control character.`));
    next();
  });
}

/** The page for what a hosted page's middleware passed on; undefined for a failure of ours. */
function errorPage(err: unknown): { page: Page; headers?: Record<string, string> } | undefined {
  if (err instanceof PageInputError) return { page: messagePage(err.status, err.title, err.message) };
  // The router could not decode a path segment (`%E0%A4%A`): no token is spelled that way.
  if (err instanceof URIError) return { page: notFoundPage() };
  // Refusals of the application (a rate limit, a database that is down) keep their status and headers.
  if (err instanceof AppError && err.code !== 'INTERNAL_ERROR') {
    const status = statusOf(err);
    const title = status === 429 ? 'Too many requests' : status === 404 ? 'Not found' : status >= 500 ? 'Temporarily unavailable' : 'Cannot open this page';
    return { page: messagePage(status, title, status >= 500 ? 'Please try again in a moment.' : err.message), headers: err.options.headers };
  }
  const { status, type } = (err ?? {}) as { status?: unknown; type?: unknown };
  // body-parser's refusals of a form.
  switch (type) {
    case 'parameters.too.many':
      return { page: messagePage(413, 'Cannot send this form', 'The form has more fields than this page takes.') };
    case 'entity.too.large':
      return { page: messagePage(413, 'Cannot send this form', 'The form is larger than this page takes.') };
    case 'charset.unsupported':
    case 'encoding.unsupported':
      return { page: messagePage(415, 'Cannot send this form', 'The form is in an encoding this page cannot read; send it as UTF-8.') };
  }
  if (typeof status === 'number' && status >= 400 && status < 500) return { page: messagePage(status, 'Cannot open this page', 'The request could not be read.') };
  return undefined;
}

/** After the pages: a 404 page for any other path under the hosted prefixes, and the error page. */
export function hostedPageFallbacks(router: Router, logger: Logger): void {
  router.use(HOSTED_PAGE_PREFIXES, (_req: Request, res: Response) => sendPage(res, notFoundPage()));
  router.use(HOSTED_PAGE_PREFIXES, (err: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(err);
    const answer = errorPage(err);
    if (!answer || answer.page.status >= 500) (req.log ?? logger)[answer ? 'warn' : 'error']({ err }, 'hosted page failed');
    for (const [name, value] of Object.entries(answer?.headers ?? {})) res.setHeader(name, value);
    sendPage(res, answer?.page ?? messagePage(500, 'Something went wrong', 'Please try again in a moment.'));
  });
}
