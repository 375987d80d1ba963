import type { MerchantHandlers } from '../handler-maps.js';
import { iso, isoOrNull, listPage } from '../kernel/present.js';
import type { EntitlementService } from './entitlement.service.js';
import type { Subscription } from '../commerce/model.js';
import { presentSubscription } from '../commerce/subscription.presenter.js';
import type { SubscriptionService } from './subscription.service.js';
import { presentOrderLine } from '../commerce/order.presenter.js';
import type { PlanChangeQuote, PlanChangeRequest } from '../commerce/plan-change.js';
import type { components } from '../../generated/merchant.js';

/** A plan change's quote as the API shows it (SubscriptionChangePreview). */
export function presentChangePreview(q: PlanChangeQuote): components['schemas']['SubscriptionChangePreview'] {
  const side = (x: PlanChangeQuote['from']) => ({ priceId: x.priceId, productId: x.productId, productName: x.productName, unitAmountCents: x.unitAmount, quantity: x.quantity, amountCents: x.amount });
  return {
    subscriptionId: q.subscriptionId,
    effective: q.effective,
    prorationDate: iso(q.prorationDate),
    currentPeriodStart: iso(q.periodStart),
    currentPeriodEnd: iso(q.periodEnd),
    currency: q.currency,
    from: side(q.from),
    to: side(q.to),
    amountDueCents: q.amountDue,
    balanceCreditCents: q.balanceCredit ?? 0,
    appliedBalanceCents: q.appliedBalance ?? 0,
    lines: q.lines.map(presentOrderLine),
    nextRenewalAmountCents: q.nextRenewalAmount,
    usageBilledAtRenewal: Boolean(q.metered?.from || q.metered?.to),
  };
}

/** The API's change request as the service takes it. */
export function changeRequest(body: components['schemas']['SubscriptionChangeRequest']): PlanChangeRequest {
  return {
    ...(body.priceId !== undefined && { priceId: body.priceId }),
    ...(body.quantity !== undefined && { quantity: body.quantity }),
    ...(body.effective !== undefined && { effective: body.effective }),
    ...(body.prorationDate !== undefined && { prorationDate: new Date(body.prorationDate) }),
    ...(body.expectedAmountDueCents !== undefined && { expectedAmountDueCents: body.expectedAmountDueCents }),
    ...(body.expectedBalanceCreditCents !== undefined && { expectedBalanceCreditCents: body.expectedBalanceCreditCents }),
  };
}

export function createSubscriptionHandlers(
  subscriptions: SubscriptionService,
  entitlements: EntitlementService,
): Pick<MerchantHandlers, 'listSubscriptions' | 'getSubscription' | 'checkEntitlement' | 'previewSubscriptionChange' | 'changeSubscription'> {
  return {
    previewSubscriptionChange: async ({ auth, params, body }) => ({
      status: 200,
      body: { success: true, message: 'Change previewed', data: presentChangePreview(await subscriptions.previewChange(params.id, changeRequest(body), { orgId: auth.orgId })) },
    }),
    changeSubscription: async ({ auth, params, body }) => {
      const { subscription, order, quote, pending } = await subscriptions.changePlan(params.id, changeRequest(body), { orgId: auth.orgId });
      const data = { subscription: { ...presentSubscription(subscription), customerBalanceCents: await subscriptions.customerBalance(subscription) }, orderId: order?.id ?? null, preview: presentChangePreview(quote) };
      // Paid in Stripe, the item update still to be made (docs/plan-changes.md): 202, applied on its own.
      if (pending) return { status: 202, body: { success: true, message: 'Change paid; it is being applied in Stripe', data } };
      return { status: 200, body: { success: true, message: quote.mode === 'scheduled' ? 'Change scheduled for the period end' : 'Subscription changed', data } };
    },
    listSubscriptions: async ({ auth, query }) => {
      const pageNumber = query.page ?? 1;
      const size = query.size ?? 20;
      const result = await subscriptions.list(auth.orgId, { status: query.status, customerId: query.customer_id }, { page: pageNumber, size, startingAfter: query.starting_after, endingBefore: query.ending_before });
      return { status: 200, body: { success: true, message: 'OK', data: listPage(result, presentSubscription, pageNumber, size) } };
    },
    getSubscription: async ({ auth, params }) => {
      const subscription = await subscriptions.get(auth.orgId, params.id);
      return { status: 200, body: { success: true, message: 'OK', data: { ...presentSubscription(subscription), customerBalanceCents: await subscriptions.customerBalance(subscription) } } };
    },
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
