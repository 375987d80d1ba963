/**
 * The console's developer tools, each done in the page and its effect checked through the API:
 * a webhook test event (in the delivery log, filtered by event), the signing keys and their
 * rotation (409 explained within 24 h, then rotated), agent wallets (a policy from the form whose
 * denial shows in the signing history, an agent's key rotated — the new key works, the old one is
 * refused —, wallet assignment, policy deletion, revocation), receiving wallets (an invalid
 * address refused inline with the input kept, by keyboard only; set and removed) and x402
 * paywalls on a price. Every page: axe-core, overflow, screenshots desktop + 390 px.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { startConsoleHarness, type ConsoleHarness } from '../harness/console-browser.js';
import { loadAgentWalletKey } from '../../src/client/agent.js';
import { agentHeaders, clientFor, listenPlatform, usdcTransfer, type TestAgent } from '../agent-wallet/helpers.js';

let h: ConsoleHarness;
let owner: Page;
let platform: Awaited<ReturnType<typeof listenPlatform>>;

const heading = (page: Page, name: string | RegExp) => page.getByRole('heading', { name, level: 1 }).waitFor();

/** A documented operation called with the page's session (and its CSRF token for writes). */
async function api(page: Page, method: string, path: string, body?: unknown): // eslint-disable-next-line @typescript-eslint/no-explicit-any
Promise<{ status: number; body: any }> {
  return page.evaluate(
    async ([method, path, body]) => {
      const session = (await (await fetch('/v1/console/session')).json()) as { data: { csrfToken: string } };
      const res = await fetch(path as string, {
        method: method as string,
        headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': session.data.csrfToken },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: await res.json().catch(() => null) };
    },
    [method, path, body] as const,
  );
}

/** The agent API answers the agent behind an Agent Wallet Key (200), or refuses it (401). */
const agentCalls = async (agentWalletKey: string) => {
  const key = loadAgentWalletKey(agentWalletKey);
  const res = await platform.fetch(new Request('http://api.test/v1/agent-wallet', { headers: agentHeaders(h.ctx, key, 'GET', '/v1/agent-wallet') }));
  return res.status;
};

/** Tab (never the mouse) until the focused element is `selector`. */
async function tabTo(page: Page, selector: string, limit = 120) {
  for (let i = 0; i < limit; i++) {
    await page.keyboard.press('Tab');
    if ((await page.evaluate(`document.activeElement?.matches(${JSON.stringify(selector)}) ?? false`)) as boolean) return;
  }
  throw new Error(`${selector} not reached by Tab`);
}

describe.skipIf(!chromiumAvailable)(skippedUnless('console developer tools', 'chromium'), () => {
  beforeAll(async () => {
    h = await startConsoleHarness({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true' } });
    platform = await listenPlatform(h.ctx);
    owner = await h.signedInPage('owner');
    await h.ctx.services.webhooks.createEndpoint(h.ctx.orgA.orgId, { name: 'Fulfilment', url: 'https://127.0.0.1:9/hooks' });
  });
  afterAll(async () => {
    await platform?.close();
    await h?.close();
  });

  it('sends a test event to an endpoint; it is in the delivery log, filtered by event', async () => {
    await owner.goto(`${h.origin}/console/developers/webhooks`);
    await heading(owner, 'Developers');
    await owner.getByRole('button', { name: 'Send test event to Fulfilment' }).click();
    await owner.getByText('event was queued for Fulfilment').waitFor();
    const listed = await api(owner, 'GET', '/v1/console/webhook-deliveries?event_type=webhook.test');
    expect(listed.status).toBe(200);
    expect(listed.body.data.records).toHaveLength(1);
    await h.check(owner, 'developers-webhooks-test-sent');
    await owner.getByRole('link', { name: 'follow its delivery' }).click();
    await owner.getByRole('heading', { name: /^Delivery WHD_/, level: 2 }).waitFor();
    await owner.goto(`${h.origin}/console/developers/deliveries`);
    await owner.getByLabel('Event').selectOption('webhook.test');
    await owner.getByRole('button', { name: 'Apply' }).click();
    await owner.waitForURL(/event_type=webhook\.test/);
    await expect.poll(() => owner.getByRole('link', { name: 'webhook.test' }).count()).toBe(1);
    await h.check(owner, 'developers-deliveries-test-event');
  });

  it('lists the signing keys and rotates them (confirmed); a second rotation within 24 h is refused with the rule explained', async () => {
    await owner.goto(`${h.origin}/console/developers/signing-keys`);
    await owner.getByRole('heading', { name: 'Webhook signing keys', level: 2 }).waitFor();
    await owner.getByRole('cell', { name: 'Current' }).waitFor();
    const before = (await api(owner, 'GET', '/v1/console/webhook-signing-keys')).body.data as Array<{ keyId: string }>;
    expect(before).toHaveLength(1);
    // The harness's clock moved to now after the key was made: it is old enough to rotate.
    const dialog = owner.getByRole('dialog', { name: 'Rotate the webhook signing key?' });
    await owner.getByRole('button', { name: 'Rotate signing key' }).click();
    await dialog.getByRole('button', { name: 'Rotate key' }).click();
    await owner.getByText(/^New current key/).waitFor();
    const keys = (await api(owner, 'GET', '/v1/console/webhook-signing-keys')).body.data as Array<{ keyId: string; current: boolean }>;
    expect(keys.map((k) => k.current)).toEqual([true, false]);
    expect(keys[1]!.keyId).toBe(before[0]!.keyId);
    await owner.getByRole('cell', { name: 'Retired' }).waitFor();
    await h.check(owner, 'developers-signing-keys');

    await owner.getByRole('button', { name: 'Rotate signing key' }).click();
    await dialog.getByRole('button', { name: 'Rotate key' }).click();
    await dialog.getByText(/less than 24 hours ago.*at least 24 hours old/).waitFor();
    await h.check(owner, 'developers-signing-key-409');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect((await api(owner, 'GET', '/v1/console/webhook-signing-keys')).body.data).toHaveLength(2);
  });

  it('agent wallets: a policy from the form denies, the denial is in the signing history; key rotation, assignment, policy deletion, revocation', async () => {
    await owner.goto(`${h.origin}/console/agents`);
    await heading(owner, 'Agent wallets');
    await owner.getByLabel('Wallet name').fill('Research agents');
    await owner.getByRole('button', { name: 'Create wallet' }).click();
    await owner.getByRole('heading', { name: 'Research agents', level: 3 }).waitFor();
    await owner.getByText(/The default x402 policy, made with the wallet/).first().waitFor();
    const wallets = (await api(owner, 'GET', '/v1/console/agent-wallets')).body.data as Array<{ walletId: string; walletAddress: string; name: string }>;
    const wallet = wallets.find((w) => w.name === 'Research agents')!;

    await owner.getByLabel('Agent name').fill('Crawler');
    await owner.getByLabel('Wallet', { exact: true }).selectOption({ label: 'Research agents' });
    await owner.getByRole('button', { name: 'Create agent' }).click();
    const firstKey = (await owner.getByTestId('agent-wallet-key').textContent())!;
    expect(await agentCalls(firstKey)).toBe(200);

    // A policy from the form: deny any transfer over 1 USDC.
    await owner.getByLabel('Policy name').fill('Cap at 1 USDC');
    await owner.getByLabel('Decision').selectOption('DENY');
    await owner.getByLabel('USDC transfer value').selectOption('gt');
    await owner.getByLabel(/^Base units/).fill('1000000');
    await owner.getByRole('button', { name: 'Add policy' }).click();
    await owner.getByText(/^Cap at 1 USDC \(1 rules\)/).waitFor();
    const policies = (await api(owner, 'GET', `/v1/console/agent-wallets/${wallet.walletId}/policies`)).body.data as Array<{ id: string; name: string }>;
    expect(policies.map((p) => p.name)).toContain('Cap at 1 USDC');
    await h.check(owner, 'agents-policy');

    const agent = { agentWalletKey: firstKey } as TestAgent;
    await expect(clientFor(h.ctx, agent, platform).signTypedData(usdcTransfer(wallet.walletAddress, '2000000'))).rejects.toMatchObject({ status: 403 });
    await expect(clientFor(h.ctx, agent, platform).signTypedData(usdcTransfer(wallet.walletAddress, '500000'))).resolves.toMatchObject({ walletAddress: wallet.walletAddress });

    await owner.getByRole('link', { name: 'Signing history' }).click();
    await owner.getByRole('heading', { name: 'Signing history', level: 2 }).waitFor();
    await owner.getByLabel('Decision').selectOption('denied');
    await owner.getByRole('button', { name: 'Filter' }).click();
    await owner.waitForURL(/status=denied/);
    await expect.poll(() => owner.getByTestId('history-entry').count()).toBe(1);
    await owner.getByTestId('history-entry').getByText(/Cap at 1 USDC|Deny transfers over 1000000/).waitFor();
    await h.check(owner, 'agents-history-denied');

    // Rotate the key: the new one works, the old one is refused.
    await owner.goto(`${h.origin}/console/agents`);
    await owner.getByRole('button', { name: 'Rotate key of Crawler' }).click();
    await owner.getByRole('dialog').getByRole('button', { name: 'Rotate key' }).click();
    await expect.poll(async () => (await owner.getByTestId('agent-wallet-key').textContent()) !== firstKey).toBe(true);
    const secondKey = (await owner.getByTestId('agent-wallet-key').textContent())!;
    expect(await agentCalls(secondKey)).toBe(200);
    expect(await agentCalls(firstKey)).toBe(401);
    await h.check(owner, 'agents-key-rotated');

    // Assign the agent to a second wallet.
    await owner.getByLabel('Wallet name').fill('Spare');
    await owner.getByRole('button', { name: 'Create wallet' }).click();
    await owner.getByRole('heading', { name: 'Spare', level: 3 }).waitFor();
    await owner.getByRole('combobox', { name: 'Wallet of Crawler' }).selectOption({ label: 'Spare' });
    await owner.getByRole('button', { name: 'Assign wallet to Crawler' }).click();
    const spare = ((await api(owner, 'GET', '/v1/console/agent-wallets')).body.data as typeof wallets).find((w) => w.name === 'Spare')!;
    await expect.poll(async () => ((await api(owner, 'GET', '/v1/console/agents')).body.data as Array<{ name: string; walletId: string }>).find((a) => a.name === 'Crawler')?.walletId).toBe(spare.walletId);

    // Delete the form's policy (confirmed).
    await owner.getByText(/^Cap at 1 USDC \(1 rules\)/).click();
    await owner.getByRole('button', { name: 'Delete policy Cap at 1 USDC' }).first().click();
    await owner.getByRole('dialog', { name: 'Delete the policy Cap at 1 USDC?' }).getByRole('button', { name: 'Delete policy Cap at 1 USDC' }).click();
    await expect.poll(async () => ((await api(owner, 'GET', `/v1/console/agent-wallets/${wallet.walletId}/policies`)).body.data as Array<{ name: string }>).map((p) => p.name)).not.toContain('Cap at 1 USDC');

    // Revoke (confirmed): the key is refused.
    await owner.getByRole('button', { name: 'Revoke Crawler' }).click();
    await owner.getByRole('dialog', { name: 'Revoke the agent Crawler?' }).getByRole('button', { name: 'Revoke agent' }).click();
    await owner.getByText('Revoked').first().waitFor();
    expect(await agentCalls(secondKey)).toBe(401);
    await h.check(owner, 'agents-revoked');
  });

  it('receiving wallets, keyboard only: an invalid address is refused inline and kept; set, then removed', async () => {
    await owner.goto(`${h.origin}/console/settings/organization`);
    await owner.getByRole('heading', { name: 'Receiving wallets', level: 3 }).waitFor();
    const chains = (await api(owner, 'GET', '/v1/console/receiving-wallets')).body.data.chains as Array<{ chainId: number; chainName: string }>;
    const chain = chains[0]!;
    const input = `#receiving-${chain.chainId}`;
    await owner.evaluate('document.activeElement?.blur()');
    await tabTo(owner, input);
    await owner.keyboard.type('0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed');
    await owner.keyboard.press('Enter');
    await owner.locator(`${input}-error`).waitFor();
    expect(await owner.locator(input).inputValue()).toBe('0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed');
    expect(await owner.locator(input).getAttribute('aria-invalid')).toBe('true');
    expect((await api(owner, 'GET', '/v1/console/receiving-wallets')).body.data.wallets).toEqual([]);
    await h.check(owner, 'settings-receiving-wallet-invalid');

    await owner.locator(input).focus();
    await owner.keyboard.press('Control+A');
    await owner.keyboard.type('0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed');
    await owner.keyboard.press('Enter');
    await owner.getByText('Wallet saved.').waitFor();
    const set = (await api(owner, 'GET', '/v1/console/receiving-wallets')).body.data.wallets as Array<{ chainId: number; address: string }>;
    expect(set).toEqual([expect.objectContaining({ chainId: chain.chainId, address: '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed' })]);

    await tabTo(owner, `button.danger`);
    expect(await owner.evaluate('document.activeElement?.textContent')).toBe(`Remove ${chain.chainName} wallet`);
    await owner.keyboard.press('Enter');
    const dialog = owner.getByRole('dialog', { name: `Remove the receiving wallet on ${chain.chainName}?` });
    await dialog.waitFor();
    await tabTo(owner, 'dialog[open] button.danger');
    await owner.keyboard.press('Enter');
    await expect.poll(async () => (await api(owner, 'GET', '/v1/console/receiving-wallets')).body.data.wallets).toEqual([]);
    await h.check(owner, 'settings-receiving-wallets');
  });

  it('x402 paywalls: set on a price (the x402 URL answers 402), then removed (404)', async () => {
    const product = await api(owner, 'POST', '/v1/console/products', { name: 'Weather reports' });
    expect(product.status).toBe(201);
    const productId = product.body.data.productId as string;
    const price = await api(owner, 'POST', `/v1/console/products/${productId}/prices`, { amount: 150, currency: 'USD' });
    expect(price.status).toBe(201);
    const priceId = price.body.data.pricingId as string;

    await owner.goto(`${h.origin}/console/catalog/products/${productId}`);
    await owner.getByRole('heading', { name: 'x402 paywalls', level: 2 }).waitFor();
    const url = owner.getByLabel(/After payment, redirect to/);
    await url.fill('ftp://example.com/report');
    await owner.getByRole('button', { name: `Sell with x402 ${priceId}` }).click();
    await owner.locator(`#paywall-${priceId}-error`).waitFor();
    expect(await url.inputValue()).toBe('ftp://example.com/report');
    await url.fill('');
    await owner.getByRole('button', { name: `Sell with x402 ${priceId}` }).click();
    await owner.getByTestId('paywall-url').waitFor();
    const listed = await api(owner, 'GET', `/v1/console/products/${productId}/x402-paywalls`);
    expect(listed.body.data).toEqual([expect.objectContaining({ pricingId: priceId, contentUrl: null })]);
    const x402Url = (await owner.getByTestId('paywall-url').textContent())!;
    expect(new URL(x402Url).pathname).toBe(`/x402/prices/${priceId}`);
    expect((await owner.request.get(x402Url, { headers: { Accept: 'application/json' } })).status()).toBe(402);
    await h.check(owner, 'catalog-paywall');

    await owner.getByRole('button', { name: `Remove paywall ${priceId}` }).click();
    await owner.getByRole('dialog').getByRole('button', { name: 'Remove paywall' }).click();
    await expect.poll(async () => (await api(owner, 'GET', `/v1/console/products/${productId}/x402-paywalls`)).body.data).toEqual([]);
    expect((await owner.request.get(x402Url, { headers: { Accept: 'application/json' } })).status()).toBe(404);
    expect(h.pageErrors).toEqual([]);
  });

  it('x402 paywalls on two prices refused at once: each keeps its own error', async () => {
    const product = await api(owner, 'POST', '/v1/console/products', { name: 'Two reports' });
    const productId = product.body.data.productId as string;
    const priceIds: string[] = [];
    for (const amount of [100, 200]) priceIds.push((await api(owner, 'POST', `/v1/console/products/${productId}/prices`, { amount, currency: 'USD' })).body.data.pricingId as string);
    await owner.goto(`${h.origin}/console/catalog/products/${productId}`);
    for (const id of priceIds) await owner.locator(`#paywall-${id}`).fill(`ftp://example.com/${id}`);
    // Both forms sent in one turn: both answers arrive while both requests are in flight.
    await owner.locator('form[aria-label^="x402 paywall of"]').evaluateAll((forms) => forms.forEach((form) => (form as unknown as { requestSubmit(): void }).requestSubmit()));
    for (const id of priceIds) await owner.locator(`#paywall-${id}-error`).waitFor();
    for (const id of priceIds) expect(await owner.locator(`#paywall-${id}`).inputValue()).toBe(`ftp://example.com/${id}`);
    expect(h.pageErrors).toEqual([]);
  });
});
