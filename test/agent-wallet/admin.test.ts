/** Management of wallets, agents, policies and credit through the admin API, and org isolation. */
import { createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { getAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { decodeAgentWalletKey } from '../../src/agent-wallet/protocol.js';
import { agentHeaders, createAgent, createWallet, type TestWallet } from './helpers.js';

let ctx: TestContext;
const logLines: string[] = [];

beforeAll(async () => {
  ctx = await createTestContext({ env: { LOG_LEVEL: 'debug' }, logDestination: { write: (line) => void logLines.push(line) } });
});
afterAll(async () => {
  await ctx?.close();
});

const p256 = () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'der' }).toString('base64');

describe('wallets', () => {
  let first: TestWallet;

  it('creates a wallet with a checksummed address, a custody id and the org as app id; no key material', async () => {
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/wallets`).send({ name: 'Payments' });
    expect(res.status).toBe(201);
    first = res.body.data;
    expect(first).toEqual({
      walletId: expect.stringMatching(/^WLT_[0-9A-Za-z]{24}$/),
      orgId: ctx.orgA.orgId,
      name: 'Payments',
      walletAddress: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
      providerWalletId: expect.stringMatching(/^[a-z0-9]{24}$/),
      appId: ctx.orgA.orgId,
      createdAt: '2026-11-22T09:00:00.000Z',
    });
    // EIP-55: the checksummed spelling (an address whose letters all checksum to lower case is rare but real).
    expect(first.walletAddress).toBe(getAddress(first.walletAddress));
    const row = await ctx.testDb.database.db('agent_wallets').where({ id: first.walletId }).first();
    // Sealed (AES-GCM), never the raw 32-byte key in hex.
    expect(row.private_key_sealed).toMatch(/^v1\./);
    expect(row.private_key_sealed).not.toMatch(/[0-9a-f]{64}/);
    expect(logLines.join('\n')).not.toContain(row.private_key_sealed);
  });

  it('defaults the name and accepts no body', async () => {
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/wallets`);
    expect(res.status).toBe(201);
    expect(res.body.data.name).toBe('Wallet');
  });

  it('attaches the default USDC policy to every new wallet', async () => {
    const res = await ctx.admin.get(`/v1/wallets/${first.walletId}/policies`);
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(1);
    expect(res.body.data[0]).toMatchObject({ walletId: first.walletId, name: 'Default: USDC transfers up to 5 USDC', version: '1.0', chainType: 'ethereum' });
    expect(res.body.data[0].rules).toHaveLength(2);
  });

  it('allows at most 5 wallets per organization (409 for the sixth)', async () => {
    for (let i = 0; i < 3; i++) {
      ctx.clock.advance(1);
      await createWallet(ctx, ctx.orgA);
    }
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/wallets`).send({});
    expect(res.status).toBe(409);
    expect(res.body.error).toEqual({ code: 'CONFLICT', message: 'An organization can have at most 5 wallets' });
    const list = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/wallets`);
    expect(list.body.data).toHaveLength(5);
    // Oldest first: the two created at 09:00:00.000, then the three created after.
    expect(list.body.data.slice(0, 2).map((w: TestWallet) => w.walletId)).toContain(first.walletId);
    const created = list.body.data.map((w: { createdAt: string }) => w.createdAt);
    expect(created).toEqual([...created].sort());
    // The limit is per organization.
    await createWallet(ctx, ctx.orgB);
  });

  it('answers 404 for an unknown organization and 400 for unknown fields', async () => {
    expect((await ctx.admin.post('/v1/orgs/ORG_000000000000000000000000/wallets').send({})).status).toBe(404);
    expect((await ctx.admin.get('/v1/orgs/ORG_000000000000000000000000/wallets')).status).toBe(404);
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgB.orgId}/wallets`).send({ privateKey: '0x01' });
    expect(res.status).toBe(400);
  });
});

describe('agents', () => {
  let wallet: TestWallet;
  beforeAll(async () => {
    wallet = (await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/wallets`)).body.data[0];
  });

  it('generates the key pair and returns the Agent Wallet Key once', async () => {
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/agents`).send({ name: 'Researcher', walletId: wallet.walletId });
    expect(res.status).toBe(201);
    expect(res.body.message).toBe('Agent created; store the Agent Wallet Key now, it is not shown again');
    const key = decodeAgentWalletKey(res.body.data.agentWalletKey);
    expect(key.walletId).toBe(wallet.walletId);
    // The public key in the response is the one of the returned private key.
    const derived = createPublicKey(createPrivateKey({ key: Buffer.from(key.privateKey, 'base64'), format: 'der', type: 'pkcs8' }))
      .export({ type: 'spki', format: 'der' })
      .toString('base64');
    expect(res.body.data.publicKey).toBe(derived);
    expect(res.body.data).toMatchObject({ name: 'Researcher', walletId: wallet.walletId, revoked: false, revokedAt: null });
    expect(res.body.data.keyQuorumId).toMatch(/^KQ_/);
    // Only the public key is stored, and the private key is never logged.
    const stored = JSON.stringify(await ctx.testDb.database.db('agent_public_keys').select());
    expect(stored).not.toContain(key.privateKey);
    expect(logLines.join('\n')).not.toContain(key.privateKey);
    const list = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/agents`);
    expect(JSON.stringify(list.body)).not.toContain(key.privateKey);
    expect(list.body.data.map((a: { agentWalletKey?: unknown }) => a.agentWalletKey)).toEqual(list.body.data.map(() => undefined));
  });

  it('registers a given public key and returns no Agent Wallet Key', async () => {
    const publicKey = p256();
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/agents`).send({ name: 'Byo key', publicKey });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ publicKey, agentWalletKey: null, walletId: null });
    const again = await ctx.admin.post(`/v1/orgs/${ctx.orgB.orgId}/agents`).send({ name: 'Same key', publicKey });
    expect(again.status).toBe(409);
    expect(again.body.error.message).toBe('This public key is already registered');
  });

  it('refuses a public key that is not P-256 SPKI', async () => {
    const notAKey = Buffer.alloc(91, 3).toString('base64');
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/agents`).send({ name: 'Bad', publicKey: notAKey });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toBe('publicKey: not a P-256 public key (standard base64 of a DER SubjectPublicKeyInfo, uncompressed point)');
    const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
    expect((await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/agents`).send({ name: 'Bad', publicKey: p384 })).status).toBe(400);
  });

  it("refuses another organization's wallet (404) at creation and at assignment", async () => {
    const walletB = (await ctx.admin.get(`/v1/orgs/${ctx.orgB.orgId}/wallets`)).body.data[0];
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/agents`).send({ name: 'X', walletId: walletB.walletId });
    expect(res.status).toBe(404);
    expect(res.body.error.message).toBe('Wallet not found');
    const agent = await createAgent(ctx, ctx.orgA);
    const assign = await ctx.admin.post(`/v1/agents/${agent.agentId}/assign`).send({ walletId: walletB.walletId });
    expect(assign.status).toBe(404);
  });

  it('assigns, unassigns and reassigns a wallet; the runtime sees the change at once', async () => {
    const agent = await createAgent(ctx, ctx.orgA);
    const res = await ctx.admin.post(`/v1/agents/${agent.agentId}/assign`).send({ walletId: wallet.walletId });
    expect(res.status).toBe(200);
    expect(res.body.data.walletId).toBe(wallet.walletId);
    const identity = await ctx.platform.get('/v1/agent-wallet').set(agentHeaders(ctx, agent, 'GET', '/v1/agent-wallet'));
    expect(identity.body.data.walletAddress).toBe(wallet.walletAddress);
    const un = await ctx.admin.post(`/v1/agents/${agent.agentId}/assign`).send({ walletId: null });
    expect(un.body.data.walletId).toBeNull();
    ctx.clock.advance(1000);
    const after = await ctx.platform.get('/v1/agent-wallet').set(agentHeaders(ctx, agent, 'GET', '/v1/agent-wallet'));
    expect(after.body.data.walletId).toBeNull();
  });

  it('revokes (idempotently) and then refuses assignment and rotation of a revoked agent', async () => {
    const agent = await createAgent(ctx, ctx.orgA);
    const res = await ctx.admin.post(`/v1/agents/${agent.agentId}/revoke`);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ revoked: true, revokedAt: ctx.clock.now().toISOString() });
    const again = await ctx.admin.post(`/v1/agents/${agent.agentId}/revoke`);
    expect(again.body.data.revokedAt).toBe(res.body.data.revokedAt);
    expect((await ctx.admin.post(`/v1/agents/${agent.agentId}/assign`).send({ walletId: wallet.walletId })).status).toBe(409);
    expect((await ctx.admin.post(`/v1/agents/${agent.agentId}/rotate-key`).send({})).status).toBe(409);
  });

  it('rotates to a given public key, keeping the key quorum', async () => {
    const agent = await createAgent(ctx, ctx.orgA);
    const publicKey = p256();
    const res = await ctx.admin.post(`/v1/agents/${agent.agentId}/rotate-key`).send({ publicKey });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ publicKey, keyQuorumId: agent.keyQuorumId, agentWalletKey: null });
    // The retired key can never come back.
    const back = await ctx.admin.post(`/v1/agents/${agent.agentId}/rotate-key`).send({ publicKey: agent.publicKey });
    expect(back.status).toBe(409);
  });

  it('answers 404 for unknown agents', async () => {
    for (const path of ['revoke', 'rotate-key']) {
      expect((await ctx.admin.post(`/v1/agents/AGT_000000000000000000000000/${path}`).send({})).status).toBe(404);
    }
    expect((await ctx.admin.post('/v1/agents/AGT_000000000000000000000000/assign').send({ walletId: null })).status).toBe(404);
  });
});

