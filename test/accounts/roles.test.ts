/**
 * The role table is written three times — src/accounts/roles.ts (the one enforced),
 * openapi/console.yaml and docs/accounts.md — and the three agree: every permission the code
 * gives a role is ticked in both tables for that role, and nothing else is.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { MANAGEMENT_PERMISSIONS, ROLES, ROLE_PERMISSIONS } from '../../src/accounts/roles.js';
import { ALL_PERMISSIONS } from '../../src/orgs/permissions.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** `| \`a\`, \`b\` (words) | ✓ | ✓ | | | |` rows → role → permissions ticked. */
function tableOf(markdown: string): Map<string, Set<string>> {
  const ticked = new Map<string, Set<string>>(ROLES.map((r) => [r, new Set<string>()]));
  const header = markdown.split('\n').find((l) => /^\s*\| permission \| owner \| admin \| developer \| support \| viewer \|/.test(l));
  expect(header, 'the role table header').toBeDefined();
  for (const line of markdown.split('\n')) {
    const cells = line.trim().split('|').slice(1, -1).map((c) => c.trim());
    if (cells.length !== 6 || !cells[0]!.startsWith('`')) continue;
    const permissions = [...cells[0]!.matchAll(/`([a-z_0-9]+:[a-z_]+)`/g)].map((m) => m[1]!);
    ROLES.forEach((role, i) => {
      if (cells[i + 1] === '✓') for (const p of permissions) ticked.get(role)!.add(p);
    });
  }
  return ticked;
}

describe('the role table', () => {
  const code = new Map(ROLES.map((r) => [r, new Set<string>(ROLE_PERMISSIONS[r])]));
  const consoleDoc = parse(readFileSync(path.join(root, 'openapi/console.yaml'), 'utf8')) as { info: { description: string }; components: { schemas: { MemberPermission: { enum: string[] } } } };

  it('openapi/console.yaml says what roles.ts enforces', () => {
    const table = tableOf(consoleDoc.info.description);
    for (const role of ROLES) expect([...table.get(role)!].sort(), role).toEqual([...code.get(role)!].sort());
  });

  it('docs/accounts.md says what roles.ts enforces', () => {
    const table = tableOf(readFileSync(path.join(root, 'docs/accounts.md'), 'utf8'));
    for (const role of ROLES) expect([...table.get(role)!].sort(), role).toEqual([...code.get(role)!].sort());
  });

  it('the MemberPermission enum lists every permission once', () => {
    expect([...consoleDoc.components.schemas.MemberPermission.enum].sort()).toEqual([...ALL_PERMISSIONS, ...MANAGEMENT_PERMISSIONS].sort());
  });

  it('every console operation that names a permission names one of them', () => {
    const doc = parse(readFileSync(path.join(root, 'openapi/console.yaml'), 'utf8')) as { paths: Record<string, Record<string, { 'x-permission'?: string }>> };
    const known = new Set<string>([...ALL_PERMISSIONS, ...MANAGEMENT_PERMISSIONS]);
    for (const [p, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        if (typeof op === 'object' && op && 'x-permission' in op) expect(known.has(op['x-permission']!), `${method} ${p}`).toBe(true);
      }
    }
  });
});
