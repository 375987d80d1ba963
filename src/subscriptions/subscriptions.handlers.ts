import type { AdminHandlers, MerchantHandlers } from '../handler-maps.js';
import { iso, isoOrNull, page } from '../kernel/present.js';
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
      const { records, total } = await subscriptions.list(auth.orgId, { status: query.status, customerId: query.customer_id }, pageNumber, size);
      return { status: 200, body: { success: true, message: 'OK', data: page(records.map(presentSubscription), total, pageNumber, size) } };
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
        data: await entitlements.check(auth.orgId, { customerId: query.customer_id, email: query.email, wallet: query.wallet, productId: query.product_id }),
      },
    }),
  };
}

const presentAdmin = (s: Subscription) => ({
  subscriptionId: s.id,
  orgId: s.orgId,
  status: s.status,
  cancelAtPeriodEnd: s.cancelAtPeriodEnd,
  currentPeriodEnd: iso(s.currentPeriodEnd),
  canceledAt: isoOrNull(s.canceledAt),
  endedAt: isoOrNull(s.endedAt),
});

export function createSubscriptionAdminHandlers(
  subscriptions: SubscriptionService,
): Pick<AdminHandlers, 'cancelSubscription' | 'pauseSubscription' | 'resumeSubscription'> {
  return {
    cancelSubscription: async ({ params, body }) => {
      const atPeriodEnd = body?.atPeriodEnd ?? true;
      const s = await subscriptions.cancel(params.id, { atPeriodEnd });
      return { status: 200, body: { success: true, message: atPeriodEnd ? 'Subscription will end at the period end' : 'Subscription canceled', data: presentAdmin(s) } };
    },
    pauseSubscription: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Subscription paused', data: presentAdmin(await subscriptions.pause(params.id)) },
    }),
    resumeSubscription: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Subscription resumed', data: presentAdmin(await subscriptions.resume(params.id)) },
    }),
  };
}
