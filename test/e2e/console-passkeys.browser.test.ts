/**
 * Passkeys through the console's own pages, in headless Chromium with its virtual authenticator
 * (CDP WebAuthn.enable + addVirtualAuthenticator: CTAP2, internal, resident keys, user
 * verification, presence answered automatically). Served as http://localhost:PORT (an RP ID must
 * be a domain). An owner signs in with the password (keyboard only), adds a passkey in Settings →
 * Security, signs out, signs in with password + passkey, signs out, signs in with the passkey
 * alone, and turns on the organization's requirement; a member without a passkey then gets a
 * restricted session (sent to Security, a banner, other pages closed), adds a passkey, and the
 * restriction is lifted. axe (no serious violations) and screenshots at desktop and 390 px.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, CDPSession, Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { startConsoleHarness, type ConsoleHarness, type Member } from '../harness/console-browser.js';

let h: ConsoleHarness & { newPage(viewport?: { width: number; height: number }): Promise<Page> };

beforeAll(async () => {
  if (!chromiumAvailable) return;
  h = (await startConsoleHarness({ localhost: true })) as typeof h;
}, 180_000);
afterAll(async () => {
  await h?.close();
});

/** A signed-out page whose browser context has a virtual authenticator of its own. */
async function pageWithAuthenticator(): Promise<{ page: Page; cdp: CDPSession; authenticatorId: string }> {
  const page = await h.newPage();
  const cdp = await (page.context() as BrowserContext).newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
  return { page, cdp, authenticatorId };
}

async function signOut(page: Page) {
  await page.getByRole('button', { name: 'Sign out', exact: true }).click();
  await page.waitForURL(/\/console\/sign-in/);
}

async function passwordStep(page: Page, who: Member) {
  await page.goto(`${h.origin}/console/sign-in`);
  await page.getByLabel('E-mail address').fill(who.email);
  await page.getByLabel('Password').fill(who.password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
}

async function addPasskey(page: Page, name: string) {
  await page.getByLabel('Name (optional)').fill(name);
  await page.getByRole('button', { name: 'Add a passkey' }).click();
  await page.getByRole('cell', { name, exact: true }).waitFor();
}

describe.skipIf(!chromiumAvailable)(skippedUnless('console passkeys in Chromium with its virtual authenticator', 'chromium'), () => {
  it('owner: password (keyboard only) → add a passkey → password + passkey → passkey alone → require a second factor', async () => {
    const owner = await h.member('owner', 'passkey-owner@console.test');
    const member = await h.member('developer', 'passkey-dev@console.test');
    const { page, cdp, authenticatorId } = await pageWithAuthenticator();

    // Keyboard only: the e-mail field, Tab to the password, Enter submits.
    await page.goto(`${h.origin}/console/sign-in`);
    expect(await page.evaluate('window.isSecureContext')).toBe(true);
    await page.getByLabel('E-mail address').focus();
    await page.keyboard.type(owner.email);
    await page.keyboard.press('Tab');
    await page.keyboard.type(owner.password);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${h.origin}/console/`);

    await page.goto(`${h.origin}/console/settings/security`);
    await page.getByRole('heading', { name: 'Security', level: 1 }).waitFor();
    await page.getByText('No passkey yet.').waitFor();
    // Keyboard only again: the name field, Tab to "Add a passkey", Enter.
    await page.getByLabel('Name (optional)').focus();
    await page.keyboard.type('Work laptop');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('cell', { name: 'Work laptop', exact: true }).waitFor();
    expect((await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials).toHaveLength(1);
    await h.check(page, 'security-owner');

    // Password, then the passkey (the 202 step runs the authenticator), signed in.
    await signOut(page);
    await h.check(page, 'sign-in');
    await passwordStep(page, owner);
    await page.waitForURL(`${h.origin}/console/`);
    await page.getByRole('heading', { name: 'Home', level: 1 }).waitFor();

    // The passkey alone.
    await signOut(page);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.waitForURL(`${h.origin}/console/`);
    await page.getByRole('heading', { name: 'Home', level: 1 }).waitFor();

    // The requirement: on, with the member listed as without a passkey.
    await page.goto(`${h.origin}/console/settings/security`);
    const toggle = page.getByRole('switch', { name: /Require a passkey of every member/ });
    await expect.poll(() => toggle.isChecked()).toBe(false);
    await toggle.click();
    await expect.poll(() => toggle.isChecked()).toBe(true);
    await page.getByRole('listitem').filter({ hasText: member.email }).waitFor();
    await h.check(page, 'security-owner-required');

    // The last passkey stays while the organization requires one: the dialog shows the 409.
    await page.getByRole('button', { name: 'Remove Work laptop' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Remove passkey' }).click();
    await page.getByRole('dialog').getByText(/requires a second factor/).waitFor();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    expect(h.pageErrors).toEqual([]);
  }, 180_000);

  it('member without a passkey: a restricted session, the banner, other pages closed; a passkey lifts it', async () => {
    const member = await h.member('developer', 'passkey-dev@console.test');
    const { page } = await pageWithAuthenticator();
    await passwordStep(page, member);
    await page.waitForURL(`${h.origin}/console/settings/security`);
    const banner = page.getByRole('alert').filter({ hasText: 'Add a passkey to continue' });
    await banner.waitFor();
    await h.check(page, 'security-restricted');

    // Another page sends it back.
    await page.goto(`${h.origin}/console/orders`);
    await page.waitForURL(`${h.origin}/console/settings/security`);
    await banner.waitFor();

    await addPasskey(page, 'Phone');
    await banner.waitFor({ state: 'detached' });
    await page.goto(`${h.origin}/console/orders`);
    await page.getByRole('heading', { name: 'Orders', level: 1 }).waitFor();
    expect(page.url()).toBe(`${h.origin}/console/orders`);
    expect(h.pageErrors).toEqual([]);
  }, 180_000);
});
