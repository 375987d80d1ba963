/**
 * The agent wallet runtime end to end: identity, policies, history, credit balance and
 * policy-checked EIP-712 signing through the agent client, on a real listener.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoverTypedDataAddress, type Hex } from 'viem';
import { createTestContext, type TestContext } from '../harness/context.js';
import { AgentApiError, type AgentClient } from '../../src/client/agent.js';
import {
  agentHeaders,
  authorizeTypedData,
  BASE_USDC,
  clientFor,
  createAgent,
  createWallet,
  listenPlatform,
  PUBLIC_API_URL,
  usdcTransfer,
  type TestAgent,
  type TestWallet,
} from './helpers.js';

const SIGN = '/v1/agent-wallet/sign-typed-data';
const BASE_USDC_LOWER = BASE_USDC.toLowerCase();

let ctx: TestContext;
let transport: Awaited<ReturnType<typeof listenPlatform>>;
let wallet: TestWallet;
let agent: TestAgent;
let client: AgentClient;

beforeAll(async () => {
  ctx = await createTestContext();
  transport = await listenPlatform(ctx);
  wallet = await createWallet(ctx, ctx.orgA, 'Payments');
  agent = await createAgent(ctx, ctx.orgA, wallet.walletId, 'Shopper');
  client = clientFor(ctx, agent, transport);
});
afterAll(async () => {
  await transport?.close();
  await ctx?.close();
});

function toViem(td: ReturnType<typeof usdcTransfer>) {
  const { EIP712Domain: _domain, ...types } = td.types;
  return {
    domain: { ...td.domain, chainId: BigInt(td.domain.chainId), verifyingContract: td.domain.verifyingContract as Hex },
    types,
    primaryType: 'TransferWithAuthorization' as const,
    message: {
      ...td.message,
      from: td.message.from as Hex,
      to: td.message.to as Hex,
      value: BigInt(td.message.value),
      validAfter: BigInt(td.message.validAfter),
      validBefore: BigInt(td.message.validBefore),
      nonce: td.message.nonce as Hex,
    },
  };
}

describe('identity', () => {
  it('returns the agent, its key, its wallet and the values authorization signatures need', async () => {
    const identity = await client.identity();
    expect(identity).toEqual({
      agentId: agent.agentId,
      name: 'Shopper',
      publicKey: agent.publicKey,
      keyQuorumId: agent.keyQuorumId,
      walletId: wallet.walletId,
      walletAddress: wallet.walletAddress,
      providerWalletId: expect.stringMatching(/^[a-z0-9]{24}$/),
      appId: ctx.orgA.orgId,
      revoked: false,
    });
    expect(identity.walletAddress).toMatch(/^0x[0-9a-fA-F]{40}$/);
  });
});

describe('policies', () => {
  it('lists the default policy: USDC TransferWithAuthorization up to 5 USDC on Base and Base Sepolia', async () => {
    const policies = await client.policies();
    expect(policies).toHaveLength(1);
    expect(policies[0]!.name).toBe('Default: USDC transfers up to 5 USDC');
    expect(policies[0]!.rules.map((r) => [r.action, r.conditions.map((c) => c.value)])).toEqual([
      ['ALLOW', [8453, '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', '5000000']],
      ['ALLOW', [84532, '0x036CbD53842c5426634e7929541eC2318f3dCF7e', '5000000']],
    ]);
  });
});

describe('sign-typed-data: x402-style USDC TransferWithAuthorization', () => {
  it('signs 2.5 USDC on Base; the signature recovers to the wallet address', async () => {
    const td = usdcTransfer(wallet.walletAddress, '2500000');
    const result = await client.signTypedData(td);
    expect(result.walletAddress).toBe(wallet.walletAddress);
    expect(result.signature).toMatch(/^0x[0-9a-f]{130}$/);
    const recovered = await recoverTypedDataAddress({ ...toViem(td), signature: result.signature as Hex });
    expect(recovered).toBe(wallet.walletAddress);
  });

  it('signs exactly 5 USDC on Base Sepolia (the limit is inclusive)', async () => {
    const td = usdcTransfer(wallet.walletAddress, '5000000', { chainId: 84532, verifyingContract: '0x036cbd53842c5426634e7929541ec2318f3dcf7e' });
    const result = await client.signTypedData(td);
    expect(await recoverTypedDataAddress({ ...toViem(td), signature: result.signature as Hex })).toBe(wallet.walletAddress);
  });

  it('denies 5.000001 USDC with 403 saying no rule allows it, and records the denial', async () => {
    const err = await client.signTypedData(usdcTransfer(wallet.walletAddress, '5000001')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentApiError);
    expect(err).toMatchObject({ status: 403, code: 'FORBIDDEN', message: 'No policy rule allows this request' });
    const [latest] = await client.history({ limit: 1 });
    expect(latest).toMatchObject({
      agentId: agent.agentId,
      walletId: wallet.walletId,
      type: 'sign_typed_data',
      status: 'denied',
      amount: '5000001',
      asset: 'USDC',
      chainId: 8453,
      destination: '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
      failureMessage: 'No policy rule allows this request',
      txHash: null,
      explorerUrl: null,
    });
  });

  it('denies USDC on a chain that is not configured, and a token that is not USDC', async () => {
    await expect(client.signTypedData(usdcTransfer(wallet.walletAddress, '1', { chainId: 1 }))).rejects.toMatchObject({ status: 403 });
    await expect(
      client.signTypedData(usdcTransfer(wallet.walletAddress, '1', { verifyingContract: '0x1111111111111111111111111111111111111111' })),
    ).rejects.toMatchObject({ status: 403 });
  });

  it('names the DENY rule that refused a request', async () => {
    const blocked = '0x000000000000000000000000000000000000dEaD';
    const res = await ctx.admin.post(`/v1/wallets/${wallet.walletId}/policies`).send({
      version: '1.0',
      name: 'Blocklist',
      chain_type: 'ethereum',
      rules: [
        {
          name: 'Never pay the dead address',
          method: '*',
          action: 'DENY',
          conditions: [{ field_source: 'ethereum_typed_data_message', field: 'to', operator: 'eq', value: blocked.toLowerCase() }],
          typed_data: { primary_type: 'TransferWithAuthorization', types: { TransferWithAuthorization: usdcTransfer('0x0', '0').types.TransferWithAuthorization } },
        },
      ],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    await expect(client.signTypedData(usdcTransfer(wallet.walletAddress, '1000', { to: blocked }))).rejects.toMatchObject({
      status: 403,
      message: "Denied by policy rule 'Never pay the dead address'",
    });
    // Still allowed for anyone else: DENY only wins where it matches.
    await expect(client.signTypedData(usdcTransfer(wallet.walletAddress, '1000'))).resolves.toMatchObject({ walletAddress: wallet.walletAddress });
    await ctx.admin.delete(`/v1/policies/${res.body.data.id}`).expect(200);
  });

  it('writes every attempt to the history, newest first', async () => {
    const history = await client.history();
    expect(history.length).toBeGreaterThanOrEqual(6);
    expect(history.map((h) => h.status).slice(0, 3)).toEqual(['signed', 'denied', 'denied']);
    const created = history.map((h) => h.createdAt);
    expect([...created].sort().reverse()).toEqual(created);
  });
});

describe('sign-typed-data: authorization signature and validation', () => {
  const rawSign = (body: object, headersAt?: number) =>
    ctx.platform.post(SIGN).set(agentHeaders(ctx, agent, 'POST', SIGN, headersAt)).send(body);

  const authorize = (typedData: object, appId = ctx.orgA.orgId, url = `${PUBLIC_API_URL}${SIGN}`) =>
    authorizeTypedData(agent.privateKey, typedData, appId, url);

  it('accepts a body whose authorization signature it can rebuild (key order does not matter: RFC 8785)', async () => {
    const td = usdcTransfer(wallet.walletAddress, '10');
    const reordered = { message: td.message, primary_type: td.primary_type, types: td.types, domain: td.domain };
    const res = await rawSign({ signature: authorize(td), typed_data: reordered });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });

  it.each([
    ['signed for another URL', () => authorize(usdcTransfer(wallet.walletAddress, '10'), ctx.orgA.orgId, `http://evil.test${SIGN}`)],
    ['signed for another app id', () => authorize(usdcTransfer(wallet.walletAddress, '10'), 'ORG_other')],
    ['signed over another body', () => authorize(usdcTransfer(wallet.walletAddress, '11'))],
    ['not a DER signature', () => Buffer.alloc(64, 7).toString('base64')],
  ])('refuses an authorization signature %s with 403 and records nothing', async (_label, signature) => {
    const before = (await client.history({ limit: 200 })).length;
    const res = await rawSign({ typed_data: usdcTransfer(wallet.walletAddress, '10'), signature: signature() });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({
      success: false,
      message: 'Wallet authorization signature is invalid',
      error: { code: 'FORBIDDEN', message: 'Wallet authorization signature is invalid' },
    });
    expect((await client.history({ limit: 200 })).length).toBe(before);
  });

  it('refuses an authorization signature by a key outside the agent quorum', async () => {
    const other = await createAgent(ctx, ctx.orgA, wallet.walletId, 'Other');
    const td = usdcTransfer(wallet.walletAddress, '10');
    const signature = authorizeTypedData(other.privateKey, td, ctx.orgA.orgId);
    const res = await rawSign({ typed_data: td, signature });
    expect(res.status).toBe(403);
  });

  it.each([
    [
      'value not a uint256',
      (td: ReturnType<typeof usdcTransfer>) => ({ ...td, message: { ...td.message, value: '2.5' } }),
      'typed_data.message.value: expected uint256 (JSON integer or decimal string)',
    ],
    [
      'primary type not defined',
      (td: ReturnType<typeof usdcTransfer>) => ({ ...td, primary_type: 'Permit' }),
      "typed_data.types must define the primary type 'Permit'",
    ],
    [
      'missing message field',
      (td: ReturnType<typeof usdcTransfer>) => ({ ...td, message: { ...td.message, nonce: undefined } }),
      "typed_data.message: missing field 'nonce' of TransferWithAuthorization",
    ],
    [
      'address with a bad checksum',
      (td: ReturnType<typeof usdcTransfer>) => ({ ...td, message: { ...td.message, to: '0xFB6916095ca1df60bB79Ce92cE3Ea74c37c5d359' } }),
      'typed_data.message.to: mixed-case address fails its EIP-55 checksum',
    ],
  ])('answers 400 for invalid typed data (%s), after the authorization check, without history', async (_label, mutate, message) => {
    const before = (await client.history({ limit: 200 })).length;
    const td = JSON.parse(JSON.stringify(mutate(usdcTransfer(wallet.walletAddress, '10'))));
    const res = await rawSign({ typed_data: td, signature: authorize(td) });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.error).toEqual({ code: 'VALIDATION_ERROR', message });
    expect((await client.history({ limit: 200 })).length).toBe(before);
  });

  it('answers 400 for an unknown field in the body (closed objects)', async () => {
    const td = usdcTransfer(wallet.walletAddress, '10');
    const res = await rawSign({ typed_data: { ...td, chain: 'base' }, signature: authorize(td) });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain('body.typed_data.chain');
  });

  it('answers 400 "No wallet is assigned to this agent" when the agent has no wallet', async () => {
    const walletless = await createAgent(ctx, ctx.orgA, undefined, 'Walletless');
    const td = usdcTransfer(wallet.walletAddress, '10');
    const res = await ctx.platform
      .post(SIGN)
      .set(agentHeaders(ctx, walletless, 'POST', SIGN))
      .send({ typed_data: td, signature: authorize(td) });
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({ code: 'VALIDATION_ERROR', message: 'No wallet is assigned to this agent' });
    // Reads never need a wallet.
    const identity = await ctx.platform.get('/v1/agent-wallet').set(agentHeaders(ctx, walletless, 'GET', '/v1/agent-wallet'));
    expect(identity.body.data).toMatchObject({ walletId: null, walletAddress: null, providerWalletId: null, appId: ctx.orgA.orgId });
    for (const path of ['/v1/agent-wallet/policies', '/v1/agent-wallet/history']) {
      const res = await ctx.platform.get(path).set(agentHeaders(ctx, walletless, 'GET', path));
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual([]);
    }
  });
});

describe('history limit', () => {
  it.each([[0], [201], [-1], ['abc']])('refuses limit=%s with 400', async (limit) => {
    const path = '/v1/agent-wallet/history';
    const res = await ctx.platform.get(path).query({ limit }).set(agentHeaders(ctx, agent, 'GET', path));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.message).toContain('limit');
  });

  it('honours limit 1 and 200, defaults to 50', async () => {
    const total = (await client.history({ limit: 200 })).length;
    expect(await client.history({ limit: 1 })).toHaveLength(1);
    expect((await client.history()).length).toBe(Math.min(total, 50));
  });

  it('returns at most 50 by default and 200 at most when there are more', async () => {
    // 210 denied attempts straight through the service keep this fast.
    const auth = { agentId: agent.agentId, orgId: ctx.orgA.orgId, name: 'x', keyQuorumId: agent.keyQuorumId, publicKey: agent.publicKey, walletId: wallet.walletId, quorumKeys: [agent.publicKey] };
    const td = usdcTransfer(wallet.walletAddress, '9000000');
    const body = { typed_data: td, signature: authorizeTypedData(agent.privateKey, td, ctx.orgA.orgId) };
    for (let i = 0; i < 210; i++) {
      ctx.clock.advance(10);
      await ctx.services.agentWallet.runtime.signTypedData(auth, body, `${PUBLIC_API_URL}${SIGN}`).catch(() => undefined);
    }
    expect(await client.history()).toHaveLength(50);
    const all = await client.history({ limit: 200 });
    expect(all).toHaveLength(200);
    expect(all[0]!.createdAt >= all[199]!.createdAt).toBe(true);
  });
});

describe('credit balance', () => {
  it('is 0 USDC before any grant, then the sum of the ledger', async () => {
    expect(await client.creditBalance()).toEqual({ balance: 0, unit: 'USDC' });
    await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/credit`).send({ amount: 40_000_000, unit: 'USDC', reason: 'Welcome' }).expect(201);
    await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/credit`).send({ amount: 2_500_000, unit: 'USDC' }).expect(201);
    expect(await client.creditBalance()).toEqual({ balance: 42.5, unit: 'USDC' });
  });
});

describe('spend limits (rolling window)', () => {
  let limited: TestWallet;
  let spender: TestAgent;
  let spenderClient: AgentClient;
  const LIMIT_NAME = 'Daily USDC on Base';

  beforeAll(async () => {
    limited = await createWallet(ctx, ctx.orgB, 'Limited');
    spender = await createAgent(ctx, ctx.orgB, limited.walletId, 'Spender');
    spenderClient = clientFor(ctx, spender, transport);
    const res = await ctx.admin.post(`/v1/wallets/${limited.walletId}/policies`).send({
      version: '1.0',
      name: 'Daily cap',
      chain_type: 'ethereum',
      rules: [{ name: 'No extra permission', method: '*', action: 'DENY', conditions: [{ field_source: 'system', field: 'current_unix_timestamp', operator: 'lt', value: 0 }] }],
      spend_limits: [{ name: LIMIT_NAME, window_hours: 24, max_value: '6000000', chain_id: 8453, verifying_contract: BASE_USDC_LOWER }],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.spendLimits).toEqual([{ name: LIMIT_NAME, window_hours: 24, max_value: '6000000', chain_id: 8453, verifying_contract: BASE_USDC_LOWER }]);
  });

  it('lists the limit with the policy', async () => {
    const policies = await spenderClient.policies();
    expect(policies.map((p) => p.spendLimits)).toEqual([[], [expect.objectContaining({ name: LIMIT_NAME, max_value: '6000000' })]]);
  });

  it('allows transfers while the window sum stays within the limit, inclusive, then denies naming the limit', async () => {
    await spenderClient.signTypedData(usdcTransfer(limited.walletAddress, '2500000'));
    ctx.clock.advance(60_000);
    await spenderClient.signTypedData(usdcTransfer(limited.walletAddress, '2500000'));
    ctx.clock.advance(60_000);
    await expect(spenderClient.signTypedData(usdcTransfer(limited.walletAddress, '1500000'))).rejects.toMatchObject({
      status: 403,
      message: `Denied by spend limit '${LIMIT_NAME}': 5000000 signed in the last 24 h + 1500000 requested exceeds 6000000`,
    });
    const [denied] = await spenderClient.history({ limit: 1 });
    expect(denied).toMatchObject({ status: 'denied', amount: '1500000', failureMessage: expect.stringContaining(LIMIT_NAME) });
    // Exactly up to the limit is fine; the denial above did not count.
    await spenderClient.signTypedData(usdcTransfer(limited.walletAddress, '1000000'));
    await expect(spenderClient.signTypedData(usdcTransfer(limited.walletAddress, '1'))).rejects.toMatchObject({ status: 403 });
  });

  it('does not count other chains, and rules still come first', async () => {
    await expect(
      spenderClient.signTypedData(usdcTransfer(limited.walletAddress, '5000000', { chainId: 84532, verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' })),
    ).resolves.toMatchObject({ walletAddress: limited.walletAddress });
    await expect(spenderClient.signTypedData(usdcTransfer(limited.walletAddress, '5000001', { chainId: 84532, verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' }))).rejects.toMatchObject({
      status: 403,
      message: 'No policy rule allows this request',
    });
  });

  it('frees the budget as entries leave the window', async () => {
    // Signed so far: 2.5 at t0, 2.5 at t0+60 s, 1.0 at t0+120 s; now t0+120 s. Moving to
    // t0+24 h+30 s drops the first one only: 3.5 USDC remain in the window.
    ctx.clock.advance(24 * 3_600_000 - 90_000);
    await expect(spenderClient.signTypedData(usdcTransfer(limited.walletAddress, '2500001'))).rejects.toMatchObject({ status: 403 });
    await spenderClient.signTypedData(usdcTransfer(limited.walletAddress, '2500000'));
  });

  it('lets concurrent requests of one wallet together stay within the limit', async () => {
    const wallet2 = await createWallet(ctx, ctx.orgB, 'Concurrent');
    const agent2 = await createAgent(ctx, ctx.orgB, wallet2.walletId, 'Racer');
    await ctx.admin.post(`/v1/wallets/${wallet2.walletId}/policies`).send({
      version: '1.0',
      name: 'Cap',
      chain_type: 'ethereum',
      rules: [{ name: 'noop', method: '*', action: 'DENY', conditions: [{ field_source: 'system', field: 'current_unix_timestamp', operator: 'lt', value: 0 }] }],
      spend_limits: [{ name: 'Three USDC', window_hours: 1, max_value: '3000000' }],
    }).expect(201);
    const auth = { agentId: agent2.agentId, orgId: ctx.orgB.orgId, name: 'Racer', keyQuorumId: agent2.keyQuorumId, publicKey: agent2.publicKey, walletId: wallet2.walletId, quorumKeys: [agent2.publicKey] };
    const requests = Array.from({ length: 10 }, () => {
      const td = usdcTransfer(wallet2.walletAddress, '1000000');
      const signature = authorizeTypedData(agent2.privateKey, td, ctx.orgB.orgId);
      return ctx.services.agentWallet.runtime.signTypedData(auth, { typed_data: td, signature }, `${PUBLIC_API_URL}${SIGN}`).then(
        () => 'signed',
        (err: { code?: string }) => err.code,
      );
    });
    const outcomes = await Promise.all(requests);
    expect(outcomes.filter((o) => o === 'signed')).toHaveLength(3);
    expect(outcomes.filter((o) => o === 'FORBIDDEN')).toHaveLength(7);
  });

  it('refuses duplicate spend limit names and out-of-range windows', async () => {
    const base = { version: '1.0', name: 'Bad', chain_type: 'ethereum', rules: [{ name: 'r', method: '*', action: 'ALLOW', conditions: [] }] };
    const dup = await ctx.admin.post(`/v1/wallets/${limited.walletId}/policies`).send({
      ...base,
      spend_limits: [{ name: 'a', window_hours: 1, max_value: '1' }, { name: 'a', window_hours: 2, max_value: '1' }],
    });
    expect(dup.status).toBe(400);
    expect(dup.body.error.message).toBe("spend_limits[1].name: duplicate spend limit name 'a'");
    for (const limit of [{ name: 'a', window_hours: 0, max_value: '1' }, { name: 'a', window_hours: 721, max_value: '1' }, { name: 'a', window_hours: 1, max_value: '1.5' }]) {
      expect((await ctx.admin.post(`/v1/wallets/${limited.walletId}/policies`).send({ ...base, spend_limits: [limit] })).status).toBe(400);
    }
  });
});

describe('history of typed data that only looks like a transfer', () => {
  it('records a custom "TransferWithAuthorization" whose fields are not EIP-3009 shaped without destination or amount', async () => {
    const open = await createWallet(ctx, ctx.orgB, 'Open');
    const agentB = await createAgent(ctx, ctx.orgB, open.walletId, 'Open agent');
    await ctx.admin.post(`/v1/wallets/${open.walletId}/policies`).send({
      version: '1.0',
      name: 'Allow everything',
      chain_type: 'ethereum',
      rules: [{ name: 'everything', method: '*', action: 'ALLOW', conditions: [] }],
    }).expect(201);
    const td = {
      domain: { name: 'Notes', chainId: 8453 },
      types: { TransferWithAuthorization: [{ name: 'to', type: 'string' }, { name: 'value', type: 'string' }] },
      primary_type: 'TransferWithAuthorization',
      message: { to: 'Alice', value: 'a lot' },
    };
    const signed = await clientFor(ctx, agentB, transport).signTypedData(td);
    expect(signed.walletAddress).toBe(open.walletAddress);
    const [entry] = await clientFor(ctx, agentB, transport).history({ limit: 1 });
    expect(entry).toMatchObject({ status: 'signed', destination: null, amount: null, asset: null, chainId: 8453 });
  });
});
