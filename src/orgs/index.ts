/** The organizations module, wired: the org service (API keys, permissions) and its handlers. */
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import { createOrgAdminHandlers } from './admin.handlers.js';
import { createMeHandlers } from './me.handlers.js';
import { createOrgConsoleHandlers } from './console.handlers.js';
import { KnexOrgRepository } from './orgs.repository.js';
import { OrgService, type ConnectedAccountCheck } from './orgs.service.js';

export interface OrgsModule {
  orgs: OrgService;
  handlers: {
    merchant: ReturnType<typeof createMeHandlers>;
    admin: ReturnType<typeof createOrgAdminHandlers>;
    console: ReturnType<typeof createOrgConsoleHandlers>;
  };
}

export function createOrgsModule(deps: {
  db: Db;
  clock: Clock;
  /** Checks Stripe connected accounts before they are bound, when Stripe is the card processor. */
  connectedAccounts?: ConnectedAccountCheck;
  /** The deployment's card processor, shown on the console's settings (default sandbox). */
  cardProcessor?: 'sandbox' | 'stripe';
}): OrgsModule {
  const orgs = new OrgService(new KnexOrgRepository(deps.db), deps.clock, deps.connectedAccounts);
  return { orgs, handlers: { merchant: createMeHandlers(), admin: createOrgAdminHandlers(orgs), console: createOrgConsoleHandlers(orgs, deps.cardProcessor ?? 'sandbox') } };
}
