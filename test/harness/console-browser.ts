/**
 * The console's browser-test harness: one Kassa (in-process apps on a fresh database) served on a
 * loopback port that is also its PUBLIC_BASE_URL (the console's CSRF check compares the Origin
 * with it), one headless Chromium per test file, members with passwords, sign-in through the
 * page, screenshots at desktop and 390 px width, and axe-core's serious violations.
 *
 *   const h = await startConsoleHarness();         // beforeAll
 *   const page = await h.signedInPage('owner');    // a new browser context, signed in
 *   await page.goto(`${h.origin}/console/orders`);
 *   await h.check(page, 'orders');                 // axe + no horizontal overflow + 2 screenshots
 *   await h.close();                               // afterAll
 *
 * The clock is the real time at start (the console computes "today" in the browser).
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { expect } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium, serveOnLoopback } from './browser.js';
import { createTestContext, type TestContext } from './context.js';
import type { Role } from '../../src/accounts/roles.js';

export const CONSOLE_SCREENSHOTS = 'test/e2e/.artifacts/screenshots/console';
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };
export const PASSWORD = 'correct horse battery staple';

export interface Member {
  email: string;
  password: string;
  userId: string;
}

export interface ConsoleHarness {
  ctx: TestContext;
  origin: string;
  browser: Browser;
  /** A member of org A with a password (created once per role and address). */
  member(role: Role, email?: string): Promise<Member>;
  /** A new browser context (its own cookies), signed in through the sign-in page as a member of that role. */
  signedInPage(role: Role, viewport?: { width: number; height: number }): Promise<Page>;
  signIn(page: Page, member: Member): Promise<void>;
  /** axe-core (WCAG 2 A/AA, best practice) serious and critical violations, none allowed; no horizontal overflow; screenshots at both widths. */
  check(page: Page, name: string): Promise<void>;
  axeViolations(page: Page): Promise<string[]>;
  /** Errors the pages printed (a CSP violation, an exception): none allowed. */
  pageErrors: string[];
  close(): Promise<void>;
}

/** `localhost: true` serves the console as http://localhost:PORT (WebAuthn wants an RP ID that is a domain; localhost is also a secure context). */
export async function startConsoleHarness(options: { env?: Record<string, string>; localhost?: boolean } = {}): Promise<ConsoleHarness> {
  mkdirSync(CONSOLE_SCREENSHOTS, { recursive: true });
  let app: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const loopback = await serveOnLoopback((req, res) => (app ? app(req, res) : res.writeHead(503).end()));
  const served = options.localhost ? { ...loopback, origin: loopback.origin.replace('127.0.0.1', 'localhost') } : loopback;
  const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: served.origin, ...options.env } });
  ctx.clock.set(new Date());
  app = ctx.apps.merchant as unknown as typeof app;
  const browser = await launchChromium();
  const contexts: BrowserContext[] = [];
  const members = new Map<string, Member>();
  const pageErrors: string[] = [];

  const member = async (role: Role, email = `${role}@console.test`): Promise<Member> => {
    const known = members.get(email);
    if (known) return known;
    const invite = await ctx.services.modules.accounts.accounts.invite({ orgId: ctx.orgA.orgId, email, role, by: { type: 'operator' }, clientAddress: null });
    const token = new URL(invite.url).hash.replace('#token=', '');
    const signedIn = await ctx.services.modules.accounts.accounts.acceptInvite({ token, password: PASSWORD, name: `${role} member`, clientAddress: null });
    const created = { email, password: PASSWORD, userId: signedIn.user.id };
    members.set(email, created);
    return created;
  };

  const signIn = async (page: Page, who: Member) => {
    await page.goto(`${served.origin}/console/sign-in`);
    await page.getByLabel('E-mail address').fill(who.email);
    await page.getByLabel('Password').fill(who.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.waitForURL(`${served.origin}/console/`);
    await page.getByRole('heading', { name: 'Home', level: 1 }).waitFor();
  };

  const newPage = async (viewport = DESKTOP) => {
    const context = await browser.newContext({ viewport });
    contexts.push(context);
    const page = await context.newPage();
    page.on('pageerror', (err) => pageErrors.push(`${page.url()}: ${err.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) pageErrors.push(`${page.url()}: ${message.text()}`);
    });
    return page;
  };

  const axeViolations = async (page: Page): Promise<string[]> => {
    await page.evaluate(AXE_SOURCE);
    const result = (await page.evaluate(`axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } })`)) as {
      violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }>;
    };
    return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.nodes.map((x) => x.target.join(' ')).join(', ')}`);
  };

  const check = async (page: Page, name: string) => {
    const original = page.viewportSize() ?? DESKTOP;
    try {
    for (const [label, size] of [['desktop', DESKTOP], ['390', PHONE]] as const) {
      await page.setViewportSize(size);
      // uPlot and the layout settle on the resize before the measurements.
      await page.evaluate('new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))');
      expect(await axeViolations(page), `${name} at ${label}: axe`).toEqual([]);
      const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
      if (overflow > 0) await page.screenshot({ path: `${CONSOLE_SCREENSHOTS}/${name}-${label}-overflow.png`, fullPage: true });
      // The innermost elements past the right edge name what overflows.
      const past = overflow > 0 ? ((await page.evaluate(`[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1 && ![...e.children].some((c) => c.getBoundingClientRect().right > document.documentElement.clientWidth + 1)).slice(0, 5).map((e) => e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).split(' ').join('.') : '') + ': ' + (e.textContent || '').slice(0, 60))`)) as string[]) : [];
      expect(overflow, `${name} at ${label}: horizontal overflow (${past.join(' | ')})`).toBeLessThanOrEqual(0);
      await page.screenshot({ path: `${CONSOLE_SCREENSHOTS}/${name}-${label}.png`, fullPage: true });
    }
    } finally {
      await page.setViewportSize(original);
    }
  };

  return {
    ctx,
    origin: served.origin,
    browser,
    member,
    signIn,
    signedInPage: async (role, viewport) => {
      const page = await newPage(viewport);
      await signIn(page, await member(role));
      return page;
    },
    check,
    axeViolations,
    pageErrors,
    close: async () => {
      for (const context of contexts) await context.close().catch(() => {});
      await browser.close();
      await served.close();
      await ctx.close();
    },
    // Exposed for tests that need a signed-out page.
    ...({ newPage } as object),
  } as ConsoleHarness & { newPage: typeof newPage };
}

