import type { AdminHandlers } from '../handler-maps.js';
import type { SubscriptionService } from './subscription.service.js';
import { notFound } from '../kernel/errors.js';
import type { MerchantNames } from '../pages/page.js';
import { customerUsageOf, type CustomerBalances } from './usage.presenter.js';
import type { Subscription } from '../commerce/model.js';
import { iso, isoOrNull } from '../kernel/present.js';

/** A subscription after a change, as the admin and console answers show it. */
export const presentAdminSubscription = (s: Subscription) => ({
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
  merchants: MerchantNames,
  balances?: CustomerBalances,
): Pick<AdminHandlers, 'cancelSubscription' | 'pauseSubscription' | 'resumeSubscription' | 'getOrgCustomerUsage'> {
  return {
    getOrgCustomerUsage: async ({ params }) => {
      // An unknown organization is told apart from an unknown customer.
      if ((await merchants.displayNameOf(params.id)) === undefined) throw notFound('Organization');
      return { status: 200, body: { success: true, message: 'OK', data: await customerUsageOf(subscriptions, balances, params.id, params.customerId) } };
    },
    cancelSubscription: async ({ params, body }) => {
      const atPeriodEnd = body?.atPeriodEnd ?? true;
      const s = await subscriptions.cancel(params.id, { atPeriodEnd });
      return { status: 200, body: { success: true, message: atPeriodEnd ? 'Subscription will end at the period end' : 'Subscription canceled', data: presentAdminSubscription(s) } };
    },
    pauseSubscription: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Subscription paused', data: presentAdminSubscription(await subscriptions.pause(params.id)) },
    }),
    resumeSubscription: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Subscription resumed', data: presentAdminSubscription(await subscriptions.resume(params.id)) },
    }),
  };
}
