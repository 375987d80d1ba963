/**
 * The console's only way to the server: openapi-fetch clients typed by the generated contract
 * (generated/merchant.ts, generated/console.ts). Same origin, the session cookie rides along;
 * every state-changing request carries the session's CSRF token (docs/accounts.md).
 */
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths as ConsolePaths } from '../../../generated/console';
import type { paths as MerchantPaths } from '../../../generated/merchant';
import { humanErrorMessage } from './error-messages';

let csrfToken: string | undefined;
/** Counts session changes: a 401 to a request sent before the latest sign-in says nothing about the new session. */
let sessionEpoch = 0;
const epochOf = new WeakMap<Request, number>();
/** Set from the session answer (sign-in, GET /v1/console/session); it changes when the session rotates. */
export function setCsrfToken(token: string | undefined): void {
  if (token !== csrfToken) sessionEpoch++;
  csrfToken = token;
}

let onUnauthorized: () => void = () => {};
/** What happens when a request finds no session (expired, signed out elsewhere): the app sends the user to sign in. */
export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

const SAFE = new Set(['GET', 'HEAD']);

const session: Middleware = {
  onRequest({ request }) {
    if (!SAFE.has(request.method) && csrfToken) request.headers.set('X-CSRF-Token', csrfToken);
    epochOf.set(request, sessionEpoch);
    return request;
  },
  onResponse({ response, request }) {
    // A 401 on a sign-in attempt is a wrong password, not an ended session.
    const path = new URL(request.url).pathname;
    if (response.status === 401 && !path.startsWith('/v1/console/sign-in') && epochOf.get(request) === sessionEpoch) onUnauthorized();
    return response;
  },
};

const baseUrl = typeof location === 'undefined' ? 'http://localhost' : location.origin;

export const consoleApi = createClient<ConsolePaths>({ baseUrl, credentials: 'same-origin' });
export const merchantApi = createClient<MerchantPaths>({ baseUrl, credentials: 'same-origin' });
consoleApi.use(session);
merchantApi.use(session);

/** The error envelope's message in words (a validator's text never reaches a page), or what to do when there is none (the network is down). */
export function errorMessage(error: unknown, response?: Response): string {
  const envelope = error as { message?: string; error?: { code?: string; message?: string } } | undefined;
  const message = envelope?.error?.message ?? envelope?.message;
  if (message) return humanErrorMessage(envelope?.error?.code, message);
  if (response) return `The server answered ${response.status}. Try again; if it persists, check the server's log.`;
  return 'The request did not reach the server. Check your connection and try again; nothing was changed.';
}
