/**
 * Passkeys in a real browser: headless Chromium with its virtual authenticator (CDP
 * `WebAuthn.enable` + `WebAuthn.addVirtualAuthenticator`: CTAP2, internal, resident keys, user
 * verification), on the merchant listener's own origin. The console's pages are not built here:
 * the test serves one bare page of its own on that origin, and runs the console API calls in it
 * with `page.evaluate` — accept an invite, register a passkey (`navigator.credentials.create`),
 * sign out, sign in without a password (`navigator.credentials.get`, discoverable credential),
 * and sign in with the password then the passkey.
 *
 * The listener is reached as http://localhost:PORT: WebAuthn needs a secure context and an RP ID
 * that is a domain (not an IP address); localhost is both.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, CDPSession, Page } from 'playwright-core';
import { chromiumAvailable, launchChromium, serveOnLoopback } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { PASSWORD, linkToken, uniqueEmail } from '../accounts/helpers.js';

const TEST_PAGE = '/__passkey-test';

let ctx: TestContext;
let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let origin: string;
let browser: Browser;
let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end();

/** The console API as the page's JavaScript calls it (same origin; the session cookie rides along). */
const PAGE_SCRIPT = `
window.api = async (method, path, body) => {
  const headers = { 'Content-Type': 'application/json' };
  if (method !== 'GET' && window.csrf) headers['X-CSRF-Token'] = window.csrf;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  const json = res.status === 204 ? null : await res.json();
  if (json && json.data && json.data.csrfToken) window.csrf = json.data.csrfToken;
  return { status: res.status, body: json };
};
window.createPasskey = async (name) => {
  const options = await api('POST', '/v1/console/passkeys/registration-options');
  if (options.status !== 200) return options;
  const credential = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options.body.data.publicKey) });
  return api('POST', '/v1/console/passkeys', { challengeId: options.body.data.challengeId, name, credential: credential.toJSON() });
};
window.getAssertion = async (publicKey) => {
  const credential = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(publicKey) });
  return credential.toJSON();
};
window.passkeySignIn = async () => {
  const options = await api('POST', '/v1/console/passkeys/sign-in-options');
  if (options.status !== 200) return options;
  return api('POST', '/v1/console/passkeys/sign-in', { challengeId: options.body.data.challengeId, credential: await getAssertion(options.body.data.publicKey) });
};
window.passwordThenPasskey = async (email, password) => {
  const first = await api('POST', '/v1/console/sign-in', { email, password });
  if (first.status !== 202) return { step: 'password', ...first };
  return api('POST', '/v1/console/sign-in/second-factor', { challengeId: first.body.data.challengeId, credential: await getAssertion(first.body.data.publicKey) });
};
`;

beforeAll(async () => {
  if (!chromiumAvailable) return;
  // The listener first (its port is the origin), then the apps configured with that origin.
  served = await serveOnLoopback((req, res) => handler(req, res));
  origin = served.origin.replace('127.0.0.1', 'localhost');
  ctx = await createTestContext({ env: { PUBLIC_BASE_URL: origin } });
  handler = (req, res) => {
    if (req.url === TEST_PAGE) {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Passkey test</title><script>${PAGE_SCRIPT}</script></head><body><h1>Passkey test page</h1></body></html>`);
      return;
    }
    ctx.apps.merchant(req as never, res as never);
  };
  browser = await launchChromium();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await served?.close();
  await ctx?.close();
});

async function openWithAuthenticator(context: BrowserContext): Promise<{ page: Page; cdp: CDPSession; authenticatorId: string }> {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
  await page.goto(`${origin}${TEST_PAGE}`);
  return { page, cdp, authenticatorId };
}

describe.skipIf(!chromiumAvailable)(skippedUnless('passkeys in Chromium with its virtual authenticator', 'chromium'), () => {
  it('a member registers a passkey, signs out, signs in with it alone, then with password + passkey', async () => {
    const email = uniqueEmail('browser-passkey');
    const invite = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites`).send({ email, role: 'developer' });
    expect(invite.status).toBe(201);
    const context = await browser.newContext();
    try {
      const { page, cdp, authenticatorId } = await openWithAuthenticator(context);
      expect(await page.evaluate('window.isSecureContext')).toBe(true);

      const accepted = (await page.evaluate(`api('POST', '/v1/console/invites/accept', ${JSON.stringify({ token: linkToken(invite.body.data.url), password: PASSWORD })})`)) as { status: number };
      expect(accepted.status).toBe(200);
      const cookies = await context.cookies(origin);
      expect(cookies.map((c) => c.name), 'the browser kept the session cookie').toContain('__Host-kassa_session');

      const created = (await page.evaluate(`createPasskey('Virtual authenticator')`)) as { status: number; body: { data: { passkeyId: string; name: string } } };
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      expect(created.body.data.name).toBe('Virtual authenticator');
      const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
      expect(credentials).toHaveLength(1);
      expect(credentials[0]!.isResidentCredential).toBe(true);
      expect(credentials[0]!.rpId).toBe('localhost');

      expect(((await page.evaluate(`api('POST', '/v1/console/sign-out')`)) as { status: number }).status).toBe(204);
      expect(((await page.evaluate(`api('GET', '/v1/console/session')`)) as { body: { data: unknown } }).body.data).toEqual({ signedIn: false });

      const passwordless = (await page.evaluate('passkeySignIn()')) as { status: number; body: { data: { user: { email: string }; secondFactor: { enrolled: boolean } } } };
      expect(passwordless.status, JSON.stringify(passwordless.body)).toBe(200);
      expect(passwordless.body.data.user.email).toBe(email);
      expect(((await page.evaluate(`api('GET', '/v1/console/passkeys')`)) as { body: { data: Array<{ lastUsedAt: string | null }> } }).body.data[0]!.lastUsedAt).not.toBeNull();
      const signCountAfterFirst = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials[0]!.signCount;

      expect(((await page.evaluate(`api('POST', '/v1/console/sign-out')`)) as { status: number }).status).toBe(204);
      const twoStep = (await page.evaluate(`passwordThenPasskey(${JSON.stringify(email)}, ${JSON.stringify(PASSWORD)})`)) as { status: number; body: unknown };
      expect(twoStep.status, JSON.stringify(twoStep.body)).toBe(200);
      expect(((await page.evaluate(`api('GET', '/v1/console/session')`)) as { status: number }).status).toBe(200);
      // The authenticator's counter moved, and the server accepted it moving.
      expect((await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials[0]!.signCount).toBeGreaterThan(signCountAfterFirst);
    } finally {
      await context.close();
    }
  }, 120_000);

  it('a browser profile without the passkey has nothing to offer to a passwordless sign-in (NotAllowedError)', async () => {
    const context = await browser.newContext();
    try {
      const { page } = await openWithAuthenticator(context);
      // An empty authenticator: the browser has nothing to offer; the API never saw an assertion.
      const result = await page.evaluate(`(async () => {
        const options = await api('POST', '/v1/console/passkeys/sign-in-options');
        const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options.body.data.publicKey);
        publicKey.timeout = 2000;
        try { await navigator.credentials.get({ publicKey }); return 'got one'; } catch (e) { return e.name; }
      })()`);
      expect(result).toBe('NotAllowedError');
    } finally {
      await context.close();
    }
  }, 60_000);
});
