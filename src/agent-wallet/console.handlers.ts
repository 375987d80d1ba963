/**
 * The console's agent wallet operations (openapi/console.yaml, tag Agent wallets): a member's
 * door to the same AgentWalletAdminService as the operator's admin API, scoped to the session's
 * organization (another organization's wallet, agent or policy is 404).
 */
import type { ConsoleHandlers } from '../handler-maps.js';
import type { Wallet } from './agent-wallet.repository.js';
import type { AgentWalletAdminService } from './admin.service.js';
import { presentAgent, presentPolicy, presentWallet } from './admin.handlers.js';
import { presentHistoryEntry } from './agent-wallet.handlers.js';

type AgentWalletConsoleHandlers = Pick<
  ConsoleHandlers,
  | 'listConsoleAgentWallets'
  | 'createConsoleAgentWallet'
  | 'listConsoleAgentWalletPolicies'
  | 'createConsoleAgentWalletPolicy'
  | 'deleteConsoleAgentPolicy'
  | 'listConsoleAgents'
  | 'createConsoleAgent'
  | 'assignConsoleAgentWallet'
  | 'revokeConsoleAgent'
  | 'rotateConsoleAgentKey'
  | 'getConsoleAgentCredit'
  | 'listConsoleAgentHistory'
>;

/** The answers that carry an Agent Wallet Key are never stored by a cache. */
const NO_STORE = { 'Cache-Control': 'no-store' };

export function createAgentWalletConsoleHandlers(service: AgentWalletAdminService): AgentWalletConsoleHandlers {
  const withChains = (wallet: Wallet) => ({
    ...presentWallet(wallet),
    chains: service.walletChains().map((chain) => ({ chainId: chain.chainId, name: chain.name, address: wallet.address })),
  });
  return {
    listConsoleAgentWallets: async ({ auth }) => ({ status: 200, body: { success: true, message: 'OK', data: (await service.listWallets(auth.orgId)).map(withChains) } }),
    createConsoleAgentWallet: async ({ auth, body }) => ({
      status: 201,
      body: { success: true, message: 'Wallet created', data: withChains(await service.createWallet(auth.orgId, body ?? {})) },
    }),
    listConsoleAgentWalletPolicies: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await service.listWalletPolicies(params.id, auth.orgId)).map(presentPolicy) },
    }),
    createConsoleAgentWalletPolicy: async ({ auth, params, body }) => ({
      status: 201,
      body: { success: true, message: 'Policy created', data: presentPolicy(await service.createPolicy(params.id, body, auth.orgId)) },
    }),
    deleteConsoleAgentPolicy: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Policy deleted', data: presentPolicy(await service.deletePolicy(params.id, auth.orgId)) },
    }),
    listConsoleAgents: async ({ auth }) => ({ status: 200, body: { success: true, message: 'OK', data: (await service.listAgents(auth.orgId)).map(presentAgent) } }),
    createConsoleAgent: async ({ auth, body }) => {
      // The member's key: the agent is revoked when they leave or lose agents:manage (src/accounts, removeMember).
      const { agent, agentWalletKey } = await service.createAgent(auth.orgId, body, `user:${auth.actor.id}`);
      return {
        status: 201,
        headers: NO_STORE,
        body: {
          success: true,
          message: agentWalletKey ? 'Agent created; store the Agent Wallet Key now, it is not shown again' : 'Agent created',
          data: { ...presentAgent(agent), agentWalletKey },
        },
      };
    },
    assignConsoleAgentWallet: async ({ auth, params, body }) => ({
      status: 200,
      body: { success: true, message: body.walletId ? 'Wallet assigned' : 'Wallet unassigned', data: presentAgent(await service.assignWallet(params.id, body.walletId, auth.orgId)) },
    }),
    revokeConsoleAgent: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Agent revoked', data: presentAgent(await service.revokeAgent(params.id, auth.orgId)) },
    }),
    rotateConsoleAgentKey: async ({ auth, params, body }) => {
      const { agent, agentWalletKey } = await service.rotateKey(params.id, body ?? {}, auth.orgId, `user:${auth.actor.id}`);
      return {
        status: 200,
        headers: NO_STORE,
        body: {
          success: true,
          message: agentWalletKey ? 'Key rotated; store the new Agent Wallet Key now, it is not shown again' : 'Key rotated',
          data: { ...presentAgent(agent), agentWalletKey },
        },
      };
    },
    getConsoleAgentCredit: async ({ auth }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: { orgId: auth.orgId, ...(await service.creditBalance(auth.orgId)) } },
    }),
    listConsoleAgentHistory: async ({ auth, query }) => {
      const page = await service.history(auth.orgId, { walletId: query.wallet_id, agentId: query.agent_id, status: query.status }, query.starting_after, query.size ?? 20);
      return { status: 200, body: { success: true, message: 'OK', data: { records: page.records.map(presentHistoryEntry), hasMore: page.hasMore, nextCursor: page.nextCursor } } };
    },
  };
}
