/**
 * The x402 proof setup: a Hardhat chain with the EIP-3009 token, Kassa (merchant API on a loopback
 * port as the facilitator, platform API for the agent), an organization with a receiving wallet
 * and a funded relayer, an agent whose wallet holds tokens, and a merchant's Express app behind
 * the official @x402/express middleware pointing at Kassa.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { createPublicClient, createWalletClient, getAddress, http, type Abi } from 'viem';
import { HTTPFacilitatorClient } from '@x402/core/server';
import { createPaidApp } from '../../scripts/examples/x402-merchant.js';
import { startLocalChain, type LocalChain } from '../crypto-payments/chain.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createAgent, createWallet, listenPlatform } from '../agent-wallet/helpers.js';
import { createAgentClient, type AgentClient } from '../../src/client/agent.js';
import { PUBLIC_API_URL } from '../agent-wallet/helpers.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const TOKEN_ARTIFACT = JSON.parse(readFileSync(path.join(here, 'fixtures/Eip3009Token.json'), 'utf8')) as { abi: Abi; bytecode: `0x${string}` };
export const USDC = (tokens: number) => BigInt(Math.round(tokens * 1_000_000));

export interface X402World {
  chain: LocalChain;
  token: `0x${string}`;
  network: `eip155:${number}`;
  ctx: TestContext;
  /** Kassa's merchant API on loopback: the facilitator is `${merchantUrl}/v1/x402`. */
  merchantUrl: string;
  payTo: `0x${string}`;
  relayer: `0x${string}`;
  agent: AgentClient;
  /** The agent's Agent Wallet Key and its transport to Kassa's platform API. */
  agentWalletKey: string;
  agentFetch: (request: Request) => Promise<Response>;
  agentWallet: `0x${string}`;
  balanceOf(owner: `0x${string}`): Promise<bigint>;
  /** A facilitator client as a merchant's middleware builds it (the org's API key in X-API-Key). */
  facilitator(apiKey?: string): HTTPFacilitatorClient;
  /** An Express app protected by @x402/express; routes `/report` (1 USDC) and `/expensive` (6 USDC). */
  startMerchantApp(routes?: Parameters<typeof createPaidApp>[0]['routes']): Promise<{ url: string; close(): Promise<void> }>;
  close(): Promise<void>;
}

const listen = async (handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> => {
  const server = createServer(handler);
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
};
const closeServer = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

export async function startX402World(options: { env?: Record<string, string>; /** The RPC URL Kassa is configured with (default: the chain's own). */ rpcUrl?: (chainUrl: string) => string } = {}): Promise<X402World> {
  const chain = await startLocalChain();
  const transport = http(chain.url, { retryCount: 0 });
  const pub = createPublicClient({ transport });
  const chainDef = { id: chain.chainId, name: 'hardhat', nativeCurrency: { name: 'ETH', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [chain.url] } } };
  const deployer = createWalletClient({ account: chain.accounts[0]!, transport, chain: chainDef });
  const hash = await deployer.deployContract({ abi: TOKEN_ARTIFACT.abi, bytecode: TOKEN_ARTIFACT.bytecode, args: ['USD Coin', 'USDC'] } as never);
  const token = getAddress((await pub.waitForTransactionReceipt({ hash, pollingInterval: 20 })).contractAddress!);
  const mint = async (to: `0x${string}`, units: bigint) => {
    const tx = await deployer.writeContract({ address: token, abi: TOKEN_ARTIFACT.abi, functionName: 'mint', args: [to, units] } as never);
    await pub.waitForTransactionReceipt({ hash: tx, pollingInterval: 20 });
  };
  const balanceOf = async (owner: `0x${string}`) =>
    (await pub.readContract({ address: token, abi: TOKEN_ARTIFACT.abi, functionName: 'balanceOf', args: [owner] })) as bigint;

  const ctx = await createTestContext({
    env: {
      WEBHOOK_ALLOW_LOOPBACK: 'true',
      CRYPTO_CHAINS: JSON.stringify([
        { chainId: chain.chainId, name: 'Hardhat', rpcUrl: options.rpcUrl?.(chain.url) ?? chain.url, confirmations: 1, explorerUrl: 'https://explorer.test', blockRange: 100, initialLookback: 100, tokens: { USDC: token } },
      ]),
      ...options.env,
    },
  });
  const merchant = await listen(ctx.apps.merchant);
  const platform = await listenPlatform(ctx);

  const payTo = chain.accounts[2]!;
  expect((await ctx.admin.put(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${chain.chainId}`).send({ address: payTo })).status).toBe(200);
  const relayerRes = await ctx.admin.post('/v1/x402/relayer');
  expect(relayerRes.status, JSON.stringify(relayerRes.body)).toBe(201);
  const relayer = relayerRes.body.data.address as `0x${string}`;
  await chain.rpc('hardhat_setBalance', [relayer, '0x56BC75E2D63100000']); // 100 ETH for gas

  // The paying agent belongs to another organization than the merchant (org B).
  const wallet = await createWallet(ctx, ctx.orgB, 'Agent spending');
  const testAgent = await createAgent(ctx, ctx.orgB, wallet.walletId, 'Shopper');
  const agentWallet = wallet.walletAddress as `0x${string}`;
  await mint(agentWallet, USDC(20));
  const agent = createAgentClient({ agentWalletKey: testAgent.agentWalletKey, baseUrl: PUBLIC_API_URL, fetch: platform.fetch, now: () => ctx.clock.now().getTime() });

  const network = `eip155:${chain.chainId}` as const;
  const facilitator = (apiKey = ctx.orgA.apiKey) => {
    const headers = { 'X-API-Key': apiKey };
    return new HTTPFacilitatorClient({ url: `${merchant.url}/v1/x402`, createAuthHeaders: async () => ({ supported: headers, verify: headers, settle: headers }) });
  };

  const apps: Server[] = [];
  return {
    chain,
    token,
    network,
    ctx,
    merchantUrl: merchant.url,
    payTo,
    relayer,
    agent,
    agentWalletKey: testAgent.agentWalletKey,
    agentFetch: platform.fetch,
    agentWallet,
    balanceOf,
    facilitator,
    async startMerchantApp(routes) {
      // The documented merchant example (docs/x402-merchants.md), pointed at this Kassa.
      const app = createPaidApp({
        kassaUrl: merchant.url,
        apiKey: ctx.orgA.apiKey,
        network,
        payTo,
        asset: { address: token, name: 'USD Coin', version: '2' },
        routes: routes ?? {
          'GET /report': { units: USDC(1), description: 'Weather report', body: { report: 'sunny' } },
          'GET /expensive': { units: USDC(6), description: 'Expensive report', body: { report: 'very sunny' } },
        },
      });
      const { server, url } = await listen(app);
      apps.push(server);
      return { url, close: () => closeServer(server) };
    },
    async close() {
      for (const server of apps) if (server.listening) await closeServer(server);
      await closeServer(merchant.server);
      await platform.close();
      await ctx.close();
      await chain.close();
    },
  };
}
