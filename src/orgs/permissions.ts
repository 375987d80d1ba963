import type { components } from '../../generated/admin.js';

export type Permission = components['schemas']['Permission'];

/** Every permission a merchant API key can hold; a key created without a list gets all of them. */
export const ALL_PERMISSIONS: readonly Permission[] = [
  'checkout:write',
  'catalog:read',
  'orders:read',
  'subscriptions:read',
  'customers:read',
  'webhooks:write',
  'entitlements:read',
  'x402:settle',
  'customers:write',
  'usage:write',
  'meters:read',
  'meters:write',
  // Cancel and keep subscriptions through the customer portal sessions the key opens (issue 37 §6).
  'subscriptions:manage',
];
