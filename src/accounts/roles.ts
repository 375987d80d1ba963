/**
 * Roles of the members of an organization, mapped onto permission strings: the API keys'
 * permissions (src/orgs/permissions.ts) plus the management permissions only people hold. The
 * same table is written in openapi/console.yaml and docs/accounts.md; test/accounts/roles.test.ts
 * checks the three agree.
 */
import { ALL_PERMISSIONS, type Permission } from '../orgs/permissions.js';

export const ROLES = ['owner', 'admin', 'developer', 'support', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/** Management permissions: held by members through their role, never by an API key. */
export const MANAGEMENT_PERMISSIONS = [
  'api_keys:manage',
  'members:manage',
  'audit:read',
  'catalog:write',
  'telemetry:read',
  'telemetry:manage',
  'agents:manage',
  'orders:refund',
  'settings:manage',
] as const;
export type ManagementPermission = (typeof MANAGEMENT_PERMISSIONS)[number];
export type MemberPermission = Permission | ManagementPermission;

const READ: Permission[] = ['catalog:read', 'orders:read', 'subscriptions:read', 'customers:read', 'entitlements:read', 'meters:read'];
/** Every member reads telemetry (traces, sessions, metrics, prices): viewers debug too; changing it is telemetry:manage. */
const MEMBER_READ: ManagementPermission[] = ['telemetry:read'];

export const ROLE_PERMISSIONS: Readonly<Record<Role, readonly MemberPermission[]>> = {
  owner: [...ALL_PERMISSIONS, ...MANAGEMENT_PERMISSIONS],
  admin: [...ALL_PERMISSIONS, ...MANAGEMENT_PERMISSIONS],
  developer: [...READ, ...MEMBER_READ, 'checkout:write', 'webhooks:write', 'x402:settle', 'customers:write', 'usage:write', 'meters:write', 'api_keys:manage', 'telemetry:manage', 'agents:manage'],
  support: [...READ, ...MEMBER_READ, 'orders:refund', 'subscriptions:manage'],
  viewer: [...READ, ...MEMBER_READ],
};

export const isRole = (value: unknown): value is Role => typeof value === 'string' && (ROLES as readonly string[]).includes(value);

/** The API-key permissions among a member's: what a key they create may hold at most. */
export const keyPermissionsOf = (role: Role): Permission[] =>
  ALL_PERMISSIONS.filter((permission) => ROLE_PERMISSIONS[role].includes(permission));

/**
 * Who may hand out a role: an owner any; an admin any but owner (an admin can neither make nor
 * remove owners, so an organization's owners cannot be locked out by an admin).
 */
export function mayGrant(granter: Role, role: Role): boolean {
  if (granter === 'owner') return true;
  if (granter === 'admin') return role !== 'owner';
  return false;
}
