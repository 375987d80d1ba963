/**
 * The telemetry explorer in Chromium (issue 31): traces sent with OpenLLMetry's attribute
 * spellings, the list with the API's figures, a filter in the URL, a trace's waterfall and its
 * rendered conversation, a session's traces in order; axe-core clean, desktop and 390 px.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { DESKTOP, PHONE, startConsoleHarness, type ConsoleHarness } from '../harness/console-browser.js';
import { bearer, createProjectWithKey, span, traceId, type TelemetryKeyFixture } from '../telemetry/helpers.js';

/** What the page's elements offer the evaluated callbacks (the Node type-check has no DOM types). */
type El = { dataset: Record<string, string | undefined>; innerText: string; querySelector(selector: string): El | null };

let h: ConsoleHarness;
let p: TelemetryKeyFixture;
let page: Page;
const ids = { chat: traceId(), second: traceId(), failed: traceId() };

describe.skipIf(!chromiumAvailable)(skippedUnless('telemetry explorer pages', 'chromium'), () => {
  beforeAll(async () => {
    h = await startConsoleHarness();
    p = await createProjectWithKey(h.ctx, h.ctx.orgA.orgId, 'Support bot');
    const now = Date.now() - 60_000;
    const root = span({ start: now, durationMs: 1200, name: 'chat.handle_message', attributes: { 'traceloop.workflow.name': 'support_chat', 'traceloop.association.properties.session_id': 'conv-1', 'user.id': 'user-42' } });
    const llm = span({
      parent_span_id: root.span_id,
      start: now + 100,
      durationMs: 900,
      name: 'openai.chat',
      attributes: {
        'gen_ai.system': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.usage.prompt_tokens': 1200,
        'gen_ai.usage.completion_tokens': 350,
        'gen_ai.prompt.0.role': 'system',
        'gen_ai.prompt.0.content': 'You are a helpful support agent.',
        'gen_ai.prompt.1.role': 'user',
        'gen_ai.prompt.1.content': 'Where is my order 1234?',
        'gen_ai.completion.0.role': 'assistant',
        'gen_ai.completion.0.content': 'Order 1234 shipped yesterday.',
      },
    });
    const second = span({ start: now + 5000, durationMs: 300, name: 'chat.followup', attributes: { 'session.id': 'conv-1' } });
    const failed = span({ start: now + 8000, durationMs: 50, name: 'chat.broken', attributes: { 'session.id': 'conv-2' }, status: 'ERROR' });
    const res = await h.ctx.platform
      .post('/v1/ingest')
      .set(bearer(p.key))
      .send({ traces: [{ trace_id: ids.chat, spans: [root, llm] }, { trace_id: ids.second, spans: [second] }, { trace_id: ids.failed, spans: [failed] }] });
    expect(res.status).toBe(202);
    // The session and user lists: the queued changes applied, as the worker's job does within a second.
    await h.ctx.services.telemetry.groupChanges.applyAll();
    page = await h.signedInPage('developer');
  }, 120_000);
  afterAll(async () => {
    await h?.close();
  });

  it('lists the traces with the figures of GET /v1/traces, and filters through the URL', async () => {
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/traces`);
    await page.getByRole('heading', { name: 'Traces', level: 1 }).waitFor();
    await page.locator('tr[data-trace-id]').first().waitFor();
    const api = (await h.ctx.platform.get('/v1/traces').set(bearer(p.key))).body.data as Array<{ trace_id: string; name: string; span_count: number }>;
    const shown = await page.locator('tr[data-trace-id]').evaluateAll((rows) => rows.map((r) => (r as unknown as El).dataset.traceId));
    expect(shown).toEqual(api.map((t) => t.trace_id));
    const chatRow = page.locator(`tr[data-trace-id="${ids.chat}"]`);
    await expect(chatRow.innerText()).resolves.toContain('support_chat');
    await expect(chatRow.innerText()).resolves.toContain('1200 / 350');
    await h.check(page, 'explorer-traces');

    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/traces?status=error`);
    await page.locator(`tr[data-trace-id="${ids.failed}"]`).waitFor();
    expect(await page.locator('tr[data-trace-id]').count()).toBe(1);
  });

  it('at 390 px the traces start on the first screen; "More filters" opens by keyboard and filters by session', async () => {
    await page.setViewportSize(PHONE);
    try {
      await page.goto(`${h.origin}/console/telemetry/${p.projectId}/traces`);
      const firstRow = page.locator('tr[data-trace-id]').first();
      await firstRow.waitFor();
      const box = await firstRow.boundingBox();
      expect(box!.y + box!.height).toBeLessThanOrEqual(PHONE.height);
      const more = page.locator('details.more-filters');
      expect(await more.evaluate((d) => (d as unknown as { open: boolean }).open)).toBe(false);
      await page.locator('details.more-filters > summary').focus();
      await page.keyboard.press('Enter');
      await page.getByLabel('Session').waitFor();
      await page.getByLabel('Session').focus();
      await page.keyboard.type('conv-2');
      await page.keyboard.press('Enter');
      await page.waitForURL(/session_id=conv-2/);
      await page.locator(`tr[data-trace-id="${ids.failed}"]`).waitFor();
      // The unfiltered rows (the failed trace among them) stay until the filtered page replaces them.
      await expect.poll(() => page.locator('tr[data-trace-id]').count(), { timeout: 10_000 }).toBe(1);
      // A filter it hides that is set keeps it open, and says how many are set.
      await expect(page.locator('details.more-filters > summary').innerText()).resolves.toBe('More filters (1 set)');
      expect(await more.evaluate((d) => (d as unknown as { open: boolean }).open)).toBe(true);
      await h.check(page, 'explorer-traces-more-filters');
    } finally {
      await page.setViewportSize(DESKTOP);
    }
  });

  it('opens a trace: the waterfall has one row per span, and the model call shows its conversation', async () => {
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/traces`);
    await page.getByRole('link', { name: 'support_chat' }).click();
    await page.getByRole('tree', { name: 'Spans' }).waitFor();
    const api = (await h.ctx.platform.get(`/v1/traces/${ids.chat}`).set(bearer(p.key))).body.data as { spans: Array<{ span_id: string }> };
    expect(await page.getByRole('treeitem').count()).toBe(api.spans.length);
    await page.getByRole('link', { name: 'openai.chat' }).click();
    expect(page.url()).toContain(`?span=${api.spans[1]!.span_id}`);
    const chat = page.getByLabel('Conversation');
    await chat.waitFor();
    expect(await chat.locator('[data-role]').evaluateAll((els) => els.map((e) => (e as unknown as El).dataset.role))).toEqual(['system', 'user', 'assistant']);
    await expect(chat.innerText()).resolves.toContain('Order 1234 shipped yesterday.');
    await h.check(page, 'explorer-trace');
  });

  it("the metrics page shows GET /v1/metrics' figures by hour, and a bucket opens its traces", async () => {
    // One request per column (the API answers one metric and aggregation each), none for the
    // project or the project list: the server reads them together (docs/benchmarks.md).
    const telemetryRequests: string[] = [];
    const onRequest = (request: { url(): string }) => {
      if (request.url().includes('/telemetry-projects')) telemetryRequests.push(request.url());
    };
    page.on('request', onRequest);
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/metrics`);
    await page.getByRole('table', { name: 'Metrics by hour' }).waitFor();
    page.off('request', onRequest);
    const asked = telemetryRequests.map((u) => new URL(u)).map((u) => `${u.pathname} ${u.searchParams.get('metric')} ${u.searchParams.get('aggregation')}`);
    expect(asked).toHaveLength(8);
    expect(new Set(asked).size).toBe(8);
    expect(asked.every((a) => a.startsWith(`/v1/console/telemetry-projects/${p.projectId}/metrics `))).toBe(true);
    const buckets = await page.locator('tr[data-bucket]').evaluateAll((rows) => rows.map((r) => (r as unknown as El).dataset.bucket!));
    expect(buckets).toHaveLength(24);
    const end = new Date(Date.parse(buckets[23]!) + 3_600_000).toISOString();
    for (const [field, metric, aggregation] of [['requests', 'llm.requests.total', 'sum'], ['tokens_in', 'llm.tokens.input', 'sum'], ['p95', 'llm.latency_ms', 'p95']] as const) {
      const api = await h.ctx.platform.get('/v1/metrics').set(bearer(p.key)).query({ metric, aggregation, interval: '1h', start_time: buckets[0], end_time: end, project_id: p.projectId });
      const values = (api.body.data.series[0]?.datapoints ?? []).map((d: { value: number | null }) => (d.value === null ? '—' : String(Math.round(d.value * 100) / 100)));
      // Thousands are grouped on the page ("1,200"): read back without the separators.
      const shown = (await page.locator(`tr[data-bucket] td[data-field="${field}"]`).allInnerTexts()).map((t) => t.replaceAll(',', ''));
      expect(shown, field).toEqual(values);
    }
    await h.check(page, 'explorer-metrics');
    const busy = await page.locator('tr[data-bucket]').evaluateAll((rows) => rows.findIndex((r) => (r as unknown as El).querySelector('td[data-field="requests"]')!.innerText !== '0'));
    expect(busy).toBeGreaterThanOrEqual(0);
    await page.locator('tr[data-bucket]').nth(busy).getByRole('link').click();
    await page.getByRole('heading', { name: 'Traces', level: 1 }).waitFor();
    expect(page.url()).toContain('start_time=');
    await page.locator('tr[data-trace-id]').first().waitFor();
    await h.check(page, 'explorer-bucket-traces');
  });

  it('the price table: the API\'s entries, and a developer sets an override by keyboard', async () => {
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/prices`);
    await page.getByRole('table', { name: 'Model prices' }).waitFor();
    const api = (await h.ctx.platform.get(`/v1/projects/${p.projectId}/model-prices`).set(bearer(p.key))).body.data as Array<{ model: string }>;
    expect(await page.locator('tr[data-model]').count()).toBe(api.length);
    await page.getByLabel('Model', { exact: true }).fill('my-finetune');
    await page.getByLabel('Input').fill('3');
    await page.getByLabel('Output').fill('12');
    await page.getByLabel('Output').press('Enter');
    await page.locator('tr[data-model="my-finetune"]').waitFor();
    const after = (await h.ctx.platform.get(`/v1/projects/${p.projectId}/model-prices`).set(bearer(p.key))).body.data as Array<{ model: string; source: string }>;
    expect(after).toContainEqual({ model: 'my-finetune', input_per_million: 3, output_per_million: 12, source: 'project' });
    await h.check(page, 'explorer-prices');
  });

  it("follows a session: its traces in conversation order", async () => {
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/sessions`);
    await page.getByRole('link', { name: 'conv-1' }).click();
    await page.locator('tr[data-trace-id]').first().waitFor();
    const shown = await page.locator('tr[data-trace-id]').evaluateAll((rows) => rows.map((r) => (r as unknown as El).dataset.traceId));
    expect(shown).toEqual([ids.chat, ids.second]);
    // A user's page: the API's totals, and their sessions one click away.
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/users`);
    await page.locator('tr[data-user="user-42"]').waitFor();
    const api = (await h.ctx.platform.get('/v1/users').set(bearer(p.key))).body.data as Array<{ user_id: string; trace_count: number }>;
    expect(await page.locator('tr[data-user]').count()).toBe(api.length);
    await page.getByRole('link', { name: 'user-42' }).click();
    await page.getByRole('heading', { name: 'Sessions of user-42', level: 1 }).waitFor();
    await page.getByRole('link', { name: 'conv-1' }).waitFor();
    await h.check(page, 'explorer-user-sessions');
    expect(h.pageErrors).toEqual([]);
  });
});
