/**
 * Issue 27, item 11: scripts/examples/x402-agent-pay.ts ends a refusal with one clear line and a
 * non-zero exit, never an uncaught stack trace (the script as a user runs it, through tsx).
 */
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { AgentApiError } from '../../src/client/index.js';
import { explainFailure } from '../../scripts/examples/x402-agent-pay.js';

function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ['--import', 'tsx', 'scripts/examples/x402-agent-pay.ts', ...args], { env: { ...process.env, ...env }, timeout: 60_000 }, (_err, stdout, stderr) =>
      resolve({ code: child.exitCode, stdout, stderr }),
    );
  });
}

describe('x402-agent-pay.ts refusals', () => {
  it('names the wallet policy refusal wrapped by @x402/fetch, with its status and code', () => {
    const refusal = new AgentApiError(403, 'POLICY_VIOLATION', 'Denied by policy "USDC ≤ 5": value 10000000 exceeds 5000000');
    const wrapped = new Error('Failed to create payment payload', { cause: refusal });
    expect(explainFailure(wrapped)).toEqual({ message: 'Kassa refused to sign the payment: Denied by policy "USDC ≤ 5": value 10000000 exceeds 5000000', status: 403, code: 'POLICY_VIOLATION' });
    expect(explainFailure(new Error('fetch failed'))).toEqual({ message: 'fetch failed' });
  });

  it('usage and a bad key: one line, exit code 2 / 1, no stack trace', async () => {
    const usage = await run([], { KASSA_AGENT_WALLET_KEY: '' });
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('usage: ');
    expect(usage.stderr).not.toMatch(/\n\s+at /);
    const bad = await run(['http://127.0.0.1:9/report'], { KASSA_AGENT_WALLET_KEY: 'not-a-key' });
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stderr.trim())).toMatchObject({ step: 'payment refused', message: expect.stringContaining('Agent Wallet Key') });
    expect(bad.stderr).not.toMatch(/\n\s+at /);
  }, 120_000);
});
