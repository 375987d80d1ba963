/** Admin API handlers of wallets, agents, policies and credit (management outside the agent API). */
import type { AdminHandlers } from '../handler-maps.js';
import { iso, isoOrNull } from '../kernel/present.js';
import type { Agent, Policy, Wallet } from './agent-wallet.repository.js';
import type { AgentWalletAdminService } from './admin.service.js';

type AgentWalletAdminHandlers = Pick<
  AdminHandlers,
  | 'listWallets' | 'createWallet' | 'listAgents' | 'createAgent' | 'assignAgentWallet' | 'revokeAgent' | 'rotateAgentKey'
  | 'listWalletPolicies' | 'createWalletPolicy' | 'deletePolicy' | 'getOrgCredit' | 'grantCredit'
>;

export const presentWallet = (wallet: Wallet) => ({
  walletId: wallet.id,
  orgId: wallet.orgId,
  name: wallet.name,
  walletAddress: wallet.address,
  providerWalletId: wallet.providerWalletId,
  appId: wallet.appId,
  createdAt: iso(wallet.createdAt),
});

export const presentAgent = (agent: Agent) => ({
  agentId: agent.id,
  orgId: agent.orgId,
  name: agent.name,
  publicKey: agent.publicKey,
  keyQuorumId: agent.keyQuorumId,
  walletId: agent.walletId,
  revoked: agent.revokedAt !== null,
  createdAt: iso(agent.createdAt),
  revokedAt: isoOrNull(agent.revokedAt),
});

export const presentPolicy = (policy: Policy) => ({
  id: policy.id,
  walletId: policy.walletId,
  name: policy.name,
  version: policy.version,
  chainType: policy.chainType,
  rules: policy.rules,
  spendLimits: policy.spendLimits,
  createdAt: iso(policy.createdAt),
});

export function createAgentWalletAdminHandlers(service: AgentWalletAdminService): AgentWalletAdminHandlers {
  return {
    listWallets: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await service.listWallets(params.id)).map(presentWallet) },
    }),
    createWallet: async ({ params, body }) => ({
      status: 201,
      body: { success: true, message: 'Wallet created', data: presentWallet(await service.createWallet(params.id, body ?? {})) },
    }),
    listAgents: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await service.listAgents(params.id)).map(presentAgent) },
    }),
    createAgent: async ({ params, body }) => {
      const { agent, agentWalletKey } = await service.createAgent(params.id, body);
      return {
        status: 201,
        body: {
          success: true,
          message: agentWalletKey ? 'Agent created; store the Agent Wallet Key now, it is not shown again' : 'Agent created',
          data: { ...presentAgent(agent), agentWalletKey },
        },
      };
    },
    assignAgentWallet: async ({ params, body }) => ({
      status: 200,
      body: {
        success: true,
        message: body.walletId ? 'Wallet assigned' : 'Wallet unassigned',
        data: presentAgent(await service.assignWallet(params.id, body.walletId)),
      },
    }),
    revokeAgent: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Agent revoked', data: presentAgent(await service.revokeAgent(params.id)) },
    }),
    rotateAgentKey: async ({ params, body }) => {
      const { agent, agentWalletKey } = await service.rotateKey(params.id, body ?? {});
      return {
        status: 200,
        body: {
          success: true,
          message: agentWalletKey ? 'Key rotated; store the new Agent Wallet Key now, it is not shown again' : 'Key rotated',
          data: { ...presentAgent(agent), agentWalletKey },
        },
      };
    },
    listWalletPolicies: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await service.listWalletPolicies(params.id)).map(presentPolicy) },
    }),
    createWalletPolicy: async ({ params, body }) => ({
      status: 201,
      body: { success: true, message: 'Policy created', data: presentPolicy(await service.createPolicy(params.id, body)) },
    }),
    deletePolicy: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Policy deleted', data: presentPolicy(await service.deletePolicy(params.id)) },
    }),
    getOrgCredit: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: { orgId: params.id, ...(await service.creditBalance(params.id)) } },
    }),
    grantCredit: async ({ params, body }) => {
      const { entry, balanceMinor, balance } = await service.grantCredit(params.id, body);
      return {
        status: 201,
        body: {
          success: true,
          message: 'Credit granted',
          data: {
            entryId: entry.id,
            orgId: entry.orgId,
            amount: entry.amount,
            unit: body.unit,
            reason: entry.reason,
            createdAt: iso(entry.createdAt),
            balanceMinor,
            balance,
          },
        },
      };
    },
  };
}
