/** Typed data hooks and actions over the agent-wallet operations of the console document. */
import { consoleApi } from '../../shared/api';
import { useApi } from '../../shared/use-api';

export const useWallets = () => useApi(() => consoleApi.GET('/v1/console/agent-wallets').then((r) => ({ ...r, data: r.data?.data })), []);
export const useAgents = () => useApi(() => consoleApi.GET('/v1/console/agents').then((r) => ({ ...r, data: r.data?.data })), []);
export const useCredit = () => useApi(() => consoleApi.GET('/v1/console/agent-credit').then((r) => ({ ...r, data: r.data?.data })), []);
export const usePolicies = (walletId: string) =>
  useApi(() => consoleApi.GET('/v1/console/agent-wallets/{id}/policies', { params: { path: { id: walletId } } }).then((r) => ({ ...r, data: r.data?.data })), [walletId]);

export const createWallet = (name: string) => consoleApi.POST('/v1/console/agent-wallets', { body: { name } }).then((r) => ({ ...r, data: r.data?.data }));
export const createAgent = (name: string, walletId: string | undefined) => consoleApi.POST('/v1/console/agents', { body: { name, ...(walletId ? { walletId } : {}) } }).then((r) => ({ ...r, data: r.data?.data }));
export const revokeAgent = (id: string) => consoleApi.POST('/v1/console/agents/{id}/revoke', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data }));
export const deletePolicy = (id: string) => consoleApi.DELETE('/v1/console/agent-policies/{id}', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data ?? {} }));

export type HistoryQuery = { wallet_id?: string; agent_id?: string; status?: 'signed' | 'denied' | 'failed' | 'pending' | 'confirmed'; starting_after?: string };
export const useHistory = (query: HistoryQuery) =>
  useApi(() => consoleApi.GET('/v1/console/agent-history', { params: { query: { size: 25, ...query } } }).then((r) => ({ ...r, data: r.data?.data })), [JSON.stringify(query)]);
export const rotateAgentKey = (id: string) => consoleApi.POST('/v1/console/agents/{id}/rotate-key', { params: { path: { id } }, body: {} }).then((r) => ({ ...r, data: r.data?.data }));
export const assignAgent = (id: string, walletId: string | null) => consoleApi.POST('/v1/console/agents/{id}/assign', { params: { path: { id } }, body: { walletId } }).then((r) => ({ ...r, data: r.data?.data }));

/** The policy form's one rule: allow or deny an x402 payment (EIP-3009 TransferWithAuthorization) by its value. */
export const TRANSFER_WITH_AUTHORIZATION_TYPES = [
  { name: 'from', type: 'address' },
  { name: 'to', type: 'address' },
  { name: 'value', type: 'uint256' },
  { name: 'validAfter', type: 'uint256' },
  { name: 'validBefore', type: 'uint256' },
  { name: 'nonce', type: 'bytes32' },
];
export type TransferRuleInput = { name: string; action: 'ALLOW' | 'DENY'; operator: 'lte' | 'gt'; valueMinor: string };
export function transferPolicyBody(input: TransferRuleInput) {
  return {
    version: '1.0' as const,
    name: input.name,
    chain_type: 'ethereum' as const,
    rules: [
      {
        name: `${input.action === 'ALLOW' ? 'Allow' : 'Deny'} transfers ${input.operator === 'lte' ? 'up to' : 'over'} ${input.valueMinor} base units`,
        method: 'eth_signTypedData_v4' as const,
        action: input.action,
        typed_data: { primary_type: 'TransferWithAuthorization', types: { TransferWithAuthorization: TRANSFER_WITH_AUTHORIZATION_TYPES } },
        conditions: [{ field_source: 'ethereum_typed_data_message' as const, field: 'value', operator: input.operator, value: input.valueMinor }],
      },
    ],
  };
}
export const createPolicy = (walletId: string, input: TransferRuleInput) =>
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  consoleApi.POST('/v1/console/agent-wallets/{id}/policies', { params: { path: { id: walletId } }, body: transferPolicyBody(input) as any }).then((r) => ({ ...r, data: r.data?.data }));
