/**
 * The admin CLI's wallet, agent, policy and credit nouns, run through the CLI's own entry in-process
 * (test/harness/admin-cli.ts) against the admin app over HTTP, and the Agent Wallet Key it prints
 * driving the agent client. The child-process contract is test/admin-cli.test.ts's.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createAgentClient } from '../../src/client/agent.js';
import { listenPlatform, PUBLIC_API_URL, usdcTransfer } from './helpers.js';
import { runAdminCli, type AdminCliResult } from '../harness/admin-cli.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let ctx: TestContext;
let server: Server;
let adminUrl: string;
let tmp: string;

type RunResult = AdminCliResult;

const run = (args: string[]): Promise<RunResult> => runAdminCli(adminUrl, ctx.adminToken, args);

async function ok(args: string[]) {
  const result = await run(args);
  expect(result.stderr, result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout);
}

async function fails(args: string[]) {
  const result = await run(args);
  expect(result.stdout).toBe('');
  return { code: result.code, error: JSON.parse(result.stderr).error };
}

beforeAll(async () => {
  ctx = await createTestContext();
  server = await new Promise<Server>((resolve) => {
    const s = ctx.apps.admin.listen(0, '127.0.0.1', () => resolve(s));
  });
  adminUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  tmp = await mkdtemp(path.join(os.tmpdir(), 'kassa-agent-cli-'));
});
afterAll(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await ctx?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('agent wallet CLI', { timeout: 120_000 }, () => {
  let walletId: string;
  let walletAddress: string;
  let agentId: string;
  let agentWalletKey: string;

  it('wallet create / list', async () => {
    const wallet = await ok(['wallet', 'create', '--org', ctx.orgA.orgId, '--name', 'CLI wallet']);
    expect(wallet).toMatchObject({ orgId: ctx.orgA.orgId, name: 'CLI wallet' });
    walletId = wallet.walletId;
    walletAddress = wallet.walletAddress;
    expect((await ok(['wallet', 'list', '--org', ctx.orgA.orgId])).map((w: { walletId: string }) => w.walletId)).toEqual([walletId]);
  });

  it('agent create prints the Agent Wallet Key once; the client signs with it', async () => {
    const agent = await ok(['agent', 'create', '--org', ctx.orgA.orgId, '--name', 'CLI agent', '--wallet', walletId]);
    expect(agent.agentWalletKey).toEqual(expect.any(String));
    agentId = agent.agentId;
    agentWalletKey = agent.agentWalletKey;
    const listed = await ok(['agent', 'list', '--org', ctx.orgA.orgId]);
    expect(JSON.stringify(listed)).not.toContain(agentWalletKey);

    const transport = await listenPlatform(ctx);
    try {
      const client = createAgentClient({ agentWalletKey, baseUrl: PUBLIC_API_URL, fetch: transport.fetch, now: () => ctx.clock.now().getTime() });
      expect(client.walletId).toBe(walletId);
      const signed = await client.signTypedData(usdcTransfer(walletAddress, '1000000'));
      expect(signed.walletAddress).toBe(walletAddress);
    } finally {
      await transport.close();
    }
  });

  it('policy create reads a JSON file; an invalid policy is refused with the API message', async () => {
    const file = path.join(tmp, 'deny-all.json');
    await writeFile(file, JSON.stringify({ version: '1.0', name: 'Freeze', chain_type: 'ethereum', rules: [{ name: 'Deny everything', method: '*', action: 'DENY', conditions: [] }] }));
    const created = await ok(['policy', 'create', '--wallet', walletId, '--file', file]);
    expect(created).toMatchObject({ name: 'Freeze', walletId });
    const list = await ok(['policy', 'list', '--wallet', walletId]);
    expect(list.map((p: { name: string }) => p.name)).toEqual(['Default: USDC transfers up to 5 USDC', 'Freeze']);
    await ok(['policy', 'delete', '--policy', created.id]);

    const bad = path.join(tmp, 'bad.json');
    await writeFile(bad, JSON.stringify({ version: '1.0', name: 'Bad', chain_type: 'ethereum', rules: [{ name: 'x', method: '*', action: 'ALLOW', conditions: [{ field_source: 'system', field: 'block', operator: 'gt', value: 1 }] }] }));
    const refused = await fails(['policy', 'create', '--wallet', walletId, '--file', bad]);
    expect(refused).toEqual({ code: 1, error: { code: 'VALIDATION_ERROR', status: 400, message: "rules[0].conditions[0].field: 'block' is not a system field (current_unix_timestamp)" } });

    const notJson = path.join(tmp, 'not.json');
    await writeFile(notJson, '{');
    expect((await fails(['policy', 'create', '--wallet', walletId, '--file', notJson])).code).toBe(2);
  });

  it('policy list output is policy create input: list → file → create on another wallet gives the same policies', async () => {
    const source = await ok(['wallet', 'create', '--org', ctx.orgA.orgId, '--name', 'Source']);
    const target = await ok(['wallet', 'create', '--org', ctx.orgA.orgId, '--name', 'Target']);
    await ok(['policy', 'create', '--wallet', source.walletId, '--file', path.join(repoRoot, 'scripts/examples/agent-wallet-policy.json')]);
    const definition = ({ name, version, chainType, rules, spendLimits }: Record<string, unknown>) => ({ name, version, chainType, rules, spendLimits });

    // The whole list: every policy attached in order.
    const listed = await run(['policy', 'list', '--wallet', source.walletId]);
    expect(listed.code).toBe(0);
    const file = path.join(tmp, 'listed.json');
    await writeFile(file, listed.stdout);
    const copies = await ok(['policy', 'create', '--wallet', target.walletId, '--file', file]);
    const sourcePolicies = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
    expect(sourcePolicies).toHaveLength(2);
    expect(copies.map((p: Record<string, unknown>) => p.walletId)).toEqual([target.walletId, target.walletId]);
    const targetPolicies = await ok(['policy', 'list', '--wallet', target.walletId]);
    // The target's own default policy first, then the two copies, identical in definition.
    expect(targetPolicies.slice(1).map(definition)).toEqual(sourcePolicies.map(definition));
    expect(sourcePolicies[1]!.spendLimits).toHaveLength(1);

    // One listed policy on its own: the same object `policy create` printed.
    const one = path.join(tmp, 'one.json');
    await writeFile(one, JSON.stringify(sourcePolicies[1]));
    expect(definition(await ok(['policy', 'create', '--wallet', target.walletId, '--file', one]))).toEqual(definition(sourcePolicies[1]!));

    // Both spellings of one field: which one was meant is unclear, so nothing is sent.
    const both = path.join(tmp, 'both.json');
    await writeFile(both, JSON.stringify({ ...sourcePolicies[1], chain_type: 'ethereum' }));
    const refused = await fails(['policy', 'create', '--wallet', target.walletId, '--file', both]);
    expect(refused.code).toBe(2);
    expect(refused.error.message).toContain('both chainType and chain_type');
    expect(await ok(['policy', 'list', '--wallet', target.walletId])).toHaveLength(4);
  });

  it('agent assign / rotate-key / revoke', async () => {
    expect((await ok(['agent', 'assign', '--agent', agentId, '--unassign'])).walletId).toBeNull();
    expect((await ok(['agent', 'assign', '--agent', agentId, '--wallet', walletId])).walletId).toBe(walletId);
    expect((await fails(['agent', 'assign', '--agent', agentId])).code).toBe(2);
    const rotated = await ok(['agent', 'rotate-key', '--agent', agentId]);
    expect(rotated.agentWalletKey).not.toBe(agentWalletKey);
    const revoked = await ok(['agent', 'revoke', '--agent', agentId]);
    expect(revoked.revoked).toBe(true);
  });

  it('credit grant takes whole units and prints the balance', async () => {
    const granted = await ok(['credit', 'grant', '--org', ctx.orgA.orgId, '--amount', '2.5', '--unit', 'USDC', '--reason', 'CLI']);
    expect(granted).toMatchObject({ amount: 2_500_000, unit: 'USDC', reason: 'CLI', balanceMinor: 2_500_000, balance: 2.5 });
    expect(await ok(['credit', 'balance', '--org', ctx.orgA.orgId])).toMatchObject({ balance: 2.5, unit: 'USDC' });
    const wrong = await fails(['credit', 'grant', '--org', ctx.orgA.orgId, '--amount', '1.0000001']);
    expect(wrong.code).toBe(2);
    expect(wrong.error.message).toContain('at most 6 decimals');
  });
});
