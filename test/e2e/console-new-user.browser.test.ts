/**
 * The console as a new user finds it (issue 37, items 16–25), each stumble of the browser walk
 * replayed in Chromium at desktop and 390 px: a signed-out load logs no failed request, an API key
 * with no permission ticked, a trace whose conversation wraps with its totals and a neutral
 * "Unset", a sandbox order refunded in full (its outcome shown, its payment described truly),
 * and the layout details. Every page: axe-core, no horizontal overflow, screenshots.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { tabTo } from '../harness/accessibility.js';
import { PHONE, startConsoleHarness, type ConsoleHarness } from '../harness/console-browser.js';
import { bearer, createProjectWithKey, span, traceId } from '../telemetry/helpers.js';

let h: ConsoleHarness & { newPage(viewport?: { width: number; height: number }): Promise<Page> };
let owner: Page;

const heading = (page: Page, name: string | RegExp) => page.getByRole('heading', { name, level: 1 }).waitFor();

/** A paid sandbox-card order of org A (checkout session paid on the hosted page's form). */
async function sandboxOrder(amount: number): Promise<string> {
  const product = await h.ctx.admin.post(`/v1/orgs/${h.ctx.orgA.orgId}/products`).send({ name: 'Espresso beans' });
  const price = await h.ctx.admin.post(`/v1/products/${product.body.data.productId}/prices`).send({ amount, currency: 'USD' });
  const created = await h.ctx.merchant
    .post('/v1/checkout-sessions')
    .set('X-API-Key', h.ctx.orgA.apiKey)
    .set('Idempotency-Key', `new-user-${Math.random()}`)
    .send({ pricingId: price.body.data.pricingId, customerEmail: 'buyer@console.test' });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const paid = await h.ctx.merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' });
  expect(paid.status).toBe(303);
  const session = await h.ctx.merchant.get(`/v1/checkout-sessions/${created.body.data.id}`).set('X-API-Key', h.ctx.orgA.apiKey);
  return session.body.data.orderId as string;
}

