/**
 * A merchant API key as the admin API (`ApiKey`) and the console (`ConsoleApiKey`, which adds who
 * created it and when it was last used) show it: never the secret nor its hash.
 */
import { iso, isoOrNull } from '../kernel/present.js';
import type { ApiKey } from './orgs.repository.js';
import type { Permission } from './permissions.js';

export const presentApiKey = (key: ApiKey) => ({
  apiKeyId: key.id,
  orgId: key.orgId,
  name: key.name,
  prefix: key.prefix,
  permissions: key.permissions as Permission[],
  revoked: key.revokedAt !== null,
  createdAt: iso(key.createdAt),
  revokedAt: isoOrNull(key.revokedAt),
});
