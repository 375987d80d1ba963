/**
 * The console's pages over what the API has (issue 30): home in the organization's time zone (set
 * in Settings by an owner, not by a viewer), orders (filters in the URL, keyset paging, search by
 * id, reference and transaction hash, detail with timeline, processor links and its webhook
 * deliveries), subscriptions, customers, API keys
 * (created once with a copy button, revoked and then refused), webhook endpoints (a refused URL
 * keeps the form's input), members, invites, the audit log and signing out everywhere; a viewer's
 * limits. Every page: axe-core with no serious violation, no horizontal overflow, screenshots at
 * desktop and 390 px.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { tabTo } from '../harness/accessibility.js';
import { seedCommerce, startConsoleHarness, type ConsoleHarness, type SeededCommerce } from '../harness/console-browser.js';

let h: ConsoleHarness & { newPage(viewport?: { width: number; height: number }): Promise<Page> };
let seeded: SeededCommerce;
let owner: Page;

const heading = (page: Page, name: string | RegExp) => page.getByRole('heading', { name, level: 1 }).waitFor();

describe.skipIf(!chromiumAvailable)(skippedUnless('console pages', 'chromium'), () => {
  beforeAll(async () => {
    h = (await startConsoleHarness()) as typeof h;
    seeded = await seedCommerce(h.ctx, h.ctx.orgA.orgId, 30);
    owner = await h.signedInPage('owner');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('home shows today against yesterday and the series of the seeded orders', async () => {
    await owner.goto(`${h.origin}/console/?range=7d`);
    await heading(owner, 'Home');
    await owner.getByRole('heading', { name: 'USD', level: 3, exact: true }).waitFor();
    await owner.locator('.chart canvas').first().waitFor();
    // An organization's time zone is UTC until an owner changes it; the page says so.
    await owner.getByText("Times in UTC, the organization's time zone").waitFor();
    await h.check(owner, 'home-data');
  });

  it('orders: list, filter by status into the URL, keyset paging, search by id and reference', async () => {
    await owner.goto(`${h.origin}/console/orders`);
    await heading(owner, 'Orders');
    await owner.locator('tbody tr').first().waitFor();
    expect(await owner.locator('tbody tr').count()).toBe(25);
    await h.check(owner, 'orders');
    await owner.getByRole('link', { name: 'Older →' }).click();
    await owner.waitForURL(/starting_after=ORD_/);
    await expect.poll(() => owner.locator('tbody tr').count()).toBe(5);
    await owner.getByRole('link', { name: '← Newer' }).click();
    await owner.waitForURL(/ending_before=ORD_/);
    await expect.poll(() => owner.locator('tbody tr').count()).toBe(25);
    await owner.goto(`${h.origin}/console/orders`);
    await owner.getByText('Filters', { exact: true }).click();
    await owner.getByLabel('Status').selectOption('failed');
    await owner.getByRole('button', { name: 'Apply' }).click();
    await owner.waitForURL(/status=failed/);
    await expect.poll(() => owner.locator('tbody tr').count()).toBe(4);
    // A deep link with the filter loads the same list.
    const other = await h.newPage();
    await h.signIn(other, await h.member('owner'));
    await other.goto(`${h.origin}/console/orders?status=failed`);
    await expect.poll(() => other.locator('tbody tr').count()).toBe(4);
    await owner.getByRole('searchbox', { name: 'Search' }).fill('invoice-1005');
    await owner.getByRole('button', { name: 'Search' }).click();
    await owner.waitForURL(/merchant_reference=invoice-1005/);
    await expect.poll(() => owner.locator('tbody tr').count()).toBe(1);
    await owner.getByRole('searchbox', { name: 'Search' }).fill(seeded.cryptoOrderId);
    await owner.getByRole('button', { name: 'Search' }).click();
    await heading(owner, `Order ${seeded.cryptoOrderId}`);
  });

  it('orders: a transaction hash in the search box filters by tx_hash (keyboard; any case), a deep link too', async () => {
    const hash = `0x${'4e3a'.repeat(16)}`;
    await owner.goto(`${h.origin}/console/orders`);
    await owner.locator('tbody tr').first().waitFor();
    // Keyboard only: Tab to the search box, type, Enter.
    await tabTo(owner, 'input[name="q"]', 80);
    await owner.keyboard.type(hash.toUpperCase().replace('0X', '0x'));
    await owner.keyboard.press('Enter');
    await owner.waitForURL(/tx_hash=0x4E3A/);
    await expect.poll(() => owner.locator('tbody tr').count()).toBe(1);
    expect(await owner.getByRole('link', { name: seeded.cryptoOrderId }).count()).toBe(1);
    expect(await owner.getByLabel('Transaction').inputValue()).toBe(hash.toUpperCase().replace('0X', '0x'));
    await h.check(owner, 'orders-tx-hash');
    // The mouse opens the order.
    await owner.getByRole('link', { name: seeded.cryptoOrderId }).click();
    await heading(owner, `Order ${seeded.cryptoOrderId}`);
    // A deep link, combined with another filter; an unknown hash lists nothing.
    const other = await h.newPage();
    await h.signIn(other, await h.member('owner'));
    await other.goto(`${h.origin}/console/orders?tx_hash=${hash}&status=paid`);
    await expect.poll(() => other.locator('tbody tr').count()).toBe(1);
    await other.goto(`${h.origin}/console/orders?tx_hash=0x${'f'.repeat(64)}`);
    await other.getByText('No orders match.').waitFor();
  });

  it('order detail: timeline, customer, processor ids linked to Stripe and the block explorer', async () => {
    await owner.goto(`${h.origin}/console/orders/${seeded.cryptoOrderId}`);
    await heading(owner, `Order ${seeded.cryptoOrderId}`);
    const tx = owner.getByRole('link', { name: /0x4e3a/ });
    expect(await tx.getAttribute('href')).toBe(`https://basescan.org/tx/0x${'4e3a'.repeat(16)}`);
    expect(await owner.getByText('25.00 USDC').first().isVisible()).toBe(true);
    // No endpoint was ever sent an event about it: the deliveries section says so.
    await owner.getByRole('heading', { name: 'Webhook deliveries', level: 2 }).waitFor();
    await owner.getByText('No webhook deliveries for this order yet').waitFor();
    expect(await owner.getByRole('link', { name: 'This order in the delivery log →' }).getAttribute('href')).toBe(`/console/developers/deliveries?order_id=${seeded.cryptoOrderId}`);
    await h.check(owner, 'order-crypto');
    await owner.goto(`${h.origin}/console/orders/${seeded.cardOrderId}`);
    await heading(owner, `Order ${seeded.cardOrderId}`);
    expect(await owner.getByRole('link', { name: /pi_console0/ }).getAttribute('href')).toBe('https://dashboard.stripe.com/payments/pi_console0');
    await owner.getByRole('listitem').filter({ hasText: 'Paid $10.00' }).waitFor();
    await h.check(owner, 'order-card');
    await owner.getByRole('link', { name: seeded.customers[0]!.email }).click();
    await heading(owner, seeded.customers[0]!.email);
  });

  it('customers and subscriptions: lists and details', async () => {
    await owner.goto(`${h.origin}/console/customers/${seeded.customers[0]!.id}`);
    await heading(owner, seeded.customers[0]!.email);
    await owner.getByRole('link', { name: seeded.subscriptionId }).waitFor();
    await h.check(owner, 'customer');
    await owner.goto(`${h.origin}/console/customers`);
    await expect.poll(() => owner.locator('tbody tr').count()).toBeGreaterThanOrEqual(3);
    await h.check(owner, 'customers');
    await owner.goto(`${h.origin}/console/subscriptions`);
    await owner.getByRole('link', { name: seeded.subscriptionId }).click();
    await heading(owner, `Subscription ${seeded.subscriptionId}`);
    await owner.getByRole('link', { name: seeded.cardOrderId }).waitFor();
    await h.check(owner, 'subscription');
    await owner.goto(`${h.origin}/console/subscriptions`);
    await owner.locator('tbody tr').first().waitFor();
    await h.check(owner, 'subscriptions');
  });

  it('API keys: created and shown once, used, revoked after confirmation, then refused', async () => {
    await owner.goto(`${h.origin}/console/developers`);
    await heading(owner, 'Developers');
    await owner.getByLabel('Name').fill('Warehouse sync');
    await owner.getByRole('checkbox', { name: 'orders:read' }).check();
    await owner.getByRole('button', { name: 'Create key' }).click();
    const key = (await owner.getByTestId('new-api-key').textContent())!;
    expect(key).toMatch(/^ak_/);
    await owner.getByRole('button', { name: 'Copy key' }).waitFor();
    await h.check(owner, 'api-key-created');
    expect((await fetch(`${h.origin}/v1/orders`, { headers: { 'X-API-Key': key } })).status).toBe(200);
    await owner.getByRole('button', { name: 'Done' }).click();
    await owner.getByRole('button', { name: 'Revoke Warehouse sync' }).click();
    const dialog = owner.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await owner.getByText('Revoked').waitFor();
    expect((await fetch(`${h.origin}/v1/orders`, { headers: { 'X-API-Key': key } })).status).toBe(401);
    await h.check(owner, 'api-keys');
  });

  it('webhook endpoints: a refused URL says why and keeps what was typed', async () => {
    await owner.goto(`${h.origin}/console/developers/webhooks`);
    await owner.getByLabel('Name').fill('Fulfilment');
    await owner.getByLabel('URL (https)').fill('https://127.0.0.1/hooks');
    await owner.getByRole('checkbox', { name: 'order.paid' }).check();
    await owner.getByRole('button', { name: 'Add endpoint' }).click();
    await owner.getByRole('alert').waitFor();
    expect(await owner.getByLabel('URL (https)').inputValue()).toBe('https://127.0.0.1/hooks');
    expect(await owner.getByRole('checkbox', { name: 'order.paid' }).isChecked()).toBe(true);
    await h.check(owner, 'webhook-endpoints');
  });

  it('settings: members, an invite (its link never shown to the inviter), the audit log, sign out everywhere', async () => {
    await owner.goto(`${h.origin}/console/settings/members`);
    await heading(owner, 'Settings');
    await owner.getByRole('cell', { name: /owner@console.test/ }).first().waitFor();
    await owner.getByRole('textbox', { name: 'E-mail address' }).fill('new.hire@console.test');
    await owner.getByRole('combobox', { name: 'Role', exact: true }).selectOption('support');
    await owner.getByRole('button', { name: 'Invite' }).click();
    // No outgoing e-mail here: the page says the operator hands the link over, and shows none (issue 37).
    const sent = (await owner.getByTestId('invite-sent').textContent())!;
    expect(sent).toContain('user invite-link');
    expect(await owner.content()).not.toContain('kinv_');
    await h.check(owner, 'members');
    const inviteId = /--invite (LNK_\w+)/.exec(sent)![1]!;
    const { url } = await h.ctx.services.modules.accounts.accounts.reissueInviteLink(h.ctx.orgA.orgId, inviteId, null);
    const inviteUrl = new URL(url);
    const invited = await h.newPage();
    await invited.goto(`${h.origin}${inviteUrl.pathname}${inviteUrl.hash}`);
    await invited.getByLabel('Password (12 characters or more)').fill('a long enough password');
    await h.check(invited, 'accept-invite');
    await invited.getByRole('button', { name: 'Join' }).click();
    await heading(invited, 'Home');

    // An address that has an account: the password does not join it; the invitee signs in, comes back, joins as themselves.
    const existing = await h.member('viewer', 'already.here@console.test');
    const orgB = h.ctx.orgB.orgId;
    const toExisting = await h.ctx.services.modules.accounts.accounts.invite({ orgId: orgB, email: existing.email, role: 'developer', by: { type: 'operator' }, clientAddress: null });
    const secondUrl = new URL(toExisting.url);
    const person = await h.newPage();
    await person.goto(`${h.origin}${secondUrl.pathname}${secondUrl.hash}`);
    await person.getByLabel('Password (12 characters or more)').fill(existing.password);
    await person.getByRole('button', { name: 'Join' }).click();
    await person.getByTestId('sign-in-first').waitFor();
    await h.check(person, 'accept-invite-sign-in-first');
    await person.getByTestId('sign-in-first').getByRole('link', { name: 'Sign in' }).click();
    await person.getByLabel('E-mail address').fill(existing.email);
    await person.getByLabel('Password').fill(existing.password);
    await person.getByRole('button', { name: 'Sign in', exact: true }).click();
    await person.getByTestId('join-as').waitFor();
    await h.check(person, 'accept-invite-as-yourself');
    await person.getByRole('button', { name: 'Join as yourself' }).click();
    await heading(person, 'Home');
    const joined = await h.ctx.testDb.database.db('memberships').where({ org_id: orgB }).join('users', 'users.id', 'memberships.user_id').where('users.email', existing.email).first();
    expect(joined?.role).toBe('developer');
    await owner.goto(`${h.origin}/console/settings/audit-log`);
    await owner.getByText('api_key.create').first().waitFor();
    await h.check(owner, 'audit-log');
    await owner.goto(`${h.origin}/console/settings`);
    await h.check(owner, 'account');
    const second = await h.newPage();
    await h.signIn(second, await h.member('owner'));
    await owner.getByRole('button', { name: 'Sign out everywhere' }).click();
    await owner.getByRole('dialog').getByRole('button', { name: 'Sign out everywhere' }).click();
    await owner.waitForURL(/\/console\/sign-in/);
    await second.goto(`${h.origin}/console/orders`);
    await second.waitForURL(/\/console\/sign-in/);
    owner = await h.signedInPage('owner');
  });

  it("settings: an owner sets the organization's time zone (keyboard and mouse); home uses it and says which; a viewer cannot", async () => {
    await owner.goto(`${h.origin}/console/settings/organization`);
    await heading(owner, 'Settings');
    const select = owner.getByLabel('Organization time zone');
    await expect.poll(() => select.inputValue()).toBe('UTC');
    const offered = await select.locator('option').allTextContents();
    expect(offered[0]).toBe('UTC');
    expect(offered).toContain('Pacific/Auckland');
    expect(offered.length).toBeGreaterThan(300);
    // Keyboard: Tab to the select, choose, Tab to the button, Enter.
    await tabTo(owner, '#time-zone', 80);
    await select.selectOption('Pacific/Auckland');
    await tabTo(owner, 'form[aria-labelledby="time-zone-title"] button[type="submit"]', 3);
    await owner.keyboard.press('Enter');
    await owner.getByText('Saved: the home page shows its figures in Pacific/Auckland.').waitFor();
    await h.check(owner, 'settings-time-zone');
    const asked = owner.waitForRequest((r) => r.url().includes('/v1/metrics/commerce') && r.url().includes('time_zone=Pacific%2FAuckland'));
    await owner.getByRole('link', { name: 'Home' }).first().click();
    await asked;
    await owner.getByText("Times in Pacific/Auckland, the organization's time zone").waitFor();
    await owner.locator('.chart canvas').first().waitFor();
    await h.check(owner, 'home-time-zone');
    // The mouse: the link on home leads to the setting; Europe/Paris is saved with a click.
    await owner.getByRole('link', { name: 'change it in Settings' }).click();
    await heading(owner, 'Settings');
    await expect.poll(() => owner.getByLabel('Organization time zone').inputValue()).toBe('Pacific/Auckland');
    await owner.getByLabel('Organization time zone').selectOption('Europe/Paris');
    await owner.getByRole('button', { name: 'Save time zone' }).click();
    await owner.getByText('Saved: the home page shows its figures in Europe/Paris.').waitFor();
    // A viewer sees it, cannot change it, and the API refuses anyway.
    const viewer = await h.signedInPage('viewer');
    await viewer.getByText("Times in Europe/Paris, the organization's time zone").waitFor();
    await viewer.goto(`${h.origin}/console/settings/organization`);
    await expect.poll(() => viewer.getByLabel('Organization time zone').inputValue()).toBe('Europe/Paris');
    expect(await viewer.getByLabel('Organization time zone').isDisabled()).toBe(true);
    expect(await viewer.getByRole('button', { name: 'Save time zone' }).count()).toBe(0);
    await viewer.getByText('Only owners and admins can change it.').waitFor();
    const status = await viewer.evaluate(async () => {
      const session = (await (await fetch('/v1/console/session')).json()) as { data: { csrfToken: string } };
      const res = await fetch('/v1/console/organization', { method: 'PATCH', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': session.data.csrfToken }, body: JSON.stringify({ timeZone: 'Asia/Tokyo' }) });
      return res.status;
    });
    expect(status).toBe(403);
    await h.check(viewer, 'viewer-settings-time-zone');
    const stored = await h.ctx.testDb.database.db('organizations').where({ id: h.ctx.orgA.orgId }).first();
    expect(stored.time_zone).toBe('Europe/Paris');
  });

  it('a viewer sees lists but no management: no API keys, no members, no audit log', async () => {
    const viewer = await h.signedInPage('viewer');
    await viewer.goto(`${h.origin}/console/developers`);
    await viewer.getByText('Your role cannot manage API keys.').waitFor();
    await viewer.goto(`${h.origin}/console/settings`);
    expect(await viewer.getByRole('link', { name: 'Members' }).count()).toBe(0);
    expect(await viewer.getByRole('link', { name: 'Audit log' }).count()).toBe(0);
    await h.check(viewer, 'viewer-settings');
    expect(h.pageErrors.filter((e) => !/status of 4\d\d/.test(e))).toEqual([]);
  });
});
