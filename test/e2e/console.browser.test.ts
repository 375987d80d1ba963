/**
 * The browser console (issue 30), phase 1: served under /console/ with fingerprinted assets and a
 * strict CSP, deep links, sign-in with a password and with the one-time link `npm start`
 * prints, the navigation by keyboard alone, the home page at desktop and 390 px, axe-core clean.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { startConsoleHarness, type ConsoleHarness, DESKTOP } from '../harness/console-browser.js';

let h: ConsoleHarness & { newPage(viewport?: { width: number; height: number }): Promise<Page> };

describe.skipIf(!chromiumAvailable)(skippedUnless('console: frame, sign-in, navigation', 'chromium'), () => {
  beforeAll(async () => {
    h = (await startConsoleHarness()) as typeof h;
  });
  afterAll(async () => {
    await h?.close();
  });

  it('serves index.html for every console path (no-cache, strict CSP) and hashed assets as immutable', async () => {
    const index = await fetch(`${h.origin}/console/orders/ORD_x?status=paid`);
    expect(index.status).toBe(200);
    expect(index.headers.get('cache-control')).toBe('no-cache');
    const csp = index.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    const html = await index.text();
    const script = /src="(\/console\/assets\/main-[A-Z0-9]+\.js)"/.exec(html)?.[1];
    const style = /href="(\/console\/assets\/main-[A-Z0-9]+\.css)"/.exec(html)?.[1];
    expect(script && style).toBeTruthy();
    expect(html).not.toMatch(/<script>(?!<\/script>)/);
    const asset = await fetch(`${h.origin}${script}`);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(asset.headers.get('content-type')).toContain('text/javascript');
    expect((await fetch(`${h.origin}${style}`)).headers.get('content-type')).toContain('text/css');
    expect((await fetch(`${h.origin}/console/assets/main-NOPE.js`)).status).toBe(404);
    expect((await fetch(`${h.origin}/console/assets/..%2F..%2Fpackage.json`)).status).toBe(404);
    // The session cookie is Secure on a plain-http loopback origin too: a __Host- cookie without it is
    // dropped by Chromium (on main it was left out there, and every page after sign-in bounced back).
    const who = await h.member('developer');
    const signIn = await fetch(`${h.origin}/v1/console/sign-in`, { method: 'POST', headers: { 'Content-Type': 'application/json', Origin: h.origin }, body: JSON.stringify({ email: who.email, password: who.password }) });
    expect(signIn.status).toBe(200);
    expect(signIn.headers.get('set-cookie')).toMatch(/^__Host-kassa_session=kss_[^;]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax; Secure$/);
    const bare = await fetch(`${h.origin}/console`, { redirect: 'manual' });
    expect(bare.status).toBe(301);
    expect(bare.headers.get('location')).toBe('/console/');
  });

  it('a signed-out visitor is sent to sign-in and back to the page asked for; a wrong password says so and keeps the address', async () => {
    const who = await h.member('owner');
    const page = await h.newPage();
    await page.goto(`${h.origin}/console/customers?x=1`);
    await page.waitForURL(/\/console\/sign-in\?next=/);
    await h.check(page, 'sign-in');
    await page.getByLabel('E-mail address').fill(who.email);
    await page.getByLabel('Password').fill('not the password at all');
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/password/i);
    expect(await page.getByLabel('E-mail address').inputValue()).toBe(who.email);
    await page.getByLabel('Password').fill(who.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.waitForURL(`${h.origin}/console/customers?x=1`);
    await page.getByRole('heading', { name: 'Customers', level: 1 }).waitFor();
  });

  it('the sign-in link npm start prints signs in once, and leaves the address bar without the token', async () => {
    const owner = await h.member('owner');
    const { url } = await h.ctx.services.modules.accounts.accounts.createSignInLink(h.ctx.orgA.orgId, owner.userId);
    const link = new URL(url);
    const page = await h.newPage();
    await page.goto(`${h.origin}${link.pathname}${link.hash}`);
    await page.waitForURL(`${h.origin}/console/`);
    await page.getByRole('heading', { name: 'Home', level: 1 }).waitFor();
    expect(page.url()).not.toContain('token');
    const again = await h.newPage();
    await again.goto(`${h.origin}${link.pathname}${link.hash}`);
    await expect.poll(() => again.getByRole('alert').textContent()).toMatch(/works once/);
    await h.check(again, 'sign-in-link-spent');
  });

  it('home at desktop and 390 px; every navigation link reached and followed by keyboard alone', async () => {
    const page = await h.signedInPage('owner');
    await h.check(page, 'home');
    const labels = ['Orders', 'Subscriptions', 'Customers', 'Catalog', 'Developers', 'Agent wallets', 'Telemetry', 'Settings', 'Home'];
    for (const label of labels) {
      await page.keyboard.press('Escape');
      // From the top of the document: the skip link, the brand, then the navigation.
      await page.evaluate('document.activeElement?.blur(); window.scrollTo(0, 0)');
      let reached = false;
      for (let i = 0; i < 30 && !reached; i++) {
        await page.keyboard.press('Tab');
        reached = (await page.evaluate(`document.activeElement?.closest('nav') !== null && document.activeElement?.textContent === ${JSON.stringify(label)}`)) as boolean;
      }
      expect(reached, `${label} reachable with Tab`).toBe(true);
      const outline = (await page.evaluate('getComputedStyle(document.activeElement).outlineStyle')) as string;
      expect(outline, `${label}: visible focus`).not.toBe('none');
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { name: label === 'Agent wallets' ? 'Agent wallets' : label, level: 1 }).waitFor();
      expect(await page.locator('nav#nav a[aria-current=page]').textContent()).toBe(label);
    }
    expect(h.pageErrors).toEqual([]);
  });

  it('at 390 px the navigation folds behind a Menu button that opens it', async () => {
    const page = await h.signedInPage('viewer', { width: 390, height: 844 });
    expect(await page.locator('nav#nav').isVisible()).toBe(false);
    await page.getByRole('button', { name: 'Menu' }).click();
    await page.getByRole('link', { name: 'Orders' }).click();
    await page.getByRole('heading', { name: 'Orders', level: 1 }).waitFor();
    expect(await page.locator('nav#nav').isVisible()).toBe(false);
    await page.setViewportSize(DESKTOP);
  });
});
