import type { AdminHandlers } from '../handler-maps.js';
import { iso, isoOrNull, page } from '../kernel/present.js';
import type { ApiKey, Organization } from './orgs.repository.js';
import { OrgService } from './orgs.service.js';
import type { Permission } from './permissions.js';

const presentOrg = (org: Organization) => ({
  orgId: org.id,
  name: org.name,
  displayName: OrgService.displayName(org),
  frozen: org.frozen,
  cardVerified: org.cardVerified,
  cardAccountEnabled: org.cardAccountEnabled,
  createdAt: iso(org.createdAt),
  updatedAt: iso(org.updatedAt),
});

/** The organization's Stripe Connect binding, as the admin and console answers show it. */
export const presentStripeAccount = (org: Organization) => {
  const state = org.stripeAccountId ? org.stripeAccountState : null;
  const problem = OrgService.stripeAccountProblem(org) ?? null;
  return {
    orgId: org.id,
    accountId: org.stripeAccountId,
    boundAt: isoOrNull(org.stripeAccountBoundAt),
    state: state && {
      chargesEnabled: state.chargesEnabled,
      transfers: state.transfers,
      cardPayments: state.cardPayments,
      usable: problem === null,
      problem,
      checkedAt: iso(state.checkedAt),
    },
  };
};

const presentKey = (key: ApiKey) => ({
  apiKeyId: key.id,
  orgId: key.orgId,
  name: key.name,
  prefix: key.prefix,
  permissions: key.permissions as Permission[],
  revoked: key.revokedAt !== null,
  createdAt: iso(key.createdAt),
  revokedAt: isoOrNull(key.revokedAt),
});

type OrgAdminHandlers = Pick<
  AdminHandlers,
  'listOrgs' | 'createOrg' | 'getOrg' | 'updateOrg' | 'getStripeAccount' | 'setStripeAccount' | 'deleteStripeAccount' | 'listApiKeys' | 'createApiKey' | 'revokeApiKey'
>;

export function createOrgAdminHandlers(orgs: OrgService): OrgAdminHandlers {
  return {
    listOrgs: async ({ query }) => {
      const pageNumber = query.page ?? 1;
      const size = query.size ?? 20;
      const { records, total } = await orgs.listOrganizations(pageNumber, size);
      return { status: 200, body: { success: true, message: 'OK', data: page(records.map(presentOrg), total, pageNumber, size) } };
    },
    createOrg: async ({ body }) => ({
      status: 201,
      body: { success: true, message: 'Organization created', data: presentOrg(await orgs.createOrganization(body)) },
    }),
    getOrg: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: presentOrg(await orgs.getOrganization(params.id)) },
    }),
    updateOrg: async ({ params, body }) => ({
      status: 200,
      body: { success: true, message: 'Organization updated', data: presentOrg(await orgs.updateOrganization(params.id, body)) },
    }),
    getStripeAccount: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: presentStripeAccount(await orgs.getOrganization(params.id)) },
    }),
    setStripeAccount: async ({ params, body }) => ({
      status: 200,
      body: { success: true, message: 'Stripe account bound', data: presentStripeAccount(await orgs.bindStripeAccount(params.id, body.accountId)) },
    }),
    deleteStripeAccount: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Stripe account unbound', data: presentStripeAccount(await orgs.unbindStripeAccount(params.id)) },
    }),
    listApiKeys: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await orgs.listApiKeys(params.id)).map(presentKey) },
    }),
    createApiKey: async ({ params, body }) => {
      const created = await orgs.createApiKey(params.id, body ?? {});
      return {
        status: 201,
        body: {
          success: true,
          message: 'API key created; store it now, it is not shown again',
          data: { ...presentKey(created), key: created.key },
        },
      };
    },
    revokeApiKey: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'API key revoked', data: presentKey(await orgs.revokeApiKey(params.id)) },
    }),
  };
}
