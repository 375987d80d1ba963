/**
 * The console's agent wallet operations (openapi/console.yaml, tag Agent wallets): wallets with
 * their address per chain, agents (created with the Agent Wallet Key shown once, assigned,
 * revoked, key rotated), policies, the credit balance and the signing history — by role, across
 * two organizations, with the session's CSRF checks, in the audit log and never with a key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAgentWalletKey } from '../../src/client/agent.js';
import { randomToken } from '../../src/kernel/ids.js';
import { KnexAgentWalletRepository, type HistoryEntry } from '../../src/agent-wallet/agent-wallet.repository.js';
import { DEFAULT_POLICY_NAME, TRANSFER_WITH_AUTHORIZATION_TYPES } from '../../src/agent-wallet/default-policy.js';
import { MAX_WALLETS_PER_ORG } from '../../src/agent-wallet/admin.service.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { agentHeaders } from '../agent-wallet/helpers.js';
import { ORIGIN, as, signUp, type Member } from './helpers.js';

let ctx: TestContext;
let dev: Member;
let support: Member;
let viewer: Member;
let ownerA: Member;
let ownerB: Member;

beforeAll(async () => {
  ctx = await createTestContext();
  const members = await Promise.all([
    signUp(ctx, ctx.orgA.orgId, 'developer'),
    signUp(ctx, ctx.orgA.orgId, 'support'),
    signUp(ctx, ctx.orgA.orgId, 'viewer'),
    signUp(ctx, ctx.orgA.orgId, 'owner'),
    signUp(ctx, ctx.orgB.orgId, 'owner'),
  ]);
  [dev, support, viewer, ownerA, ownerB] = members as [Member, Member, Member, Member, Member];
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

const createWallet = async (member: Member, name: string) => {
  const res = await as(member, ctx.merchant.post('/v1/console/agent-wallets')).send({ name });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { walletId: string; walletAddress: string };
};
const createAgent = async (member: Member, body: Record<string, unknown> = { name: 'Bot' }) => {
  const res = await as(member, ctx.merchant.post('/v1/console/agents')).send(body);
  expect(res.status, res.text).toBe(201);
  return res.body.data as { agentId: string; publicKey: string; agentWalletKey: string; walletId: string | null };
};
/** The agent API answers the agent behind an Agent Wallet Key (200), or refuses it (401). */
const agentCalls = async (agentWalletKey: string) => {
  const key = loadAgentWalletKey(agentWalletKey);
  return (await ctx.platform.get('/v1/agent-wallet').set(agentHeaders(ctx, key, 'GET', '/v1/agent-wallet'))).status;
};

const POLICY = {
  version: '1.0',
  name: 'Deny large transfers',
  chain_type: 'ethereum',
  rules: [
    {
      name: 'Deny over 50 USDC',
      method: 'eth_signTypedData_v4',
      action: 'DENY',
      typed_data: { primary_type: 'TransferWithAuthorization', types: TRANSFER_WITH_AUTHORIZATION_TYPES },
      conditions: [{ field_source: 'ethereum_typed_data_message', field: 'value', operator: 'gt', value: '50000000' }],
    },
  ],
};

