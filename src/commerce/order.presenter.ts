/** Domain Order → the merchant API's Order and the webhook's `data.order`. */
import type { components } from '../../generated/merchant.js';
import { toDisplayAmount } from '../kernel/money.js';
import { iso, isoOrNull } from '../kernel/present.js';
import type { Order, OrderDispute, OrderLine, OrderRefund, OrderStatus, Subscription } from './model.js';
import type { UsagePricing } from './pricing.js';

type ApiOrder = components['schemas']['Order'];
type WebhookOrder = components['schemas']['WebhookOrder'];

export const DISPLAY_STATUS: Record<OrderStatus, ApiOrder['displayStatus']> = {
  PENDING: 'Pending',
  PAID: 'Paid',
  FAILED: 'Failed',
  REFUNDED: 'Refunded',
  UNDERPAID: 'Underpaid',
};

/**
 * The card processor's payment and its status (Stripe's PaymentIntent, or the sandbox's); null on
 * CRYPTO, whose payment is the transfer (`txHash`): an x402 settlement id stays internal.
 */
export function providerPayment(order: Order): { providerPaymentId: string | null; providerStatus: string | null } {
  if (order.provider !== 'STRIPE') return { providerPaymentId: null, providerStatus: null };
  return { providerPaymentId: order.processorPaymentId, providerStatus: order.processorStatus };
}

type ApiOrderLine = components['schemas']['OrderLine'];

export const presentUsagePricing = (p: UsagePricing): components['schemas']['MeteredPricing'] => {
  switch (p.model) {
    case 'PER_UNIT':
      return { model: p.model, unitAmountDecimal: p.unitAmount };
    case 'PACKAGE':
      return { model: p.model, packageSize: p.packageSize, packageAmountDecimal: p.packageAmount };
    default:
      return {
        model: p.model,
        tiers: p.tiers.map((t) => ({ upTo: t.upTo, unitAmountDecimal: t.unitAmount, ...(t.flatAmount ? { flatAmountCents: t.flatAmount } : {}) })),
      };
  }
};

/** One order line as the API, webhooks, the console, receipts and e-mails show it. */
export function presentOrderLine(line: OrderLine): ApiOrderLine {
  const out: ApiOrderLine = {
    kind: line.kind,
    description: line.description,
    quantity: line.quantity,
    unitAmountDecimal: line.unitAmount,
    exactAmountDecimal: line.exactAmount,
    amountCents: line.amount,
  };
  if (line.productId) out.productId = line.productId;
  if (line.priceId) out.priceId = line.priceId;
  if (line.kind === 'USAGE' && line.meterId && line.pricing) {
    out.usage = {
      meterId: line.meterId,
      includedUnits: line.includedUnits ?? 0,
      creditedUnits: line.creditedUnits ?? 0,
      billableQuantity: line.billableQuantity ?? '0',
      pricing: presentUsagePricing(line.pricing),
      tiers: line.tiers
        ? line.tiers.map((t) => ({ tier: t.tier, upTo: t.upTo, quantity: t.quantity, unitAmountDecimal: t.unitAmount, flatAmountCents: t.flatAmount, amountDecimal: t.amount }))
        : null,
    };
  }
  if (line.kind === 'TAX' && line.tax) {
    const t = line.tax;
    out.tax = {
      rateId: t.rateId,
      displayName: t.displayName,
      percentage: t.percentage,
      inclusive: t.inclusive,
      country: t.country,
      region: t.region,
      taxableAmountCents: t.taxableAmount,
      taxAmountCents: t.taxAmount,
      reverseCharge: t.reverseCharge,
      taxId: t.taxId,
    };
  }
  return out;
}

export function presentOrder(order: Order, now: Date): ApiOrder {
  const out: ApiOrder = {
    orderId: order.id,
    id: order.id,
    orgId: order.orgId,
    status: order.status,
    displayStatus: DISPLAY_STATUS[order.status],
    amount: toDisplayAmount(order.amountCents, order.currency),
    amountCents: order.amountCents,
    lines: order.lines.map(presentOrderLine),
    amountRefunded: toDisplayAmount(order.amountRefundedCents, order.currency),
    amountRefundedCents: order.amountRefundedCents,
    currency: order.currency,
    refunded: order.status === 'REFUNDED',
    disputed: order.disputed,
    customerId: order.customerId,
    customerEmail: order.customerEmail,
    provider: order.provider,
    ...providerPayment(order),
    createdAt: iso(order.createdAt),
    updatedAt: iso(order.updatedAt),
  };
  // Card orders only: the settlement lifecycle of a paid card payment.
  if (order.provider === 'STRIPE' && order.settledAvailableOn) {
    out.fundsSettled = now.getTime() >= order.settledAvailableOn.getTime();
    out.settledAvailableOn = iso(order.settledAvailableOn);
  }
  if (order.chain) out.chain = order.chain;
  if (order.fromAddress) out.fromAddress = order.fromAddress;
  if (order.txHash) out.txHash = order.txHash;
  if (order.provider === 'CRYPTO' && order.amountReceivedCents != null) out.amountReceivedCents = order.amountReceivedCents;
  if (order.productId) out.productId = order.productId;
  if (order.productName) out.productName = order.productName;
  if (order.paymentLinkId) out.paymentLinkId = order.paymentLinkId;
  if (order.checkoutSessionId) out.checkoutSessionId = order.checkoutSessionId;
  if (order.subscriptionId) out.subscriptionId = order.subscriptionId;
  if (order.originalOrderId) out.originalOrderId = order.originalOrderId;
  if (order.merchantReference !== null) out.merchantReference = order.merchantReference;
  if (order.merchantMetadata) out.merchantMetadata = order.merchantMetadata;
  if (order.note !== null) out.note = order.note;
  return out;
}

