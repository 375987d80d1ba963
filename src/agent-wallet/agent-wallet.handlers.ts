/** Agent wallet runtime handlers: every route runs as the agent its P-256 headers authenticated. */
import type { AgentWalletHandlers } from '../handler-maps.js';
import { iso } from '../kernel/present.js';
import { SIGN_TYPED_DATA_PATH } from './protocol.js';
import type { AgentWalletRuntimeService } from './runtime.service.js';
import type { HistoryEntry } from './agent-wallet.repository.js';

/** A history entry as agent-wallet.yaml's HistoryEntry (the console's history shows the same). */
export const presentHistoryEntry = (entry: HistoryEntry) => ({
  id: entry.id,
  agentId: entry.agentId,
  walletId: entry.walletId,
  type: entry.type,
  status: entry.status,
  destination: entry.destination,
  amount: entry.amount,
  asset: entry.asset,
  chainId: entry.chainId,
  resourceUrl: entry.resourceUrl,
  txHash: entry.txHash,
  explorerUrl: entry.explorerUrl,
  failureMessage: entry.failureMessage,
  createdAt: iso(entry.createdAt),
});

export function createAgentWalletHandlers(service: AgentWalletRuntimeService, options: { publicApiUrl: string }): AgentWalletHandlers {
  // The authorization signature covers the public URL the agent called, not whatever Host a proxy forwarded.
  const signUrl = `${options.publicApiUrl}${SIGN_TYPED_DATA_PATH}`;
  return {
    getAgentIdentity: async ({ auth }) => ({
      status: 200,
      body: { success: true, message: 'Agent identity retrieved', data: await service.identity(auth) },
    }),
    listAgentPolicies: async ({ auth }) => ({
      status: 200,
      body: {
        success: true,
        message: 'Policies retrieved',
        data: (await service.policiesOf(auth)).map((policy) => ({
          id: policy.id,
          name: policy.name,
          version: policy.version,
          chainType: policy.chainType,
          rules: policy.rules,
          spendLimits: policy.spendLimits,
          createdAt: iso(policy.createdAt),
        })),
      },
    }),
    getAgentHistory: async ({ auth, query }) => ({
      status: 200,
      body: {
        success: true,
        message: 'History retrieved',
        data: (await service.historyOf(auth, query.limit ?? 50)).map(presentHistoryEntry),
      },
    }),
    getCreditBalance: async ({ auth }) => ({
      status: 200,
      body: { success: true, message: 'Credit balance retrieved', data: await service.creditBalanceOf(auth) },
    }),
    signTypedData: async ({ auth, body }) => ({
      status: 200,
      body: { success: true, message: 'Typed data signed', data: await service.signTypedData(auth, body, signUrl) },
    }),
  };
}
