import type { MerchantHandlers } from '../handler-maps.js';
import { iso, isoOrNull, listPage } from '../kernel/present.js';
import type { EntitlementService } from './entitlement.service.js';
import type { Subscription } from '../commerce/model.js';
import { presentSubscription } from '../commerce/subscription.presenter.js';
import type { SubscriptionService } from './subscription.service.js';

export function createSubscriptionHandlers(
  subscriptions: SubscriptionService,
  entitlements: EntitlementService,
): Pick<MerchantHandlers, 'listSubscriptions' | 'getSubscription' | 'checkEntitlement'> {
  return {
    listSubscriptions: async ({ auth, query }) => {
      const pageNumber = query.page ?? 1;
      const size = query.size ?? 20;
      const result = await subscriptions.list(auth.orgId, { status: query.status, customerId: query.customer_id }, { page: pageNumber, size, startingAfter: query.starting_after, endingBefore: query.ending_before });
      return { status: 200, body: { success: true, message: 'OK', data: listPage(result, presentSubscription, pageNumber, size) } };
    },
    getSubscription: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: presentSubscription(await subscriptions.get(auth.orgId, params.id)) },
    }),
    checkEntitlement: async ({ auth, query }) => ({
      status: 200,
      body: {
        success: true,
        message: 'OK',
        data: await entitlements.check(auth.orgId, { customerId: query.customer_id, externalId: query.external_id, email: query.email, wallet: query.wallet, productId: query.product_id }),
      },
    }),
  };
}
