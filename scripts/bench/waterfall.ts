/**
 * The trace page's waterfall in headless Chromium with a 5,000-span trace (issue 31: ≤ 500 ms).
 * An in-process Kassa on an embedded database (PGlite) serves the console; each run opens the
 * trace page in a fresh browser context and measures, in the page, from the moment the trace's
 * answer arrived (the resource timing's responseEnd of GET …/traces/{id}) until the waterfall's
 * rows are on screen (the next animation frame after the first treeitem): the render time. The
 * navigation-to-waterfall time (which includes the server's read) is printed beside it.
 *
 *   npx tsx scripts/bench/waterfall.ts     (prints only; npm run bench -- --only explorer runs it too)
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { chromium } from 'playwright-core';
import { createMerchantApp } from '../../src/apps.js';
import { buildConsole } from '../../src/console/build.js';
import { loadConfig } from '../../src/config.js';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { systemClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices } from '../../src/services.js';
import { writeBigTrace } from './big-trace.js';
import { median, report, round, shortRun } from './summary.js';

export const WATERFALL_TARGET_MS = 500;
const PASSWORD = 'bench waterfall password';

export async function benchWaterfall(spans = 5000): Promise<{ renderMs: number; renderRuns: number[]; navigationMs: number }> {
  const runs = Number(process.env.BENCH_RUNS ?? (shortRun ? 3 : 5));
  await buildConsole();
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const server = createServer((req, res) => (handler ? handler(req, res) : res.writeHead(503).end())).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const config = loadConfig({ NODE_ENV: 'development', LOG_LEVEL: 'silent', PUBLIC_BASE_URL: origin, PUBLIC_API_URL: 'http://127.0.0.1:1', HOSTED_RATE_LIMIT_PER_MINUTE: '0', MERCHANT_RATE_LIMIT_PER_MINUTE: '1000000' }, []);
  const database = await openDatabase({ pglite: new PGlite() });
  await migrateLatest(database.db);
  const logger = createLogger({ level: 'silent' });
  const services = createServices({ db: database.db, clock: systemClock, secretBox: new SecretBox(randomBytes(32)), config, logger });
  await services.signingKeys.ensureKey();
  handler = (await createMerchantApp({ config, database, clock: systemClock, logger, services, adminToken: 'kadm_bench' })) as unknown as typeof handler;
  const org = await services.orgs.createOrganization({ name: 'Bench waterfall' });
  const accounts = services.modules.accounts.accounts;
  const invite = await accounts.invite({ orgId: org.id, email: 'owner@bench.test', role: 'owner', by: { type: 'operator' }, clientAddress: null });
  await accounts.acceptInvite({ token: new URL(invite.url).hash.replace('#token=', ''), password: PASSWORD, clientAddress: null });
  const project = await services.telemetry.projects.create(org.id, { name: 'Waterfall' });
  const traceId = await writeBigTrace(database.db, project.id, spans, Date.now() - 3_600_000, false);

  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const signIn = await fetch(`${origin}/v1/console/sign-in`, { method: 'POST', headers: { 'Content-Type': 'application/json', Origin: origin }, body: JSON.stringify({ email: 'owner@bench.test', password: PASSWORD }) });
  const cookie = /^([^=]+)=([^;]+)/.exec(signIn.headers.get('set-cookie') ?? '');
  if (!cookie) throw new Error(`sign-in answered ${signIn.status} without a cookie`);
  const render: number[] = [];
  const navigation: number[] = [];
  try {
    for (let i = 0; i < runs + 1; i++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      await context.addCookies([{ name: cookie[1]!, value: cookie[2]!, domain: '127.0.0.1', path: '/', secure: true, httpOnly: true, sameSite: 'Lax' }]);
      const page = await context.newPage();
      await page.goto(`${origin}/console/telemetry/${project.id}/traces/${traceId}`, { waitUntil: 'commit' });
      await page.locator('[role=treeitem]').first().waitFor();
      const t = (await page.evaluate(`new Promise((resolve) => requestAnimationFrame(() => {
        const shown = performance.now();
        const answer = performance.getEntriesByType('resource').filter((e) => e.name.includes('/traces/${traceId}')).at(-1);
        resolve({ shown, answered: answer ? answer.responseEnd : NaN, rows: document.querySelectorAll('[role=treeitem]').length, count: document.querySelector('[data-field=span-count]')?.textContent });
      }))`)) as { shown: number; answered: number; rows: number; count: string };
      if (t.count !== String(spans)) throw new Error(`the page shows ${t.count} spans, expected ${spans}`);
      if (i > 0) {
        // The first load warms the server's caches and Chromium's code cache; it is not counted.
        render.push(t.shown - t.answered);
        navigation.push(t.shown);
      }
      await context.close();
    }
  } finally {
    await browser.close();
    server.close();
    await database.close();
  }
  return { renderMs: round(median(render)), renderRuns: render.map(round), navigationMs: round(median(navigation)) };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchWaterfall()
    .then((r) => report(`waterfall of 5,000 spans in headless Chromium: render ${r.renderMs} ms after the answer (runs ${r.renderRuns.join(', ')}; target ≤ ${WATERFALL_TARGET_MS} ms), navigation to waterfall ${r.navigationMs} ms`))
    .catch((err) => {
      process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    });
}
