/**
 * CI fails when either test run failed (.ci/runs-passed). It ended green once with the PGlite run
 * failed: `[ pglite = 0 ] && [ postgres = 0 ]` under `set -e` does not stop on the first test.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function check(records: Record<string, string | undefined>, outputs: Record<string, string> = {}): { status: number | null; stderr: string } {
  const logs = mkdtempSync(path.join(os.tmpdir(), 'kassa-ci-'));
  dirs.push(logs);
  for (const [run, rc] of Object.entries(records)) if (rc !== undefined) writeFileSync(path.join(logs, `${run}.rc`), rc);
  for (const [run, output] of Object.entries(outputs)) writeFileSync(path.join(logs, `${run}.log`), output);
  const result = spawnSync('bash', ['.ci/runs-passed', logs, 'pglite', 'postgres'], { encoding: 'utf8' });
  return { status: result.status, stderr: result.stderr };
}

describe('.ci/runs-passed', () => {
  it('prints a failed run’s failing tests again, last, without its passing ones (a record keeping the tail named none)', () => {
    const output = [
      '\x1b[32m ✓\x1b[39m  shared  test/a.test.ts (3 tests) 812ms',
      '     ✓ a create that timed out after Stripe made the session answers 503  2872ms',
      ' ❯  shared  test/b.test.ts (2 tests | 1 failed) 1825ms',
      '     × keeps claiming new events while a slow delivery holds a slot 1825ms',
      ' FAIL   shared  test/b.test.ts > the delivery job > keeps claiming new events while a slow delivery holds a slot',
      'AssertionError: expected false to be true // Object.is equality',
      ' Test Files  1 failed | 1 passed (2)',
    ].join('\n');
    const { status, stderr } = check({ pglite: '1\n', postgres: '0\n' }, { pglite: output, postgres: ' ✓  shared  test/a.test.ts (3 tests) 812ms\n' });
    expect(status).toBe(1);
    const lines = stderr.trim().split('\n');
    expect(lines[0]).toBe('--- what failed in the pglite run (from its output above) ---');
    expect(lines).toContain('     × keeps claiming new events while a slow delivery holds a slot 1825ms');
    expect(lines).toContain('AssertionError: expected false to be true // Object.is equality');
    expect(stderr).not.toContain('✓');
    expect(lines.at(-1)).toBe('the pglite run failed (exit code 1)');
  });

  it('passes when both runs recorded 0', () => {
    expect(check({ pglite: '0\n', postgres: '0\n' })).toEqual({ status: 0, stderr: '' });
  });

  it('fails when the first run failed, the second passed, and names it', () => {
    expect(check({ pglite: '1\n', postgres: '0\n' })).toEqual({ status: 1, stderr: 'the pglite run failed (exit code 1)\n' });
  });

  it('fails when the second run failed, or both', () => {
    expect(check({ pglite: '0\n', postgres: '1\n' }).status).toBe(1);
    expect(check({ pglite: '1\n', postgres: '137\n' })).toEqual({ status: 1, stderr: 'the pglite run failed (exit code 1)\nthe postgres run failed (exit code 137)\n' });
  });

  it('fails when a run recorded nothing (killed before it wrote its code)', () => {
    expect(check({ pglite: '', postgres: '0\n' })).toEqual({ status: 1, stderr: 'the pglite run failed (exit code not recorded)\n' });
    expect(check({ postgres: '0\n' }).status).toBe(1);
  });

  it('is what .ci/run checks after the two runs', () => {
    expect(readFileSync('.ci/run', 'utf8')).toContain('\n.ci/runs-passed "$logs" pglite postgres\n');
  });
});
