/**
 * Accessibility checks for the browser tests: axe-core's serious and critical violations of a page
 * (WCAG 2 A/AA and best practices) and keyboard-only navigation (Tab until an element has focus).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core's serious and critical violations of the page (the hosted pages' CSP forbids scripts: open them in a context with bypassCSP). */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE_SOURCE);
  const result = (await page.evaluate(`axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } })`)) as {
    violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }>;
  };
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.nodes.map((x) => x.target.join(' ')).join(', ')}`);
}

/** Presses Tab until the focused element matches `selector` (keyboard-only navigation). */
export async function tabTo(page: Page, selector: string, max = 40): Promise<void> {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(`document.activeElement?.matches(${JSON.stringify(selector)}) ?? false`)) return;
  }
  throw new Error(`${selector} is not reachable with Tab`);
}

/** Tabs to `selector` and presses Enter, waiting for the page it opens. */
export async function activate(page: Page, selector: string): Promise<void> {
  await tabTo(page, selector);
  await Promise.all([page.waitForLoadState('load'), page.waitForNavigation(), page.keyboard.press('Enter')]);
}