describe('wallets and policies', () => {
  it('creates a wallet with its address per chain and the default x402 policy; adds and deletes a policy', async () => {
    const wallet = await createWallet(dev, 'Research');
    const listed = await as(dev, ctx.merchant.get('/v1/console/agent-wallets'));
    expect(listed.status).toBe(200);
    const shown = listed.body.data.find((w: { walletId: string }) => w.walletId === wallet.walletId);
    expect(shown.chains.length).toBeGreaterThan(0);
    expect(shown.chains.every((c: { address: string }) => c.address === wallet.walletAddress)).toBe(true);
    expect(shown).not.toHaveProperty('privateKeySealed');

    const policies = await as(dev, ctx.merchant.get(`/v1/console/agent-wallets/${wallet.walletId}/policies`));
    expect(policies.status).toBe(200);
    expect(policies.body.data).toHaveLength(1);
    expect(policies.body.data[0].name).toBe(DEFAULT_POLICY_NAME);

    const added = await as(dev, ctx.merchant.post(`/v1/console/agent-wallets/${wallet.walletId}/policies`)).send(POLICY);
    expect(added.status, added.text).toBe(201);
    expect(added.body.data).toMatchObject({ walletId: wallet.walletId, name: 'Deny large transfers' });
    const bad = await as(dev, ctx.merchant.post(`/v1/console/agent-wallets/${wallet.walletId}/policies`)).send({ ...POLICY, rules: [{ ...POLICY.rules[0], conditions: [{ field_source: 'ethereum_typed_data_message', field: 'value', operator: 'gt', value: 'lots' }] }] });
    expect(bad.status).toBe(400);

    const deleted = await as(dev, ctx.merchant.delete(`/v1/console/agent-policies/${added.body.data.id}`));
    expect(deleted.status).toBe(200);
    expect((await as(dev, ctx.merchant.delete(`/v1/console/agent-policies/${added.body.data.id}`))).status).toBe(404);
    expect((await as(dev, ctx.merchant.get(`/v1/console/agent-wallets/${wallet.walletId}/policies`))).body.data).toHaveLength(1);
  });

  it(`an organization has at most ${MAX_WALLETS_PER_ORG} wallets (409)`, async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Org W' });
    const owner = await signUp(ctx, org.id, 'owner');
    for (let i = 0; i < MAX_WALLETS_PER_ORG; i += 1) await createWallet(owner, `W${i}`);
    const res = await as(owner, ctx.merchant.post('/v1/console/agent-wallets')).send({});
    expect(res.status).toBe(409);
  });

  it('another organization’s wallet and policy are 404', async () => {
    const foreign = await createWallet(ownerB, 'B wallet');
    const foreignPolicies = await as(ownerB, ctx.merchant.get(`/v1/console/agent-wallets/${foreign.walletId}/policies`));
    const foreignPolicy = foreignPolicies.body.data[0].id;
    expect((await as(dev, ctx.merchant.get(`/v1/console/agent-wallets/${foreign.walletId}/policies`))).status).toBe(404);
    expect((await as(dev, ctx.merchant.post(`/v1/console/agent-wallets/${foreign.walletId}/policies`)).send(POLICY)).status).toBe(404);
    expect((await as(dev, ctx.merchant.delete(`/v1/console/agent-policies/${foreignPolicy}`))).status).toBe(404);
    expect((await as(ownerB, ctx.merchant.get(`/v1/console/agent-wallets/${foreign.walletId}/policies`))).body.data).toHaveLength(1);
    expect((await as(dev, ctx.merchant.get('/v1/console/agent-wallets'))).body.data.map((w: { walletId: string }) => w.walletId)).not.toContain(foreign.walletId);
    expect((await as(dev, ctx.merchant.post('/v1/console/agents')).send({ name: 'x', walletId: foreign.walletId })).status).toBe(404);
  });
});

