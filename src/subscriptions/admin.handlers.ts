import type { AdminHandlers } from '../handler-maps.js';
import type { SubscriptionService } from './subscription.service.js';
import type { Subscription } from '../commerce/model.js';
import { iso, isoOrNull } from '../kernel/present.js';

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
