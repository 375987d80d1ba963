/**
 * A telemetry project's settings page in Chromium (issue 31): name, environment, sample rate and
 * retention saved through the form equal the API's read; a telemetry key created on the page is
 * shown once, works on the telemetry API, lists with its last use and stops at revocation; the
 * Python and Node snippets carry the project's OTLP endpoint (the answer's `otlpEndpoint`,
 * PUBLIC_API_URL + /v1/otlp) and are docs/send-traces.md's blocks. axe-core clean, desktop and 390 px.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { chromiumAvailable } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { startConsoleHarness, type ConsoleHarness } from '../harness/console-browser.js';
import { bearer, createProjectWithKey, span, traceId, type TelemetryKeyFixture } from '../telemetry/helpers.js';
import { sendTracesSnippets } from '../../web/console/routes/telemetry/lib/snippets.js';

let h: ConsoleHarness;
let p: TelemetryKeyFixture;
let page: Page;

describe.skipIf(!chromiumAvailable)(skippedUnless('telemetry project settings page', 'chromium'), () => {
  beforeAll(async () => {
    h = await startConsoleHarness();
    p = await createProjectWithKey(h.ctx, h.ctx.orgA.orgId, 'Support bot');
    page = await h.signedInPage('developer');
  }, 120_000);
  afterAll(async () => {
    await h?.close();
  });

  it('saves name, environment, sample rate and retention; the API reads what the page saved', async () => {
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/settings`);
    await page.getByRole('heading', { name: 'Support bot settings', level: 1 }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('Support bot EU');
    await page.getByLabel('Environment').selectOption('staging');
    await page.getByLabel(/^Sample rate/).fill('0.5');
    await page.getByLabel('Retention (days)').fill('14');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByRole('heading', { name: 'Support bot EU settings', level: 1 }).waitFor();
    const { body } = await h.ctx.admin.get(`/v1/orgs/${h.ctx.orgA.orgId}/telemetry-projects`);
    expect(body.data.find((x: { projectId: string }) => x.projectId === p.projectId)).toMatchObject({ name: 'Support bot EU', environment: 'staging', sampleRate: 0.5, dataRetentionDays: 14 });
  });

  it('creates a key shown once that works on the telemetry API, lists its last use, and revokes it', async () => {
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/settings`);
    await page.getByLabel('Key name').fill('checkout-service');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.getByTestId('new-telemetry-key').textContent())!;
    expect(key).toMatch(/^tk_/);
    await page.getByRole('button', { name: 'Copy key' }).waitFor();
    await h.check(page, 'telemetry-settings');

    const sent = await h.ctx.platform.post('/v1/ingest').set(bearer(key)).send({ traces: [{ trace_id: traceId(), spans: [span({ start: Date.now() - 1000, durationMs: 10, name: 'hello' })] }] });
    expect(sent.status).toBe(202);
    await page.reload();
    const row = page.getByRole('row', { name: /checkout-service/ });
    await row.waitFor();
    expect(await page.getByTestId('new-telemetry-key').count()).toBe(0); // shown once
    expect(await row.innerText()).not.toContain('Never');

    await page.getByRole('button', { name: 'Revoke checkout-service' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).click();
    await page.getByRole('row', { name: /checkout-service.*Revoked/ }).waitFor();
    const refused = await h.ctx.platform.post('/v1/ingest').set(bearer(key)).send({ traces: [{ trace_id: traceId(), spans: [span({ start: Date.now() - 1000, durationMs: 10, name: 'late' })] }] });
    expect(refused.status).toBe(401);
  });

  it("shows the Python and Node snippets with the project's endpoint, as docs/send-traces.md writes them", async () => {
    await page.goto(`${h.origin}/console/telemetry/${p.projectId}/settings`);
    const endpoint = (await page.getByTestId('otlp-endpoint').textContent())!;
    expect(endpoint).toBe('http://api.test/v1/otlp'); // the test context's PUBLIC_API_URL
    for (const snippet of sendTracesSnippets(endpoint)) {
      await page.getByRole('button', { name: snippet.title }).click();
      for (const [i, block] of snippet.blocks.entries()) expect((await page.getByTestId(`snippet-${snippet.id}-${i}`).innerText()).trimEnd()).toBe(block.text.trimEnd());
    }
    await page.getByRole('button', { name: 'Node · OpenTelemetry SDK' }).click();
    expect(await page.getByTestId('snippet-node-otel-2').innerText()).toContain('OTEL_EXPORTER_OTLP_ENDPOINT=http://api.test/v1/otlp');
    await h.check(page, 'telemetry-settings-snippets');
    expect(h.pageErrors).toEqual([]);
  });
});
