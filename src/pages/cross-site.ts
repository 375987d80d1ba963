/**
 * The hosted pages' CSRF defence: a state-changing request (any method but GET/HEAD/OPTIONS) to a
 * hosted form must come from a page of this origin. Browsers say where a request comes from:
 * `Sec-Fetch-Site` on every request of current browsers, `Origin` on every cross-origin POST (and
 * "null" from sandboxed frames, data: URLs, or under Referrer-Policy no-referrer). A request is
 * refused (403 page, before any service is asked) when `Sec-Fetch-Site` is anything but
 * `same-origin` (or `none`: typed by the user), or, from a browser that sends no Sec-Fetch-Site,
 * when its `Origin` is not ours (a sibling subdomain is another site to us). A request carrying
 * neither header is not a browser acting with a buyer's ambient authority (curl, a server-side
 * client) and passes: there is nothing for another site to ride on.
 *
 * "Ours" is the origin of PUBLIC_BASE_URL, or the request's own Host (the pages also work on the
 * address they were reached at, e.g. a loopback port behind no proxy); only the host is compared
 * for the latter, so a TLS-terminating proxy that forwards plain HTTP still matches.
 *
 * The portal's forms also carry a per-session token (src/portal/portal-pages.ts); this check is the
 * one that covers every hosted form, including those with no session (checkout pay, manage page).
 */
import type { NextFunction, Request, Response, Router } from 'express';
import { hostedRoutePattern } from './guard.js';
import { messagePage, sendPage } from './page.js';

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/** Why this request is refused as cross-site; undefined when it may change state. */
export function crossSiteRefusal(req: Pick<Request, 'method' | 'header'>, publicOrigin: string | undefined): string | undefined {
  if (SAFE.has(req.method)) return undefined;
  // The browser's own verdict, which no page can forge (a forbidden header name). It comes first
  // because the pages' Referrer-Policy (no-referrer) makes Chromium send `Origin: null` on their
  // own same-origin form posts.
  const site = req.header('sec-fetch-site');
  if (site !== undefined) return site === 'same-origin' || site === 'none' ? undefined : `sec-fetch-site ${site}`;
  const origin = req.header('origin');
  if (origin === undefined) return undefined;
  if (origin === 'null') return 'opaque origin';
  const claimed = originOf(origin);
  if (claimed === undefined) return 'unreadable origin';
  if (publicOrigin !== undefined && claimed === publicOrigin) return undefined;
  const host = req.header('host');
  if (host !== undefined && new URL(claimed).host === host.toLowerCase()) return undefined;
  return 'foreign origin';
}

/** Before the pages: refuses a cross-site POST to any hosted form under `prefixes`. */
export function refuseCrossSiteForms(router: Router, prefixes: string[], publicBaseUrl: string): void {
  const publicOrigin = originOf(publicBaseUrl);
  router.use(prefixes, (req: Request, res: Response, next: NextFunction) => {
    const refusal = crossSiteRefusal(req, publicOrigin);
    if (refusal === undefined) return next();
    // The route, never the path: its token is a key to the page (a checkout, a portal entry, a manage page).
    req.log?.warn({ refusal, route: hostedRoutePattern(req.baseUrl + req.path) }, 'hosted form refused: sent from another site');
    sendPage(res, messagePage(403, 'Form sent from another site', 'This form was sent from another site, so nothing was changed. Open the page again from the link you were given and send it from there.'));
  });
}