describe.skipIf(!chromiumAvailable)(skippedUnless('console as a new user finds it', 'chromium'), () => {
  beforeAll(async () => {
    h = (await startConsoleHarness()) as typeof h;
    owner = await h.signedInPage('owner');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('item 24: a signed-out page load makes no failed request (no red 401 in the browser console)', async () => {
    const page = await h.newPage();
    const failed: string[] = [];
    page.on('response', (res) => res.status() >= 400 && failed.push(`${res.status()} ${res.url()}`));
    const logged: string[] = [];
    page.on('console', (m) => m.type() === 'error' && logged.push(m.text()));
    await page.goto(`${h.origin}/console/orders`);
    await page.waitForURL(/\/console\/sign-in\?next=/);
    await page.getByLabel('E-mail address').waitFor();
    expect(failed).toEqual([]);
    expect(logged).toEqual([]);
  });

  it('item 16: an API key with no permission ticked gets every permission the role allows', async () => {
    await owner.goto(`${h.origin}/console/developers/api-keys`);
    await heading(owner, 'Developers');
    await owner.getByLabel('Name').fill('Everything my role allows');
    await owner.getByRole('button', { name: 'Create key' }).click();
    const key = (await owner.getByTestId('new-api-key').textContent())!;
    expect(key).toMatch(/^ak_/);
    await expect(owner.getByRole('alert').count()).resolves.toBe(0);
    const keys = (await owner.evaluate(`fetch('/v1/console/api-keys').then((r) => r.json())`)) as { data: Array<{ name: string; permissions: string[] }> };
    expect(keys.data.find((k) => k.name === 'Everything my role allows')?.permissions).toHaveLength(8);
    expect(await owner.locator('body').innerText()).not.toMatch(/must NOT|body\./);
    await h.check(owner, 'new-user-api-key-all-permissions');
  });

  it('item 19: the console creates a telemetry project (keyboard only), renames it and deletes it', async () => {
    await owner.goto(`${h.origin}/console/telemetry`);
    await heading(owner, 'Telemetry');
    await owner.getByText('No telemetry project yet.').waitFor();
    await h.check(owner, 'new-user-telemetry-empty');
    await tabTo(owner, '#new-project-name', 120);
    await owner.keyboard.type('Checkout assistant');
    await owner.keyboard.press('Tab');
    await owner.keyboard.press('ArrowUp'); // production → staging
    await owner.keyboard.press('Tab');
    expect(await owner.evaluate('document.activeElement.textContent')).toBe('Create project');
    await owner.keyboard.press('Enter');
    await owner.waitForURL(/\/console\/telemetry\/PRJ_\w+\/settings$/);
    await heading(owner, 'Checkout assistant settings');
    expect(await owner.getByLabel('Environment').inputValue()).toBe('staging');
    await owner.getByLabel('Name', { exact: true }).fill('Checkout assistant (EU)');
    await owner.getByRole('button', { name: 'Save', exact: true }).click();
    await heading(owner, 'Checkout assistant (EU) settings');
    await h.check(owner, 'new-user-telemetry-project-settings');
    await owner.getByRole('button', { name: 'Delete Checkout assistant (EU)…' }).click();
    await owner.getByRole('dialog').getByRole('button', { name: 'Delete project' }).click();
    await owner.waitForURL(`${h.origin}/console/telemetry`);
    await owner.getByText('No telemetry project yet.').waitFor();
  });

  it('items 17 and 20: the conversation wraps at 390 px; the trace shows its tokens and cost; UNSET is a neutral "Unset"', async () => {
    const p = await createProjectWithKey(h.ctx, h.ctx.orgA.orgId, 'Support bot');
    const id = traceId();
    const now = Date.now() - 60_000;
    const root = span({ start: now, durationMs: 1500, name: 'chat.handle_message', status: 'UNSET' });
    const long = `Please summarise: ${'averyveryverylongwordwithoutanyspaces'.repeat(6)} and ${'more words that should wrap nicely '.repeat(10)}`;
    const call = (input: number, output: number, cost: number, content: string) =>
      span({
        parent_span_id: root.span_id,
        start: now + 100,
        durationMs: 600,
        name: 'openai.chat',
        attributes: { 'gen_ai.system': 'openai', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.prompt_tokens': input, 'gen_ai.usage.completion_tokens': output, 'llm.cost': cost, 'gen_ai.prompt.0.role': 'user', 'gen_ai.prompt.0.content': content },
      });
    const res = await h.ctx.platform.post('/v1/ingest').set(bearer(p.key)).send({ traces: [{ trace_id: id, spans: [root, call(1200, 350, 0.0065, long), call(30, 12, 0.000013, 'short')] }] });
    expect(res.status).toBe(202);
    const rootSpan = root.span_id;
    await owner.goto(`${h.origin}/console/telemetry/${p.projectId}/traces/${id}?span=${rootSpan}`);
    await owner.locator('[data-field="trace-tokens"]').waitFor();
    expect(await owner.locator('[data-field="trace-tokens"]').innerText()).toBe('1,230 / 362');
    expect(await owner.locator('[data-field="trace-cost"]').innerText()).toBe('$0.006513');
    const status = owner.locator('[data-field="span-status"] .badge');
    expect(await status.innerText()).toBe('Unset');
    expect(await status.getAttribute('class')).toContain('neutral');
    await h.check(owner, 'new-user-trace-unset');
    const llmSpan = await owner.locator('[data-span-id]').nth(1).getAttribute('data-span-id');
    await owner.goto(`${h.origin}/console/telemetry/${p.projectId}/traces/${id}?span=${llmSpan}`);
    await owner.locator('pre.message-content').first().waitFor();
    await owner.setViewportSize(PHONE);
    const width = (await owner.evaluate('document.documentElement.scrollWidth')) as number;
    expect(width).toBeLessThanOrEqual(PHONE.width);
    await h.check(owner, 'new-user-trace-conversation');
  });

  it('items 21 and 22: a sandbox order is not called Stripe; a full refund shows its outcome and the payment reads refunded', async () => {
    const orderId = await sandboxOrder(1500);
    await owner.setViewportSize({ width: 1280, height: 800 });
    await owner.goto(`${h.origin}/console/orders/${orderId}`);
    await heading(owner, `Order ${orderId}`);
    const payment = owner.locator('.card').filter({ has: owner.getByRole('heading', { name: 'Payment' }) });
    await expect(payment.innerText()).resolves.not.toMatch(/Stripe/);
    await expect(payment.innerText()).resolves.toMatch(/sandbox/i);
    // Keyboard only: Tab to the refund button, Enter, confirm.
    await tabTo(owner, 'button.danger', 120);
    expect(await owner.evaluate('document.activeElement.textContent')).toBe('Refund…');
    await owner.keyboard.press('Enter');
    await owner.getByRole('dialog').getByRole('button', { name: 'Refund $15.00' }).click();
    await owner.getByText('Refund of $15.00 requested.').waitFor();
    await owner.getByText('Payment succeeded, then refunded in full').waitFor();
    await expect(payment.innerText()).resolves.toMatch(/no money/);
    expect(await owner.getByRole('button', { name: 'Refund…' }).count()).toBe(0);
    await h.check(owner, 'new-user-order-refunded');
  });

  it('no page printed an error', () => {
    expect(h.pageErrors).toEqual([]);
  });
});
