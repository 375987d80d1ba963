/** Shared setup of the agent wallet tests: wallets and agents through the admin API, signed requests. */
import type { KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import type { TestContext, TestOrg } from '../harness/context.js';
import { createAgentClient, loadAgentWalletKey, signAgentRequest, signWalletAuthorization, type AgentClient } from '../../src/client/agent.js';
import { unixSeconds } from '../../src/kernel/clock.js';

export { BASE_USDC, usdcTransfer } from './typed-data-fixtures.js';

export const PUBLIC_API_URL = 'http://api.test';
export const BASE_SEPOLIA_USDC = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';

export interface TestAgent {
  agentId: string;
  keyQuorumId: string;
  publicKey: string;
  privateKey: KeyObject;
  agentWalletKey: string;
  walletId: string | null;
}

export interface TestWallet {
  walletId: string;
  walletAddress: string;
  appId: string;
}

export async function createWallet(ctx: TestContext, org: TestOrg, name?: string): Promise<TestWallet> {
  const res = await ctx.admin.post(`/v1/orgs/${org.orgId}/wallets`).send(name ? { name } : {});
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data;
}

export async function createAgent(ctx: TestContext, org: TestOrg, walletId?: string, name = 'Test agent'): Promise<TestAgent> {
  const res = await ctx.admin.post(`/v1/orgs/${org.orgId}/agents`).send({ name, ...(walletId ? { walletId } : {}) });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const key = loadAgentWalletKey(res.body.data.agentWalletKey);
  expect(key.publicKey).toBe(res.body.data.publicKey);
  return {
    agentId: res.body.data.agentId,
    keyQuorumId: res.body.data.keyQuorumId,
    publicKey: res.body.data.publicKey,
    privateKey: key.privateKey,
    agentWalletKey: res.body.data.agentWalletKey,
    walletId: key.walletId,
  };
}

/** The three X-Agent-* headers for `method path`, signed now (or at `timestamp`). */
export function agentHeaders(ctx: TestContext, agent: Pick<TestAgent, 'publicKey' | 'privateKey'>, method: string, path: string, timestamp?: number) {
  return { ...signAgentRequest(agent, method, path, timestamp ?? unixSeconds(ctx.clock.now())) };
}

/** The `signature` field of a sign-typed-data body for `typedData`, by `privateKey`. */
export function authorizeTypedData(privateKey: KeyObject, typedData: object, appId: string, url = `${PUBLIC_API_URL}/v1/agent-wallet/sign-typed-data`): string {
  return signWalletAuthorization(privateKey, { url, body: { typed_data: typedData }, appId });
}

/** The platform app on a loopback port, reachable as PUBLIC_API_URL through the returned fetch. */
export async function listenPlatform(ctx: TestContext): Promise<{ fetch: (request: Request) => Promise<Response>; close(): Promise<void> }> {
  const server: Server = createServer(ctx.apps.platform);
  // Tests pause between requests longer than Node's 5 s default; a socket the server closed while
  // fetch reuses it would surface as ECONNRESET.
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const local = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    fetch: async (request) => {
      const body = request.method === 'GET' || request.method === 'HEAD' ? undefined : await request.text();
      return fetch(request.url.replace(PUBLIC_API_URL, local), { method: request.method, headers: request.headers, body });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export function clientFor(ctx: TestContext, agent: TestAgent, transport: { fetch: (request: Request) => Promise<Response> }): AgentClient {
  return createAgentClient({
    agentWalletKey: agent.agentWalletKey,
    baseUrl: PUBLIC_API_URL,
    fetch: transport.fetch,
    now: () => ctx.clock.now().getTime(),
  });
}
