/** Wires repositories into domain services. Handlers receive services, never the database. */
import type { Db } from './db/knex.js';
import type { Clock } from './kernel/clock.js';
import type { SecretBox } from './kernel/secrets.js';
import { KnexOrgRepository } from './orgs/orgs.repository.js';
import { OrgService } from './orgs/orgs.service.js';
import { KnexSigningKeyRepository } from './webhooks/signing-key.repository.js';
import { SigningKeyService } from './webhooks/signing-key.service.js';

export interface Services {
  orgs: OrgService;
  signingKeys: SigningKeyService;
}

export function createServices(deps: { db: Db; clock: Clock; secretBox: SecretBox }): Services {
  return {
    orgs: new OrgService(new KnexOrgRepository(deps.db), deps.clock),
    signingKeys: new SigningKeyService(new KnexSigningKeyRepository(deps.db), deps.secretBox, deps.clock),
  };
}
