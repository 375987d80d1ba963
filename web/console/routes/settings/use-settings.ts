/** Typed data hooks and actions over members, invites, the audit log and the session (console document). */
import type { components } from '../../../../generated/console';
import { consoleApi } from '../../shared/api';
import { signedInSession } from '../../shared/session';
import { useApi } from '../../shared/use-api';

export type Role = components['schemas']['Role'];
export const ROLES: Role[] = ['owner', 'admin', 'developer', 'support', 'viewer'];

export const useMembers = () => useApi(() => consoleApi.GET('/v1/console/members').then((r) => ({ ...r, data: r.data?.data })), []);
export const useInvites = () => useApi(() => consoleApi.GET('/v1/console/invites').then((r) => ({ ...r, data: r.data?.data })), []);
export const useAuditLog = (page: number) => useApi(() => consoleApi.GET('/v1/console/audit-log', { params: { query: { page, size: 50 } } }).then((r) => ({ ...r, data: r.data?.data })), [page]);

export const changeRole = (id: string, role: Role) => consoleApi.PATCH('/v1/console/members/{id}', { params: { path: { id } }, body: { role } }).then((r) => ({ ...r, data: r.data?.data }));
export const removeMember = (id: string) => consoleApi.DELETE('/v1/console/members/{id}', { params: { path: { id } } });
export const createInvite = (email: string, role: Role) => consoleApi.POST('/v1/console/invites', { body: { email, role } }).then((r) => ({ ...r, data: r.data?.data }));
export const revokeInvite = (id: string) => consoleApi.POST('/v1/console/invites/{id}/revoke', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data }));
export const signOutEverywhere = () => consoleApi.POST('/v1/console/sign-out-everywhere').then((r) => ({ ...r, data: r.data ?? {} }));

// ---- passkeys and the second-factor requirement (Settings → Security) ----------------------------
export const usePasskeys = () => useApi(() => consoleApi.GET('/v1/console/passkeys').then((r) => ({ ...r, data: r.data?.data })), []);
export const useOrganizationSecurity = (enabled: boolean) =>
  useApi(() => (enabled ? consoleApi.GET('/v1/console/organization/security').then((r) => ({ ...r, data: r.data?.data })) : Promise.resolve({ data: undefined })), [enabled]);
export const removePasskey = (id: string) => consoleApi.DELETE('/v1/console/passkeys/{id}', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data ?? {} }));
export const setRequireSecondFactor = (requireSecondFactor: boolean) => consoleApi.PUT('/v1/console/organization/security', { body: { requireSecondFactor } }).then((r) => ({ ...r, data: r.data?.data }));
export const reloadSession = () => consoleApi.GET('/v1/console/session').then((r) => ({ ...r, data: signedInSession(r.data?.data) }));