/** What a webhook order payload needs beyond the order's own columns; callers pass what their flow already holds. */
export interface WebhookOrderContext {
  /** The receiving wallet of a crypto order (not an order column). */
  recipient?: string;
  /**
   * The subscription the order belongs to, when the caller has it: its processor's subscription
   * (Stripe `sub_…`) is the payload's `providerSubscriptionId`.
   */
  subscription?: Pick<Subscription, 'id' | 'processorSubscriptionId'>;
}

/**
 * Who the event is about, in every `order.*` and `subscription.*` payload (the README's step 6 and
 * docs/customer-portal.md promise it): the customer's id, and their `externalId`. The presenter
 * holds only the id; the outbox fills `customerExternalId` with the customer's current value in
 * the one statement that queues the event (src/webhooks/outbox.repository.ts), so no emitting
 * flow reads the customer again and no event costs a query more.
 */
export function webhookCustomer(customerId: string): { customerId: string; customerExternalId: string | null } {
  return { customerId, customerExternalId: null };
}

/**
 * `providerSubscriptionId`: the processor's subscription when its billing renews the order's
 * subscription (first order, renewals and out-of-cycle invoices alike); null for one-time orders
 * and for subscriptions Kassa renews itself. A subscription other than the order's is ignored.
 */
export function presentWebhookOrder(order: Order, context: WebhookOrderContext = {}): WebhookOrder {
  const { recipient, subscription } = context;
  const out: WebhookOrder = {
    orderId: order.id,
    orgId: order.orgId,
    ...webhookCustomer(order.customerId),
    merchantReference: order.merchantReference,
    merchantMetadata: order.merchantMetadata,
    status: order.status,
    provider: order.provider,
    amountCents: order.amountCents,
    amountRefundedCents: order.amountRefundedCents,
    currency: order.currency.toLowerCase(),
    lines: order.lines.map(presentOrderLine),
    paymentLinkId: order.paymentLinkId,
    originalOrderId: order.originalOrderId,
    providerSubscriptionId: subscription && order.subscriptionId === subscription.id ? subscription.processorSubscriptionId : null,
    ...providerPayment(order),
    createdAt: iso(order.createdAt),
    updatedAt: iso(order.updatedAt),
  };
  if (order.productName) out.product = { id: order.productId, name: order.productName };
  // CAIP-2 chain and CAIP-10 accounts (`eip155:8453`, `eip155:8453:0x…`).
  if (order.provider === 'CRYPTO' && order.chain && recipient !== undefined) {
    out.crypto = {
      chainId: order.chain,
      assetSymbol: order.currency as 'USDC' | 'USDT',
      txHash: order.txHash,
      payer: order.fromAddress ? `${order.chain}:${order.fromAddress}` : null,
      recipient: `${order.chain}:${recipient}`,
    };
  }
  return out;
}

export function presentRefund(r: OrderRefund): components['schemas']['Refund'] {
  return {
    refundId: r.id,
    orderId: r.orderId,
    amountCents: r.amountCents,
    currency: r.currency.toLowerCase(),
    reason: r.reason,
    status: r.status,
    source: r.source,
    providerRefundId: r.processorRefundId,
    failureReason: r.failureReason,
    createdAt: iso(r.createdAt),
    updatedAt: iso(r.updatedAt),
  };
}

export function presentDispute(d: OrderDispute): components['schemas']['Dispute'] {
  return {
    disputeId: d.id,
    orderId: d.orderId,
    providerDisputeId: d.processorDisputeId,
    amountCents: d.amountCents,
    currency: d.currency.toLowerCase(),
    reason: d.reason,
    status: d.status,
    evidenceDueBy: isoOrNull(d.evidenceDueBy),
    outcome: d.outcome,
    createdAt: iso(d.createdAt),
    updatedAt: iso(d.updatedAt),
    closedAt: isoOrNull(d.closedAt),
  };
}
