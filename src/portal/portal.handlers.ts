import type { MerchantHandlers } from '../handler-maps.js';
import { iso } from '../kernel/present.js';
import type { PortalService } from './portal.service.js';

export function createPortalHandlers(portal: PortalService): Pick<MerchantHandlers, 'createCustomerPortalSession'> {
  return {
    createCustomerPortalSession: async ({ auth, body }) => {
      const link = await portal.createForMerchant(auth.orgId, body, { actor: auth.actor.type === 'api_key' ? auth.actor : { type: 'user', id: auth.actor.id }, permissions: auth.permissions });
      return {
        status: 201,
        body: { success: true, message: 'Customer portal session created', data: { id: link.id, customerId: link.customerId, url: link.url, expiresAt: iso(link.expiresAt), returnUrl: link.returnUrl } },
      };
    },
  };
}