describe('agents', () => {
  it('creates an agent whose Agent Wallet Key is shown once and works; assigns, rotates and revokes it', async () => {
    const wallet = await createWallet(dev, 'Agents');
    const res = await as(dev, ctx.merchant.post('/v1/console/agents')).send({ name: 'Research bot', walletId: wallet.walletId });
    expect(res.status).toBe(201);
    expect(res.headers['cache-control']).toBe('no-store');
    const agent = res.body.data;
    expect(agent).toMatchObject({ name: 'Research bot', walletId: wallet.walletId, revoked: false, agentWalletKey: expect.any(String) });
    expect(await agentCalls(agent.agentWalletKey)).toBe(200);

    const listed = await as(dev, ctx.merchant.get('/v1/console/agents'));
    const row = listed.body.data.find((a: { agentId: string }) => a.agentId === agent.agentId);
    expect(row).toMatchObject({ publicKey: agent.publicKey });
    expect(row).not.toHaveProperty('agentWalletKey');

    const unassigned = await as(dev, ctx.merchant.post(`/v1/console/agents/${agent.agentId}/assign`)).send({ walletId: null });
    expect(unassigned.status).toBe(200);
    expect(unassigned.body.data.walletId).toBeNull();
    expect((await as(dev, ctx.merchant.post(`/v1/console/agents/${agent.agentId}/assign`)).send({ walletId: wallet.walletId })).body.data.walletId).toBe(wallet.walletId);

    const rotated = await as(dev, ctx.merchant.post(`/v1/console/agents/${agent.agentId}/rotate-key`)).send({});
    expect(rotated.status).toBe(200);
    expect(rotated.headers['cache-control']).toBe('no-store');
    expect(rotated.body.data.publicKey).not.toBe(agent.publicKey);
    expect(await agentCalls(agent.agentWalletKey)).toBe(401);
    expect(await agentCalls(rotated.body.data.agentWalletKey)).toBe(200);
    // Registering a key already in use is 409.
    expect((await as(dev, ctx.merchant.post('/v1/console/agents')).send({ name: 'Twin', publicKey: rotated.body.data.publicKey })).status).toBe(409);

    const revoked = await as(dev, ctx.merchant.post(`/v1/console/agents/${agent.agentId}/revoke`));
    expect(revoked.status).toBe(200);
    expect(revoked.body.data).toMatchObject({ revoked: true, revokedAt: expect.any(String) });
    expect(await agentCalls(rotated.body.data.agentWalletKey)).toBe(401);
    expect((await as(dev, ctx.merchant.post(`/v1/console/agents/${agent.agentId}/assign`)).send({ walletId: null })).status).toBe(409);
    expect((await as(dev, ctx.merchant.post(`/v1/console/agents/${agent.agentId}/rotate-key`)).send({})).status).toBe(409);

    // Audited by operation, with neither key in any entry.
    const audit = await as(ownerA, ctx.merchant.get('/v1/console/audit-log').query({ size: 100 }));
    expect(audit.text).not.toContain(agent.agentWalletKey);
    expect(audit.text).not.toContain(rotated.body.data.agentWalletKey);
    const mine = audit.body.data.records.filter((e: { actorId: string }) => e.actorId === dev.userId).map((e: { action: string }) => e.action);
    expect(mine).toEqual(expect.arrayContaining(['createConsoleAgent', 'assignConsoleAgentWallet', 'rotateConsoleAgentKey', 'revokeConsoleAgent', 'createConsoleAgentWallet']));
  });

  it('another organization’s agent is 404 for assign, revoke and rotate, and is not listed', async () => {
    const foreign = await createAgent(ownerB, { name: 'B bot' });
    const mine = await createWallet(dev, 'Mine');
    expect((await as(dev, ctx.merchant.post(`/v1/console/agents/${foreign.agentId}/assign`)).send({ walletId: mine.walletId })).status).toBe(404);
    expect((await as(dev, ctx.merchant.post(`/v1/console/agents/${foreign.agentId}/revoke`))).status).toBe(404);
    expect((await as(dev, ctx.merchant.post(`/v1/console/agents/${foreign.agentId}/rotate-key`)).send({})).status).toBe(404);
    expect(await agentCalls(foreign.agentWalletKey)).toBe(200);
    expect((await as(dev, ctx.merchant.get('/v1/console/agents'))).body.data.map((a: { agentId: string }) => a.agentId)).not.toContain(foreign.agentId);
    // My agent cannot be given another organization's wallet either.
    const bWallet = await createWallet(ownerB, 'B only');
    const own = await createAgent(dev, { name: 'A bot' });
    expect((await as(dev, ctx.merchant.post(`/v1/console/agents/${own.agentId}/assign`)).send({ walletId: bWallet.walletId })).status).toBe(404);
  });
});

