/**
 * Removing a member in the console (issue 37, item 7): the confirmation says what goes with the
 * member, and after the removal the page lists what was revoked (the API's answer): the API key
 * and the pending invite the developer made. Keyboard and mouse, desktop and 390 px, axe-core.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { startConsoleHarness, type ConsoleHarness } from '../harness/console-browser.js';

let h: ConsoleHarness;
let owner: Page;

describe.skipIf(!chromiumAvailable)(skippedUnless('member removal in the console', 'chromium'), () => {
  beforeAll(async () => {
    h = await startConsoleHarness();
    owner = await h.signedInPage('owner');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('the confirmation says what goes; the answer lists what was revoked', async () => {
    const admin = await h.member('admin', 'leaving-admin@console.test');
    const accounts = h.ctx.services.modules.accounts.accounts;
    await accounts.invite({ orgId: h.ctx.orgA.orgId, email: 'friend@console.test', role: 'viewer', by: { type: 'user', id: admin.userId, role: 'admin' }, clientAddress: null });
    await h.ctx.services.orgs.createApiKey(h.ctx.orgA.orgId, { name: 'deploy script', permissions: ['orders:read'], createdBy: `user:${admin.userId}` });

    await owner.goto(`${h.origin}/console/settings/members`);
    await owner.getByRole('heading', { name: 'Members', level: 2 }).waitFor();
    const remove = owner.getByRole('button', { name: 'Remove leaving-admin@console.test' });
    // Keyboard: focus the button, Enter opens the dialog.
    await remove.focus();
    await owner.keyboard.press('Enter');
    const dialog = owner.getByRole('dialog');
    await dialog.getByText(/API keys, telemetry keys and agents' keys they created, and their pending invites/).waitFor();
    await h.check(owner, 'member-remove-confirm');
    // The mouse confirms.
    await dialog.getByRole('button', { name: 'Remove member' }).click();
    const status = owner.getByRole('status').filter({ hasText: 'Removed leaving-admin@console.test' });
    await status.waitFor();
    expect(await status.textContent()).toBe(
      'Removed leaving-admin@console.test; 1 session ended; revoked 1 API key (deploy script), 1 pending invite (friend@console.test).',
    );
    expect(await owner.getByRole('button', { name: 'Remove leaving-admin@console.test' }).count()).toBe(0);
    await h.check(owner, 'member-removed');
    expect(h.pageErrors).toEqual([]);
  });
});
