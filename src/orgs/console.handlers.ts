/**
 * The console's organization settings (openapi/console.yaml, tag Settings): display name and
 * branding through OrgService (the admin API's service), and the card processor's status (the
 * connected account the operator bound). Audited at composition.
 */
import type { ConsoleHandlers } from '../handler-maps.js';
import { textColourOn } from '../kernel/colour.js';
import { iso } from '../kernel/present.js';
import { presentStripeAccount } from './admin.handlers.js';
import type { Organization } from './orgs.repository.js';
import type { OrgService } from './orgs.service.js';

/** Kassa's own accent (the hosted pages' indigo) when the organization has none. */
export const DEFAULT_ACCENT = '#4338ca';

export const presentSettings = (org: Organization) => ({
  orgId: org.id,
  name: org.name,
  displayName: org.displayName,
  branding: {
    logoUrl: org.branding.logoUrl,
    accentColor: org.branding.accentColor,
    accentTextColor: textColourOn(org.branding.accentColor ?? DEFAULT_ACCENT),
  },
  timeZone: org.timeZone,
  updatedAt: iso(org.updatedAt),
});

export function createOrgConsoleHandlers(
  orgs: OrgService,
  cardProcessor: 'sandbox' | 'stripe',
): Pick<ConsoleHandlers, 'getConsoleOrganization' | 'updateConsoleOrganization' | 'getConsoleCardProcessor'> {
  return {
    getConsoleOrganization: async ({ auth }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: presentSettings(await orgs.getOrganization(auth.orgId)) },
    }),
    updateConsoleOrganization: async ({ auth, body }) => ({
      status: 200,
      body: { success: true, message: 'Settings updated', data: presentSettings(await orgs.updateSettings(auth.orgId, body)) },
    }),
    getConsoleCardProcessor: async ({ auth }) => ({
      status: 200,
      body: {
        success: true,
        message: 'OK',
        data: { processor: cardProcessor, connectedAccount: cardProcessor === 'stripe' ? presentStripeAccount(await orgs.getOrganization(auth.orgId)) : null },
      },
    }),
  };
}