describe('credit and history', () => {
  it('reads the organization’s credit balance', async () => {
    await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/credit`).send({ amount: 2_500_000, unit: 'USDC' });
    const res = await as(dev, ctx.merchant.get('/v1/console/agent-credit'));
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ orgId: ctx.orgA.orgId, unit: 'USDC', balanceMinor: 2_500_000, balance: 2.5 });
    expect((await as(ownerB, ctx.merchant.get('/v1/console/agent-credit'))).body.data.balanceMinor).toBe(0);
  });

  it('lists the signing history newest first, per wallet, agent and status, in keyset pages; another organization’s is never shown', async () => {
    const wallet = await createWallet(dev, 'History');
    const agent = await createAgent(dev, { name: 'Payer', walletId: wallet.walletId });
    const other = await createAgent(dev, { name: 'Other', walletId: wallet.walletId });
    const bWallet = await createWallet(ownerB, 'B history');
    const bAgent = await createAgent(ownerB, { name: 'B payer', walletId: bWallet.walletId });
    const repo = new KnexAgentWalletRepository(ctx.testDb.database.db);
    const entry = (orgId: string, walletId: string, agentId: string, status: 'signed' | 'denied', resourceUrl: string): HistoryEntry => ({
      id: `AWH_${randomToken()}`,
      orgId,
      walletId,
      agentId,
      type: 'sign_typed_data',
      status,
      destination: '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
      amount: status === 'signed' ? '1000000' : '7000000',
      asset: 'USDC',
      chainId: 8453,
      resourceUrl,
      tokenContract: null,
      txHash: null,
      explorerUrl: null,
      failureMessage: status === 'denied' ? 'No policy rule allows this request' : null,
      primaryType: 'TransferWithAuthorization',
      typedDataHash: null,
      createdAt: ctx.clock.now(),
    });
    const ids: string[] = [];
    for (const [i, [who, status]] of ([[agent, 'signed'], [agent, 'denied'], [other, 'signed'], [agent, 'signed']] as const).entries()) {
      const e = entry(ctx.orgA.orgId, wallet.walletId, who.agentId, status, `https://api.example.com/r/${i}`);
      await repo.insertHistory(e);
      ids.unshift(e.id);
      if (i !== 1) ctx.clock.advance(1000); // two entries share a millisecond: recording order decides
    }
    await repo.insertHistory(entry(ctx.orgB.orgId, bWallet.walletId, bAgent.agentId, 'signed', 'https://b.example.com'));

    const all = await as(dev, ctx.merchant.get('/v1/console/agent-history').query({ wallet_id: wallet.walletId }));
    expect(all.status).toBe(200);
    expect(all.body.data.records.map((e: { id: string }) => e.id)).toEqual(ids);
    expect(all.body.data.records[3]).toMatchObject({ agentId: agent.agentId, status: 'signed', resourceUrl: 'https://api.example.com/r/0', amount: '1000000', asset: 'USDC' });

    const pages: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await as(dev, ctx.merchant.get('/v1/console/agent-history').query({ wallet_id: wallet.walletId, size: 3, ...(cursor ? { starting_after: cursor } : {}) }));
      pages.push(...res.body.data.records.map((e: { id: string }) => e.id));
      cursor = res.body.data.nextCursor;
    } while (cursor);
    expect(pages).toEqual(ids);

    const denied = await as(dev, ctx.merchant.get('/v1/console/agent-history').query({ agent_id: agent.agentId, status: 'denied' }));
    expect(denied.body.data.records).toHaveLength(1);
    expect(denied.body.data.records[0]).toMatchObject({ status: 'denied', failureMessage: 'No policy rule allows this request', resourceUrl: 'https://api.example.com/r/1' });
    expect((await as(dev, ctx.merchant.get('/v1/console/agent-history').query({ agent_id: other.agentId }))).body.data.records).toHaveLength(1);

    // Org B's entries: not by its wallet or agent id, and not as a cursor.
    expect((await as(dev, ctx.merchant.get('/v1/console/agent-history').query({ wallet_id: bWallet.walletId }))).body.data.records).toEqual([]);
    const bEntries = await as(ownerB, ctx.merchant.get('/v1/console/agent-history'));
    expect(bEntries.body.data.records).toHaveLength(1);
    const foreignCursor = await as(dev, ctx.merchant.get('/v1/console/agent-history').query({ starting_after: bEntries.body.data.records[0].id }));
    expect(foreignCursor.status).toBe(400);
    expect(foreignCursor.body.error.message).toContain('starting_after');
  });
});

describe('roles, sessions and CSRF', () => {
  it('support and viewer are refused every agent wallet operation (403); the owner is allowed', async () => {
    for (const member of [support, viewer]) {
      for (const path of ['/v1/console/agent-wallets', '/v1/console/agents', '/v1/console/agent-credit', '/v1/console/agent-history', '/v1/console/agent-wallets/WLT_000000000000000000000000/policies']) {
        expect((await as(member, ctx.merchant.get(path))).status, path).toBe(403);
      }
      expect((await as(member, ctx.merchant.post('/v1/console/agent-wallets')).send({})).status).toBe(403);
      expect((await as(member, ctx.merchant.post('/v1/console/agents')).send({ name: 'x' })).status).toBe(403);
      expect((await as(member, ctx.merchant.post('/v1/console/agents/AGT_000000000000000000000000/revoke'))).status).toBe(403);
      expect((await as(member, ctx.merchant.post('/v1/console/agents/AGT_000000000000000000000000/rotate-key')).send({})).status).toBe(403);
      expect((await as(member, ctx.merchant.post('/v1/console/agents/AGT_000000000000000000000000/assign')).send({ walletId: null })).status).toBe(403);
      expect((await as(member, ctx.merchant.post('/v1/console/agent-wallets/WLT_000000000000000000000000/policies')).send(POLICY)).status).toBe(403);
      expect((await as(member, ctx.merchant.delete('/v1/console/agent-policies/POL_000000000000000000000000'))).status).toBe(403);
    }
    expect((await as(ownerA, ctx.merchant.get('/v1/console/agents'))).status).toBe(200);
  });

  it('no session is 401; a write without the CSRF token is 403 and creates nothing', async () => {
    expect((await ctx.merchant.get('/v1/console/agents')).status).toBe(401);
    expect((await ctx.merchant.post('/v1/console/agents').set('Origin', ORIGIN).send({ name: 'x' })).status).toBe(401);
    const count = (await as(dev, ctx.merchant.get('/v1/console/agents'))).body.data.length;
    const res = await ctx.merchant.post('/v1/console/agents').set('Cookie', dev.cookie).set('Origin', ORIGIN).send({ name: 'Forged' });
    expect(res.status).toBe(403);
    expect((await as(dev, ctx.merchant.get('/v1/console/agents'))).body.data.length).toBe(count);
  });
});
