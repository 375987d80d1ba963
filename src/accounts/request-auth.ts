/**
 * The console session at the HTTP edge: the cookie, the `ConsoleSession` authenticator (the same
 * kind of principal as an API key, for console and merchant operations alike) and the CSRF
 * checks of every state-changing request (Origin / Sec-Fetch-Site, and `X-CSRF-Token`).
 */
import type { Request } from 'express';
import { credentialsAbsent, type Authenticator } from '../http/openapi-app.js';
import { AppError, forbidden, unauthorized } from '../kernel/errors.js';
import { constantTimeEqual } from '../kernel/secrets.js';
import { SESSION_ABSOLUTE_MS, csrfTokenOf, type AccountService, type SessionAuth } from './accounts.service.js';

export const SESSION_COOKIE = '__Host-kassa_session';
export const CSRF_HEADER = 'x-csrf-token';
const SAFE_METHODS = new Set(['GET', 'HEAD']);

/** Where the console is served, and whether its cookie says `Secure` (always: see consoleOrigin). */
export interface ConsoleOrigin {
  origin: string;
  secureCookie: boolean;
}

/**
 * The console's origin. Its cookie is always `Secure`: a `__Host-` cookie without `Secure` is
 * refused by every browser, and browsers keep `Secure` cookies of http://localhost (a secure
 * context), so `Secure` costs plain-http loopback development nothing
 * (test/e2e/passkeys.browser.test.ts signs in on http://localhost).
 */
export function consoleOrigin(publicBaseUrl: string): ConsoleOrigin {
  return { origin: new URL(publicBaseUrl).origin, secureCookie: true };
}

/** The value of one cookie of the request (the first of that name), undefined when absent. */
export function readCookie(req: Request, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export function sessionCookie(token: string, where: ConsoleOrigin): string {
  return `${SESSION_COOKIE}=${token}; Path=/; Max-Age=${SESSION_ABSOLUTE_MS / 1000}; HttpOnly; SameSite=Lax${where.secureCookie ? '; Secure' : ''}`;
}

export function clearedSessionCookie(where: ConsoleOrigin): string {
  return `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax${where.secureCookie ? '; Secure' : ''}`;
}

/**
 * The request came from the console's own origin: a browser names the origin of every
 * cross-origin request (and of same-origin POSTs) in `Origin`, and newer ones say in
 * `Sec-Fetch-Site` where a request without it came from. Non-browser clients send neither.
 */
export function checkOrigin(req: Request, where: ConsoleOrigin): void {
  const origin = req.header('origin');
  if (origin !== undefined) {
    if (origin !== where.origin) throw forbidden('Cross-origin request refused: the console only accepts requests from its own origin');
    return;
  }
  const site = req.header('sec-fetch-site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none') throw forbidden('Cross-site request refused: the console only accepts requests from its own origin');
}

/**
 * The session of a request to an operation that also serves visitors without one (accepting an
 * invite): undefined without a cookie or with one that no longer works; a live session must pass
 * the CSRF check like any state-changing request (the origin is the caller's to check).
 */
export async function optionalSession(req: Request, accounts: AccountService, where: ConsoleOrigin): Promise<SessionAuth | undefined> {
  const token = readCookie(req, SESSION_COOKIE);
  if (token === undefined) return undefined;
  let auth: SessionAuth;
  try {
    auth = await accounts.authenticateSession(token, undefined, { secondFactorSetup: true });
  } catch (error) {
    if (error instanceof AppError && error.code === 'UNAUTHORIZED') return undefined;
    throw error;
  }
  checkOrigin(req, where);
  const presented = req.header(CSRF_HEADER);
  if (!presented || !constantTimeEqual(presented, csrfTokenOf(token))) throw forbidden('Missing or invalid X-CSRF-Token: send the csrfToken of GET /v1/console/session');
  return auth;
}

/**
 * `ConsoleSession`: resolves the cookie (the operation's `x-permission` against the member's
 * role), then, for a state-changing request, the origin and the CSRF token. A rotated session's
 * new cookie is set on the answer.
 */
export function createSessionAuthenticator(accounts: AccountService, where: ConsoleOrigin): Authenticator {
  return async (req, op) => {
    const token = readCookie(req, SESSION_COOKIE);
    if (token === undefined) throw credentialsAbsent(unauthorized());
    const auth: SessionAuth = await accounts.authenticateSession(token, op.operation['x-permission'] as string | undefined, {
      // Operations a restricted session (second factor required, no passkey yet) may still call.
      secondFactorSetup: op.operation['x-second-factor-setup'] === true,
    });
    if (!SAFE_METHODS.has(req.method)) {
      checkOrigin(req, where);
      const presented = req.header(CSRF_HEADER);
      // The token of the cookie this request carried (a request that rotated the session was sent with the old one).
      if (!presented || !constantTimeEqual(presented, csrfTokenOf(token))) throw forbidden('Missing or invalid X-CSRF-Token: send the csrfToken of GET /v1/console/session');
    }
    if (auth.rotatedToken) req.res?.append('Set-Cookie', sessionCookie(auth.rotatedToken, where));
    return auth;
  };
}