describe('policies', () => {
  let walletId: string;
  beforeAll(async () => {
    walletId = (await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/wallets`)).body.data[1].walletId;
  });

  const policy = (rules: unknown[]) => ({ version: '1.0', name: 'Custom', chain_type: 'ethereum', rules });

  it('creates, lists and deletes a policy', async () => {
    const res = await ctx.admin.post(`/v1/wallets/${walletId}/policies`).send(
      policy([{ name: 'Only Base', method: '*', action: 'DENY', conditions: [{ field_source: 'ethereum_typed_data_domain', field: 'chainId', operator: 'in', value: [1, '10'] }] }]),
    );
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ walletId, name: 'Custom', version: '1.0', chainType: 'ethereum' });
    const list = await ctx.admin.get(`/v1/wallets/${walletId}/policies`);
    expect(list.body.data.map((p: { name: string }) => p.name)).toEqual(['Default: USDC transfers up to 5 USDC', 'Custom']);
    const del = await ctx.admin.delete(`/v1/policies/${res.body.data.id}`);
    expect(del.status).toBe(200);
    expect(del.body.data.id).toBe(res.body.data.id);
    expect((await ctx.admin.delete(`/v1/policies/${res.body.data.id}`)).status).toBe(404);
    expect((await ctx.admin.get(`/v1/wallets/${walletId}/policies`)).body.data).toHaveLength(1);
  });

  it.each([
    [
      'a message path missing from the rule types',
      [{
        name: 'r', method: 'eth_signTypedData_v4', action: 'ALLOW',
        typed_data: { primary_type: 'TransferWithAuthorization', types: { TransferWithAuthorization: [{ name: 'value', type: 'uint256' }] } },
        conditions: [{ field_source: 'ethereum_typed_data_message', field: 'amount', operator: 'lte', value: '5' }],
      }],
      "rules[0].conditions[0].field: 'amount' is not a field of TransferWithAuthorization",
    ],
    [
      'lte on a string field',
      [{ name: 'r', method: '*', action: 'ALLOW', conditions: [{ field_source: 'ethereum_typed_data_domain', field: 'name', operator: 'lte', value: 'a' }] }],
      "rules[0].conditions[0].operator: 'lte' compares integers; 'name' is not an integer field",
    ],
  ])('refuses %s with 400 naming the problem', async (_label, rules, message) => {
    const res = await ctx.admin.post(`/v1/wallets/${walletId}/policies`).send(policy(rules));
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({ code: 'VALIDATION_ERROR', message });
  });

  it.each([
    ['an unknown operator', { name: 'r', method: '*', action: 'ALLOW', conditions: [{ field_source: 'system', field: 'current_unix_timestamp', operator: 'neq', value: 1 }] }],
    ['an unknown action', { name: 'r', method: '*', action: 'MAYBE', conditions: [] }],
    ['an unknown field on a rule', { name: 'r', method: '*', action: 'ALLOW', conditions: [], priority: 1 }],
  ])('refuses %s by schema (400)', async (_label, rule) => {
    const res = await ctx.admin.post(`/v1/wallets/${walletId}/policies`).send(policy([rule]));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
  });

  it('refuses a policy without rules, and 404s for unknown wallets', async () => {
    expect((await ctx.admin.post(`/v1/wallets/${walletId}/policies`).send(policy([]))).status).toBe(400);
    expect((await ctx.admin.get('/v1/wallets/WLT_000000000000000000000000/policies')).status).toBe(404);
    const res = await ctx.admin.post('/v1/wallets/WLT_000000000000000000000000/policies').send(policy([{ name: 'r', method: '*', action: 'ALLOW', conditions: [] }]));
    expect(res.status).toBe(404);
  });
});

describe('credit', () => {
  it('grants credit as ledger entries and reports the sum', async () => {
    const first = await ctx.admin.post(`/v1/orgs/${ctx.orgB.orgId}/credit`).send({ amount: 1_250_000, unit: 'USDC', reason: 'Trial' });
    expect(first.status).toBe(201);
    expect(first.body.data).toMatchObject({ orgId: ctx.orgB.orgId, amount: 1_250_000, unit: 'USDC', reason: 'Trial', balanceMinor: 1_250_000, balance: 1.25 });
    const second = await ctx.admin.post(`/v1/orgs/${ctx.orgB.orgId}/credit`).send({ amount: 750_000, unit: 'USDC' });
    expect(second.body.data).toMatchObject({ reason: 'grant', balanceMinor: 2_000_000, balance: 2 });
    const read = await ctx.admin.get(`/v1/orgs/${ctx.orgB.orgId}/credit`);
    expect(read.body.data).toEqual({ orgId: ctx.orgB.orgId, unit: 'USDC', balanceMinor: 2_000_000, balance: 2 });
    const rows = await ctx.testDb.database.db('credit_ledger_entries').where({ org_id: ctx.orgB.orgId });
    expect(rows.map((r: { amount: number }) => Number(r.amount)).sort()).toEqual([1_250_000, 750_000].sort());
  });

  it.each([
    [{ amount: 0, unit: 'USDC' }],
    [{ amount: 1.5, unit: 'USDC' }],
    [{ amount: 5, unit: 'EUR' }],
    [{ amount: 5 }],
  ])('refuses %j with 400', async (body) => {
    expect((await ctx.admin.post(`/v1/orgs/${ctx.orgB.orgId}/credit`).send(body)).status).toBe(400);
  });

  it('answers 404 for an unknown organization', async () => {
    expect((await ctx.admin.post('/v1/orgs/ORG_000000000000000000000000/credit').send({ amount: 1, unit: 'USDC' })).status).toBe(404);
  });
});

describe('organization isolation at runtime', () => {
  it("never shows an agent another organization's wallet, policies, history or credit", async () => {
    const walletA = (await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/wallets`)).body.data[0];
    const agentB = await createAgent(ctx, ctx.orgB);
    // Even a wallet id forced into the row (bypassing the admin checks) is not served across orgs.
    await ctx.testDb.database.db('agents').where({ id: agentB.agentId }).update({ wallet_id: walletA.walletId });
    ctx.clock.advance(1000);
    const get = (path: string) => ctx.platform.get(path).set(agentHeaders(ctx, agentB, 'GET', path));
    const identity = await get('/v1/agent-wallet');
    expect(identity.body.data).toMatchObject({ walletId: null, walletAddress: null, appId: ctx.orgB.orgId });
    expect((await get('/v1/agent-wallet/policies')).body.data).toEqual([]);
    expect((await get('/v1/agent-wallet/history')).body.data).toEqual([]);
    expect((await get('/v1/agent-wallet/credit-balance')).body.data).toEqual({ balance: 2, unit: 'USDC' });
    const sign = await ctx.platform
      .post('/v1/agent-wallet/sign-typed-data')
      .set(agentHeaders(ctx, agentB, 'POST', '/v1/agent-wallet/sign-typed-data'))
      .send({ typed_data: { domain: {}, types: { A: [] }, primary_type: 'A', message: {} }, signature: 'MEQCIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAiAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==' });
    expect(sign.status).toBe(400);
    expect(sign.body.error.message).toBe('No wallet is assigned to this agent');
  });
});
