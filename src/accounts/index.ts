/**
 * The accounts module, wired: people (users, memberships, roles), console sessions, single-use
 * links, the audit log; the console document's handlers, the operator's, and the session
 * authenticator. docs/accounts.md describes the design.
 */
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { OrgService } from '../orgs/orgs.service.js';
import { KnexAccountRepository } from './accounts.repository.js';
import { AccountService, type AccountMailer, type MemberCredentials } from './accounts.service.js';
import { isRole, keyPermissionsOf } from './roles.js';
import { AuditLog } from './audit.service.js';
import { createConsoleHandlers } from './console.handlers.js';
import { createAccountsAdminHandlers } from './admin.handlers.js';
import { consoleOrigin, createSessionAuthenticator } from './request-auth.js';
import { accountRetentionJob } from './accounts.jobs.js';
import type { Job } from '../kernel/job.js';
import { KnexPasskeyRepository } from './passkeys.repository.js';
import { PasskeyService, relyingPartyOf } from './passkeys.service.js';

export interface AccountsModule {
  accounts: AccountService;
  passkeys: PasskeyService;
  audit: AuditLog;
  handlers: {
    console: ReturnType<typeof createConsoleHandlers>;
    admin: ReturnType<typeof createAccountsAdminHandlers>;
  };
  authenticators: { ConsoleSession: ReturnType<typeof createSessionAuthenticator> };
  jobs(): Job[];
}

/**
 * `credentials`: the other domains' keys a member makes in the console (telemetry keys, agents'
 * keys), revoked with the membership; the merchant API keys are added here.
 */
export function createAccountsModule(deps: { db: Db; clock: Clock; orgs: OrgService; publicBaseUrl: string; mailer?: AccountMailer; credentials?: MemberCredentials[] }): AccountsModule {
  const repo = new KnexAccountRepository(deps.db);
  const audit = new AuditLog(repo, deps.clock);
  const passkeys = new PasskeyService(new KnexPasskeyRepository(deps.db), deps.clock, relyingPartyOf(deps.publicBaseUrl));
  // A member's API key is limited, at every request, to what their current role allows.
  deps.orgs.limitMemberKeys((role) => (isRole(role) ? keyPermissionsOf(role) : undefined));
  const apiKeys: MemberCredentials = {
    kind: 'apiKeys',
    permission: null,
    revokeCreatedBy: async (orgId, createdBy) => (await deps.orgs.revokeApiKeysCreatedBy(orgId, createdBy)).map((k) => ({ id: k.id, name: k.name })),
  };
  const accounts = new AccountService(repo, deps.orgs, audit, deps.clock, deps.publicBaseUrl, passkeys, [apiKeys, ...(deps.credentials ?? [])], deps.mailer);
  const where = consoleOrigin(deps.publicBaseUrl);
  return {
    accounts,
    passkeys,
    audit,
    handlers: {
      console: createConsoleHandlers({ accounts, orgs: deps.orgs, audit, clock: deps.clock, where }),
      admin: createAccountsAdminHandlers(accounts),
    },
    authenticators: { ConsoleSession: createSessionAuthenticator(accounts, where) },
    jobs: () => [accountRetentionJob(repo, deps.clock, passkeys)],
  };
}
