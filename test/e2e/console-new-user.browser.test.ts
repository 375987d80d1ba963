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
import { ALL_PERMISSIONS } from '../../src/orgs/permissions.js';

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
    // The owner's role allows every key permission.
    expect(keys.data.find((k) => k.name === 'Everything my role allows')?.permissions.sort()).toEqual([...ALL_PERMISSIONS].sort());
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

  it('item 25: the layout as a new user met it, at 390 px and desktop', async () => {
    // A long address breaks only at its @ or a dot, never mid-word (it was `word-break: break-all`).
    const longAddress = 'operations.owner.account@payments-department.example-company.test';
    const wide = await h.member('owner', longAddress);
    const page = await h.newPage();
    await h.signIn(page, wide);
    const breaks = (await page.evaluate(`(() => {
      const el = document.querySelector('.who .email');
      const text = el.textContent;
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      const chars = [];
      for (let n = walker.nextNode(); n; n = walker.nextNode()) for (let i = 0; i < n.length; i++) { const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1); chars.push([n.data[i], r.getBoundingClientRect().top]); }
      const out = [];
      for (let i = 1; i < chars.length; i++) if (chars[i][1] > chars[i - 1][1] + 2) out.push(chars[i - 1][0] + '|' + chars[i][0]);
      return { text, out };
    })()`)) as { text: string; out: string[] };
    expect(breaks.text).toBe(longAddress);
    expect(breaks.out.length).toBeGreaterThan(0);
    for (const at of breaks.out) expect(at, `a line ends inside a word: ${at}`).toMatch(/^(\.\|.|.\|@)$/);

    await sandboxOrder(2500);
    await owner.setViewportSize(PHONE);
    await owner.goto(`${h.origin}/console/orders`);
    await heading(owner, 'Orders');
    // At 390 px the list names the buyer under each order.
    await expect(owner.locator('[data-field="buyer"]').first().innerText()).resolves.toBe('buyer@console.test');
    // A long id never breaks mid-string: one line, clipped with an ellipsis, the whole id in its title.
    const id = owner.locator('a.id').first();
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const [idTitle, idText, idLines, idWhiteSpace, idOverflow] = (await id.evaluate((el: any) => {
      const style = el.ownerDocument.defaultView.getComputedStyle(el);
      return [el.getAttribute('title'), el.textContent, Math.floor(el.getBoundingClientRect().height / (parseFloat(style.fontSize) * 1.6)) + 1, style.whiteSpace, style.textOverflow];
    })) as [string, string, number, string, string];
    expect(idTitle).toBe(idText);
    expect(idTitle).toMatch(/^ORD_/);
    expect([idLines <= 1, idWhiteSpace, idOverflow]).toEqual([true, 'nowrap', 'ellipsis']);
    // The search's placeholder fits its box.
    const search = owner.locator('input[name="q"]');
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const fits = await search.evaluate((input: any) => {
      const doc = input.ownerDocument;
      const probe = doc.createElement('span');
      const style = doc.defaultView.getComputedStyle(input);
      probe.style.font = style.font;
      probe.style.position = 'absolute';
      probe.style.whiteSpace = 'pre';
      probe.textContent = input.placeholder;
      doc.body.append(probe);
      const needed = probe.getBoundingClientRect().width;
      probe.remove();
      return needed <= input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    });
    expect(fits).toBe(true);
    await h.check(owner, 'new-user-orders-narrow');

    // Members: no sideways scroll, the Remove button inside the table, one word (the address in its accessible name only).
    await owner.goto(`${h.origin}/console/settings/members`);
    const remove = owner.getByRole('button', { name: `Remove ${longAddress}` });
    await remove.waitFor();
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    expect(await remove.evaluate((b: any) => [...b.childNodes].filter((n: any) => !n.classList?.contains('visually-hidden')).map((n: any) => n.textContent).join(''))).toBe('Remove');
    const wraps = owner.locator('.table-wrap');
    for (let i = 0; i < (await wraps.count()); i++) {
      const [scroll, client] = (await wraps.nth(i).evaluate((el) => [el.scrollWidth, el.clientWidth])) as [number, number];
      expect(scroll, `members table ${i} scrolls sideways`).toBeLessThanOrEqual(client);
    }
    const box = (await remove.boundingBox())!;
    const wrap = (await wraps.first().boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(wrap.x + wrap.width);
    // An accepted invite has no expiry left.
    const accepted = owner.locator('tr').filter({ has: owner.locator('.badge', { hasText: 'accepted' }) }).first();
    await accepted.waitFor();
    await owner.setViewportSize({ width: 1280, height: 800 });
    expect(await accepted.locator('td').nth(3).innerText()).toBe('—');
    await h.check(owner, 'new-user-members');

    // Traces at 390 px: no sideways scroll.
    await owner.setViewportSize(PHONE);
    const projects = (await owner.evaluate(`fetch('/v1/console/telemetry-projects').then((r) => r.json())`)) as { data: Array<{ projectId: string }> };
    await owner.goto(`${h.origin}/console/telemetry/${projects.data[0]!.projectId}/traces`);
    const traceRow = owner.locator('tr[data-trace-id]').first();
    await traceRow.waitFor();
    // The table fits its frame (it scrolled inside it: 451 px of content in 364): start and cost ride under the name.
    const [tracesScroll, tracesClient] = (await owner.locator('.table-wrap').first().evaluate((el) => [el.scrollWidth, el.clientWidth])) as [number, number];
    expect(tracesScroll, 'the traces table scrolls sideways at 390 px').toBeLessThanOrEqual(tracesClient);
    expect(await traceRow.locator('[data-field="cost-narrow"]').innerText()).toBe('$0.006513');
    expect(await traceRow.locator('td[data-field="cost"]').isVisible()).toBe(false);
    await h.check(owner, 'new-user-traces-narrow');
    // Keyboard: Tab reaches the trace's name and Enter opens it; at desktop the cost has its column again.
    await tabTo(owner, 'tr[data-trace-id] a');
    await owner.keyboard.press('Enter');
    await owner.locator('[data-field="trace-cost"]').waitFor();
    await owner.goBack();
    await owner.setViewportSize({ width: 1280, height: 800 });
    await traceRow.waitFor();
    expect(await traceRow.locator('td[data-field="cost"]').innerText()).toBe('$0.006513');
    expect(await traceRow.locator('[data-field="cost-narrow"]').isVisible()).toBe(false);
    // Mouse: a click on the name opens the trace.
    await traceRow.locator('a').first().click();
    await owner.locator('[data-field="trace-cost"]').waitFor();

    // Payment links: the link itself with a copy button, the product name once.
    const product = await h.ctx.admin.post(`/v1/orgs/${h.ctx.orgA.orgId}/products`).send({ name: 'Roasted beans' });
    const price = await h.ctx.admin.post(`/v1/products/${product.body.data.productId}/prices`).send({ amount: 900, currency: 'USD' });
    const link = await h.ctx.admin.post(`/v1/prices/${price.body.data.pricingId}/payment-links`);
    expect(link.status, JSON.stringify(link.body)).toBe(201);
    await owner.setViewportSize({ width: 1280, height: 800 });
    await owner.goto(`${h.origin}/console/catalog/payment-links`);
    const row = owner.locator('tr').filter({ hasText: 'Roasted beans' });
    await row.waitFor();
    expect(await row.locator('[data-field="payment-link-url"]').innerText()).toBe(link.body.data.paymentLinkUrl);
    expect((await row.locator('td').first().innerText()).match(/Roasted beans/g)).toHaveLength(1);
    await row.getByRole('button', { name: 'Copy link' }).waitFor();
    await h.check(owner, 'new-user-payment-links');
  });

  it('no page printed an error', () => {
    expect(h.pageErrors).toEqual([]);
  });
});
