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
