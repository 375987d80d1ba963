/**
 * `npm run bench:console` (issue 30's budgets for the browser console):
 * - the initial JavaScript (and CSS) of /console/, gzip and brotli at their highest levels,
 *   against 200 KB compressed;
 * - the first render of each page in headless Chromium: from navigation start until the page's
 *   heading is shown and no "Loading…" remains (its data is on screen), against 1 s; the median
 *   of BENCH_RUNS loads (default 5, short 3) per page, each in a fresh browser context (cold
 *   cache, nothing reused but the session cookie).
 * Kassa runs in-process on an embedded database (PGlite) seeded with BENCH_CONSOLE_ORDERS orders
 * (default 2,000) so the lists and home have data; the server time of lists at 100,000 orders is
 * bench:growth's and bench:metrics' business.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { PGlite } from '@electric-sql/pglite';
import { chromium } from 'playwright-core';
import { createMerchantApp } from '../../src/apps.js';
import { buildConsole, CONSOLE_DIST_DIR } from '../../src/console/build.js';
import { loadConfig } from '../../src/config.js';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { systemClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices } from '../../src/services.js';
import { emit, median, report, round, shortRun, summary, target } from './summary.js';

const RUNS = Number(process.env.BENCH_RUNS ?? (shortRun ? 3 : 5));
const ORDERS = Number(process.env.BENCH_CONSOLE_ORDERS ?? (shortRun ? 500 : 2000));
const JS_BUDGET_KB = 200;
const RENDER_BUDGET_MS = 1000;
const PASSWORD = 'bench console password';

async function main(): Promise<void> {
  const built = await buildConsole();
  const [script, style] = await Promise.all([readFile(path.join(CONSOLE_DIST_DIR, built.script)), readFile(path.join(CONSOLE_DIST_DIR, built.style))]);
  const size = (buffer: Buffer) => ({
    raw: buffer.length,
    gzip: gzipSync(buffer, { level: 9 }).length,
    brotli: brotliCompressSync(buffer, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }).length,
  });
  const js = size(script);
  const css = size(style);

  // An in-process Kassa whose PUBLIC_BASE_URL is the port it listens on (the console's Origin check).
  let handler: ((req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void) | undefined;
  const server = createServer((req, res) => (handler ? handler(req, res) : res.writeHead(503).end())).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const config = loadConfig({ NODE_ENV: 'development', LOG_LEVEL: 'silent', PUBLIC_BASE_URL: origin, PUBLIC_API_URL: 'http://127.0.0.1:1', HOSTED_RATE_LIMIT_PER_MINUTE: '0', MERCHANT_RATE_LIMIT_PER_MINUTE: '1000000' }, []);
  const database = await openDatabase({ pglite: new PGlite() });
  await migrateLatest(database.db);
  const logger = createLogger({ level: 'silent' });
  const services = createServices({ db: database.db, clock: systemClock, secretBox: new SecretBox(randomBytes(32)), config, logger });
  await services.signingKeys.ensureKey();
  const app = await createMerchantApp({ config, database, clock: systemClock, logger, services, adminToken: 'kadm_bench' });
  handler = app as unknown as typeof handler;
  const org = await services.orgs.createOrganization({ name: 'Bench shop' });
  const accounts = services.modules.accounts.accounts;
  const invite = await accounts.invite({ orgId: org.id, email: 'owner@bench.test', role: 'owner', by: { type: 'operator' }, clientAddress: null });
  await accounts.acceptInvite({ token: new URL(invite.url).hash.replace('#token=', ''), password: PASSWORD, clientAddress: null });
  const ids = await seed(database.db, org.id, ORDERS);

  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const signIn = await fetch(`${origin}/v1/console/sign-in`, { method: 'POST', headers: { 'Content-Type': 'application/json', Origin: origin }, body: JSON.stringify({ email: 'owner@bench.test', password: PASSWORD }) });
  const cookie = /^([^=]+)=([^;]+)/.exec(signIn.headers.get('set-cookie') ?? '');
  if (!cookie) throw new Error(`sign-in answered ${signIn.status} without a cookie`);
  const pages: Array<[string, string, string | RegExp]> = [
    ['sign-in', '/console/sign-in', 'Sign in to Kassa'],
    ['home', '/console/', 'Home'],
    ['orders', '/console/orders', 'Orders'],
    ['order', `/console/orders/${ids.order}`, /^Order ORD_/],
    ['subscriptions', '/console/subscriptions', 'Subscriptions'],
    ['customers', '/console/customers', 'Customers'],
    ['customer', `/console/customers/${ids.customer}`, /@bench\.test$/],
    ['developers', '/console/developers', 'Developers'],
    ['settings', '/console/settings/members', 'Settings'],
    ['audit-log', '/console/settings/audit-log', 'Settings'],
  ];
  const renders: Record<string, { medianMs: number; runs: number[] }> = {};
  try {
    for (const [name, url, heading] of pages) {
      const runs: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
        if (name !== 'sign-in') await context.addCookies([{ name: cookie[1]!, value: cookie[2]!, domain: '127.0.0.1', path: '/', secure: true, httpOnly: true, sameSite: 'Lax' }]);
        const page = await context.newPage();
        await page.goto(`${origin}${url}`, { waitUntil: 'commit' });
        await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
        // Locators, not a predicate string: the console's CSP (script-src 'self') forbids the eval a string needs.
        const loading = page.locator('[role=status]', { hasText: /Loading|Checking/ });
        while ((await loading.count()) > 0) await loading.first().waitFor({ state: 'detached' });
        runs.push(await page.evaluate(() => performance.now()));
        await context.close();
      }
      renders[name] = { medianMs: round(median(runs)), runs: runs.map(round) };
    }
  } finally {
    await browser.close();
    server.close();
    await database.close();
  }
  const kb = (bytes: number) => round(bytes / 1024);
  report(`console bundle: JavaScript ${kb(js.raw)} KB raw, ${kb(js.gzip)} KB gzip, ${kb(js.brotli)} KB brotli; CSS ${kb(css.raw)} KB raw, ${kb(css.gzip)} KB gzip, ${kb(css.brotli)} KB brotli`);
  for (const [name, r] of Object.entries(renders)) report(`first render ${name.padEnd(14)} ${String(r.medianMs).padStart(7)} ms (median of ${r.runs.join(', ')})`);
  const slowest = Object.entries(renders).sort((a, b) => b[1].medianMs - a[1].medianMs)[0]!;
  emit(
    summary('console', {
      settings: { runs: RUNS, orders: ORDERS, viewport: '1280x800', chromium: browser.version() },
      figures: { javascript: js, css, renders },
      floors: {},
      targets: [
        target('initial JavaScript, gzip', kb(js.gzip), 'KB', JS_BUDGET_KB, true),
        target('initial JavaScript, brotli', kb(js.brotli), 'KB', JS_BUDGET_KB, true),
        target(`first render, slowest page (${slowest[0]})`, slowest[1].medianMs, 'ms', RENDER_BUDGET_MS, true),
      ],
    }),
  );
}

/** Orders, customers and a subscription, written straight into the tables (as the console's browser tests seed them). */
async function seed(db: import('knex').Knex, orgId: string, orders: number): Promise<{ order: string; customer: string }> {
  const now = Date.now();
  let n = 0;
  const id = (prefix: string) => `${prefix}_bench${String(++n).padStart(19, '0')}`;
  const customers = Array.from({ length: 50 }, (_, i) => ({ id: id('CUS'), org_id: orgId, email: `buyer${i}@bench.test`, created_at: new Date(now - i * 3_600_000) }));
  await db('customers').insert(customers);
  const rows = Array.from({ length: orders }, (_, i) => {
    const c = customers[i % customers.length]!;
    const created = new Date(now - Math.floor((i / orders) * 90 * 86_400_000));
    return {
      id: id('ORD'), org_id: orgId, status: i % 9 === 4 ? 'FAILED' : 'PAID', provider: 'STRIPE', amount_cents: 500 + (i % 97) * 100, amount_refunded_cents: 0,
      currency: i % 5 === 0 ? 'EUR' : 'USD', customer_id: c.id, customer_email: c.email, product_name: 'Plan', processor_payment_id: `pi_bench${i}`,
      created_at: created, updated_at: created,
    };
  });
  for (let i = 0; i < rows.length; i += 500) await db('orders').insert(rows.slice(i, i + 500));
  return { order: rows[0]!.id, customer: customers[0]!.id };
}

await main();
