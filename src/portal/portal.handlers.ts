import type { MerchantHandlers } from '../handler-maps.js';
import { iso } from '../kernel/present.js';
import type { PortalService } from './portal.service.js';

export function createPortalHandlers(portal: PortalService): Pick<MerchantHandlers, 'createCustomerPortalSession'> {
  return {
    createCustomerPortalSession: async ({ auth, body }) => {
      const link = await portal.createForMerchant(auth.orgId, body);
      return {
        status: 201,
        body: { success: true, message: 'Customer portal session created', data: { id: link.id, customerId: link.customerId, url: link.url, expiresAt: iso(link.expiresAt), returnUrl: link.returnUrl } },
      };
    },
  };
}
