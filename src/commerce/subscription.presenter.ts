import { webhookCustomer } from './order.presenter.js';
import type { components } from '../../generated/merchant.js';
import { iso, isoOrNull } from '../kernel/present.js';
import type { Subscription } from './model.js';

/** The renewal waiting for the buyer, when one is (omitted otherwise, as the API documents). */
function paymentAction(s: Subscription): { paymentAction?: ApiSubscription['paymentAction'] } {
  if (!s.paymentAction) return {};
  return { paymentAction: { invoiceId: s.paymentAction.invoiceId, hostedInvoiceUrl: s.paymentAction.url, requiredAt: iso(s.paymentAction.requiredAt) } };
}

type ApiSubscription = components['schemas']['Subscription'];

/** Stripe billing a price Kassa does not know (issue 39), when it does (omitted otherwise). */
function mismatch(s: Subscription): { processorMismatch?: ApiSubscription['processorMismatch'] } {
  const m = s.processorMismatch;
  if (!m) return {};
  return { processorMismatch: { reason: m.reason, processorPriceId: m.processorPriceId, quantity: m.quantity, detectedAt: iso(m.detectedAt) } };
}

/** The price, seats and any change waiting for the period's end (issue 39). */
function plan(s: Subscription) {
  const c = s.scheduledChange ?? null;
  return {
    priceId: s.priceId,
    quantity: s.quantity,
    scheduledChange: c && { priceId: c.priceId, productId: c.productId, productName: c.productName, amountCents: c.amountCents, quantity: c.quantity, requestedAt: iso(c.requestedAt) },
  };
}
type WebhookSubscription = components['schemas']['WebhookSubscription'];

export function presentSubscription(s: Subscription): ApiSubscription {
  return {
    subscriptionId: s.id,
    id: s.id,
    status: s.status,
    amountCents: s.amountCents,
    ...plan(s),
    currency: s.currency,
    billingInterval: s.billingInterval,
    billingIntervalCount: s.billingIntervalCount,
    currentPeriodEnd: iso(s.currentPeriodEnd),
    trialEnd: isoOrNull(s.trialEnd ?? null),
    cancelAtPeriodEnd: s.cancelAtPeriodEnd,
    canceledAt: isoOrNull(s.canceledAt),
    endedAt: isoOrNull(s.endedAt),
    customerId: s.customerId,
    customerEmail: s.customerEmail,
    initialOrderId: s.initialOrderId,
    latestOrderId: s.latestOrderId,
    productId: s.productId,
    productName: s.productName,
    ...paymentAction(s),
    ...mismatch(s),
    createdAt: iso(s.createdAt),
    updatedAt: iso(s.updatedAt),
  };
}

export function presentWebhookSubscription(s: Subscription): WebhookSubscription {
  return {
    subscriptionId: s.id,
    orgId: s.orgId,
    status: s.status,
    provider: s.provider,
    // The processor's own subscription (Stripe `sub_…`) when its billing renews it.
    providerSubscriptionId: s.processorSubscriptionId,
    ...webhookCustomer(s.customerId),
    customerEmail: s.customerEmail,
    product: { id: s.productId, name: s.productName },
    billingInterval: s.billingInterval,
    amountCents: s.amountCents,
    currency: s.currency.toLowerCase(),
    currentPeriodEnd: iso(s.currentPeriodEnd),
    trialEnd: isoOrNull(s.trialEnd ?? null),
    ...plan(s),
    cancelAtPeriodEnd: s.cancelAtPeriodEnd,
    canceledAt: isoOrNull(s.canceledAt),
    endedAt: isoOrNull(s.endedAt),
    ...paymentAction(s),
    ...mismatch(s),
    createdAt: iso(s.createdAt),
    updatedAt: iso(s.updatedAt),
  };
}
