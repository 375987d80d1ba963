/**
 * The console's subscription changes (openapi/console.yaml, tag Subscriptions): the admin API's
 * cancel, pause and resume through the same SubscriptionService methods, scoped to the member's
 * organization (another organization's subscription is 404). Audited at composition.
 */
import type { ConsoleHandlers } from '../handler-maps.js';
import { customerUsageOf, type CustomerBalances } from './usage.presenter.js';
import { presentAdminSubscription } from './admin.handlers.js';
import type { SubscriptionService } from './subscription.service.js';

export function createSubscriptionConsoleHandlers(
  subscriptions: SubscriptionService,
  balances?: CustomerBalances,
): Pick<ConsoleHandlers, 'cancelConsoleSubscription' | 'pauseConsoleSubscription' | 'resumeConsoleSubscription' | 'getConsoleCustomerUsage'> {
  return {
    getConsoleCustomerUsage: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: await customerUsageOf(subscriptions, balances, auth.orgId, params.id) },
    }),
    cancelConsoleSubscription: async ({ auth, params, body }) => {
      const atPeriodEnd = body?.atPeriodEnd ?? true;
      const s = await subscriptions.cancel(params.id, { atPeriodEnd }, { orgId: auth.orgId });
      return { status: 200, body: { success: true, message: atPeriodEnd ? 'Subscription will end at the period end' : 'Subscription canceled', data: presentAdminSubscription(s) } };
    },
    pauseConsoleSubscription: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Subscription paused', data: presentAdminSubscription(await subscriptions.pause(params.id, { orgId: auth.orgId })) },
    }),
    resumeConsoleSubscription: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Subscription resumed', data: presentAdminSubscription(await subscriptions.resume(params.id, { orgId: auth.orgId })) },
    }),
  };
}

