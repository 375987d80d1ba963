/**
 * Issue 27, item 11: the README promises Node 20.19+, yet `npm ci` on Node 20 warned EBADENGINE three
 * times (gcp-metadata 9, gaxios 8, google-logging-utils 2: Node >= 22, pulled in by the dev
 * dependency @traceloop/node-server-sdk through @google-cloud/opentelemetry-resource-util 3.1).
 * package.json's `overrides` keeps that branch on gcp-metadata 8; this holds every locked package to
 * Node 20.19 (ranges written as a plain lower bound, the form every such package uses).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const lock = JSON.parse(readFileSync(new URL('../package-lock.json', import.meta.url), 'utf8')) as { packages: Record<string, { version?: string; engines?: { node?: string } | string[] }> };

function minimumMajor(range: string): number | undefined {
  // ">=22", ">= 22.12.0", "^22": the lowest major a range admits; "||" ranges admit their lowest branch.
  const majors = range.split('||').map((branch) => /^\s*(?:>=|\^|~)?\s*v?(\d+)/.exec(branch)?.[1]).filter((m): m is string => m !== undefined);
  return majors.length ? Math.min(...majors.map(Number)) : undefined;
}

describe('locked packages and Node 20', () => {
  it('no package in package-lock.json requires a Node newer than 20 (npm ci prints no EBADENGINE)', () => {
    const tooNew: string[] = [];
    for (const [name, pkg] of Object.entries(lock.packages)) {
      const node = !Array.isArray(pkg.engines) ? pkg.engines?.node : undefined;
      if (!name || !node) continue;
      const major = minimumMajor(node);
      if (major !== undefined && major > 20) tooNew.push(`${name}@${pkg.version} (node ${node})`);
    }
    expect(tooNew).toEqual([]);
  });
});