let seq = 0;
const seedId = (prefix: string) => `${prefix}_console${String(++seq).padStart(17, '0')}`;

export interface SeededCommerce {
  customers: Array<{ id: string; email: string }>;
  cardOrderId: string;
  cryptoOrderId: string;
  subscriptionId: string;
  orderIds: string[];
}

/**
 * Rows for the list and detail pages, written straight into the tables (as the commerce-metrics
 * test does): `orders` orders over the last days (one card order with a Stripe payment id, one
 * crypto order with a transaction on Base), three customers, one subscription with its order.
 */
export async function seedCommerce(ctx: TestContext, orgId: string, orders = 30): Promise<SeededCommerce> {
  const db = ctx.testDb.database.db;
  const now = ctx.clock.now().getTime();
  const customers = [0, 1, 2].map((i) => ({ id: seedId('CUS'), email: `buyer${i}@console.test` }));
  await db('customers').insert(customers.map((c, i) => ({ id: c.id, org_id: orgId, email: c.email, created_at: new Date(now - i * 3_600_000) })));
  const orderIds: string[] = [];
  const rows: object[] = [];
  for (let i = 0; i < orders; i++) {
    const customer = customers[i % 3]!;
    const id = seedId('ORD');
    orderIds.push(id);
    const created = new Date(now - i * 5 * 3_600_000);
    const crypto = i === 1;
    rows.push({
      id, org_id: orgId, status: i % 7 === 3 ? 'FAILED' : 'PAID', provider: crypto ? 'CRYPTO' : 'STRIPE',
      amount_cents: crypto ? 25_000_000 : 1000 + i * 100, amount_refunded_cents: 0, currency: crypto ? 'USDC' : 'USD',
      customer_id: customer.id, customer_email: customer.email, product_name: i % 2 ? 'Pro plan' : 'Conference ticket',
      merchant_reference: `invoice-${1000 + i}`, created_at: created, updated_at: new Date(created.getTime() + 60_000),
      ...(crypto
        ? { chain: 'eip155:8453', from_address: '0x1f9840a85d5aF5bf1D1762F925BDADdC4201F984', tx_hash: `0x${'4e3a'.repeat(16)}` }
        : { processor_payment_id: `pi_console${i}` }),
    });
  }
  await db('orders').insert(rows);
  const subscriptionId = seedId('SUB');
  const start = new Date(now - 86_400_000);
  await db('subscriptions').insert({
    id: subscriptionId, org_id: orgId, status: 'ACTIVE', provider: 'STRIPE', customer_id: customers[0]!.id, customer_email: customers[0]!.email,
    product_name: 'Pro plan', amount_cents: 2900, currency: 'USD', billing_interval: 'MONTH', billing_interval_count: 1,
    current_period_start: start, current_period_end: new Date(start.getTime() + 30 * 86_400_000), billing_anchor: start,
    next_action_at: new Date(start.getTime() + 30 * 86_400_000), initial_order_id: orderIds[0], latest_order_id: orderIds[0],
    checkout_session_id: seedId('CS'), payment_method: 'pm', manage_token: seedId('mt'), created_at: start, updated_at: start,
  });
  await db('orders').where({ id: orderIds[0] }).update({ subscription_id: subscriptionId, billing_period: 0 });
  return { customers, cardOrderId: orderIds[0]!, cryptoOrderId: orderIds[1]!, subscriptionId, orderIds };
}
