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

export async function startConsoleHarness(options: { env?: Record<string, string> } = {}): Promise<ConsoleHarness> {
  mkdirSync(CONSOLE_SCREENSHOTS, { recursive: true });
  let app: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const served = await serveOnLoopback((req, res) => (app ? app(req, res) : res.writeHead(503).end()));
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
    await page.getByRole('button', { name: 'Sign in' }).click();
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
    for (const [label, size] of [['desktop', DESKTOP], ['390', PHONE]] as const) {
      await page.setViewportSize(size);
      // uPlot and the layout settle on the resize before the measurements.
      await page.evaluate('new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))');
      expect(await axeViolations(page), `${name} at ${label}: axe`).toEqual([]);
      const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
      expect(overflow, `${name} at ${label}: horizontal overflow`).toBeLessThanOrEqual(0);
      await page.screenshot({ path: `${CONSOLE_SCREENSHOTS}/${name}-${label}.png`, fullPage: true });
    }
    await page.setViewportSize(original);
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
