/**
 * The rendered API reference opens offline: every document rendered by `npm run docs` and served
 * at `/docs/<name>`, and the `/docs` index, load in headless Chromium with every request outside
 * the local server aborted, and not one request fails or leaves the machine (no CDN asset, no
 * telemetry beacon), even seconds after loading.
 */
import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable, launchChromium, serveOnLoopback } from '../harness/browser.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import type { Browser } from 'playwright-core';
import { DOCUMENT_NAMES, registerDocsRoutes } from '../../src/docs/docs.js';


const ARTIFACTS = 'test/e2e/.artifacts';
const run = promisify(execFile);

let tmp: string;
let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let origin: string;
let browser: Browser;

describe.skipIf(!chromiumAvailable)(skippedUnless('the API reference with the network blocked', 'chromium'), () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    tmp = await mkdtemp(path.join(os.tmpdir(), 'kassa-docs-offline-'));
    await run('npx', ['tsx', 'scripts/docs.ts', '--out', tmp], { timeout: 120_000 });
    const app = express();
    const router = express.Router();
    registerDocsRoutes(router, { documents: DOCUMENT_NAMES, docsDir: tmp });
    app.use(router);
    served = await serveOnLoopback(app);
    origin = served.origin;
    browser = await launchChromium();
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await served?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  /** Opens a page with everything but the local server aborted; returns the requests that failed. */
  async function openOffline(url: string, screenshot: string): Promise<{ failed: string[]; blocked: string[]; status: number }> {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const blocked: string[] = [];
    const failed: string[] = [];
    await page.route('**/*', (route) => {
      const { hostname, protocol } = new URL(route.request().url());
      if (protocol === 'data:' || protocol === 'blob:' || hostname === '127.0.0.1') return route.continue();
      blocked.push(route.request().url());
      return route.abort('internetdisconnected');
    });
    page.on('requestfailed', (request) => failed.push(`${request.url()} (${request.failure()?.errorText})`));
    // Redoc renders a large document on load: a loaded 2-core machine took over Playwright's 30 s.
    page.setDefaultTimeout(180_000);
    const response = await page.goto(url, { waitUntil: 'load' });
    await page.waitForLoadState('networkidle');
    // Telemetry is sent in batches a few seconds after the page loads: leave it the time to try.
    await page.waitForTimeout(6000);
    await page.screenshot({ path: `${ARTIFACTS}/${screenshot}.png` });
    await page.close();
    return { failed, blocked, status: response!.status() };
  }

  /**
   * The pages opened two at a time, each in its own tab: the seconds each one waits for late
   * requests overlap, while six Redoc renders at once starved a loaded machine (a 30 s load
   * timeout in CI). Started on first use, read by the tests below.
   */
  let opened: Promise<Map<string, Awaited<ReturnType<typeof openOffline>>>> | undefined;
  function openAll() {
    opened ??= (async () => {
      const pages = [...DOCUMENT_NAMES.map((name) => [`/docs/${name}`, `docs-${name}`] as const), ['/docs', 'docs-index'] as const];
      const results = new Map<string, Awaited<ReturnType<typeof openOffline>>>();
      let next = 0;
      const tab = async () => {
        while (next < pages.length) {
          const [url, shot] = pages[next++]!;
          results.set(url, await openOffline(`${origin}${url}`, shot));
        }
      };
      await Promise.all([tab(), tab()]);
      return results;
    })();
    return opened;
  }

  it.each(DOCUMENT_NAMES.map((name) => [name]))('/docs/%s renders with no request leaving the machine', async (name) => {
    const result = (await openAll()).get(`/docs/${name}`)!;
    expect(result.status).toBe(200);
    expect(result.blocked).toEqual([]);
    expect(result.failed).toEqual([]);
  }, 900_000);

  it('/docs (the index) loads with no failed request', async () => {
    const result = (await openAll()).get('/docs')!;
    expect(result.status).toBe(200);
    expect(result.failed).toEqual([]);
  }, 900_000);

  it('every page is served under a Content-Security-Policy that lets the reference run and nothing else (issue 37 §15)', async () => {
    for (const url of [`${origin}/docs`, `${origin}/docs/merchant`]) {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const violations: string[] = [];
      page.on('console', (message) => {
        if (/Content[- ]Security[- ]Policy/i.test(message.text())) violations.push(message.text());
      });
      page.setDefaultTimeout(180_000);
      const response = await page.goto(url, { waitUntil: 'load' });
      const policy = response!.headers()['content-security-policy'] ?? '';
      expect(policy).toContain("default-src 'none'");
      expect(policy).toContain("frame-ancestors 'none'");
      expect(policy).not.toMatch(/script-src[^;]*'unsafe-(inline|eval)'/);
      if (url.endsWith('/merchant')) {
        // Redoc ran under the policy: its navigation lists the document's tags.
        await page.getByText('Checkout Sessions', { exact: true }).first().waitFor({ timeout: 30_000 });
      }
      await page.waitForTimeout(1000);
      expect(violations).toEqual([]);
      await page.close();
    }
  });
});
