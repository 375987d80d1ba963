/**
 * The commerce model: what checkout, orders, subscriptions and every payment processor share.
 * Plain data, owned by no repository; the stores that persist it are declared in ./stores.ts.
 */
import type { BillingInterval } from './billing-period.js';
import type { PricedLine, UsagePricing } from './pricing.js';
import type { AppliedDiscount } from './discounts.js';
import type { TaxContext } from './tax.js';

// ---- checkout sessions ----

export type SessionStatus = 'CREATED' | 'COMPLETE' | 'EXPIRED' | 'FAILED';

/** What the session quotes, frozen at creation (later catalog edits never change it). */
export interface PricingSnapshot {
  amount: number;
  billingInterval: 'DAY' | 'MONTH' | 'YEAR' | null;
  billingIntervalCount: number;
  currency: string;
  flexibleAmount: boolean;
  maxAmount: number | null;
  minAmount: number | null;
  pricingId: string | null;
  pricingName: string;
  pricingType: 'ONE_TIME' | 'SUBSCRIPTION';
  /** Free trial days of this checkout (issue 39); absent without a trial (and on sessions of earlier releases). */
  trialDays?: number;
  /** With a trial: whether the checkout takes a card (ALWAYS) or lets the buyer start without one. */
  trialPaymentMethodCollection?: TrialPaymentMethodCollection;
  /** The coupon (and promotion code) this checkout applies (issue 39, src/commerce/discounts.ts); absent without one. */
  discount?: AppliedDiscount;
  /** Set when the hosted page's payment starts: the discount can no longer change (the amount being charged is fixed). */
  paymentStarted?: boolean;
  /**
   * The customer's credit balance drawn for this checkout when its payment started (issue 39,
   * docs/plan-changes.md "A new checkout draws it"): the order id reserved for the session (its
   * `APPLIED` ledger entry names it; the order gets that id) and the amount drawn. Absent when
   * nothing was drawn. Not the API's.
   */
  balance?: { orderId: string; amountCents: number };
  /** A credit pack's grant (issue 38): units of a meter per unit bought, granted when the order is paid. */
  grantsUnits?: { meterId: string; units: number };
  /**
   * The price's metered components when the session was created (issue 38), for the hosted page to
   * state the usage charges before the buyer pays; absent without any (and on earlier sessions).
   * Not the API's (the price's `meteredComponents` are).
   */
  usage?: UsageTerm[];
}

/** One metered component of a subscription price as a checkout states it: the meter's name, included units, pricing. */
export interface UsageTerm {
  meterId: string;
  meterName: string;
  includedUnits: number;
  pricing: UsagePricing;
}

export type TrialPaymentMethodCollection = 'ALWAYS' | 'IF_REQUIRED';

export interface ProductSnapshot {
  description: string;
  name: string;
  productId: string | null;
}

export interface ProviderFailure {
  code: string;
  occurredAt: string;
  operation: string;
  requestId: string;
}

export interface CheckoutSession {
  id: string;
  orgId: string;
  status: SessionStatus;
  provider: Rail;
  amount: number;
  currency: string;
  quantity: number;
  pricing: PricingSnapshot;
  product: ProductSnapshot;
  customerId: string | null;
  customerEmail: string | null;
  /** The merchant named the customer (`customerId`) at creation: the paid page may open their whole portal (issue 37 §2). */
  customerNamed: boolean;
  /** The checkout's `customerExternalId` when no customer held it yet: given to the customer the payment finds or creates. */
  customerExternalId?: string | null;
  merchantReference: string | null;
  metadata: Record<string, string> | null;
  successUrl: string | null;
  cancelUrl: string | null;
  paymentLinkId: string | null;
  pageToken: string;
  lastError: ProviderFailure | null;
  /** The card processor's own checkout (Stripe Checkout Session id) and its page; null on the sandbox and crypto. */
  processorSessionId: string | null;
  processorUrl: string | null;
  /**
   * The Stripe connected account this session's payment is transferred to (a destination charge),
   * fixed when the session is opened: refunds reverse that transfer even after the binding changed.
   * Null: the platform's own account (and on the sandbox and crypto).
   */
  processorAccountId: string | null;
  /** The buyer's tax location and the rates that apply there (issue 39); null: no tax known. The amount includes its exclusive tax. */
  tax?: TaxContext | null;
  /**
   * The buyer gives the location on Kassa's hosted page before the processor's page opens
   * (Stripe rail, created without `customerTax` for an organization with tax rates; docs/tax.md).
   * Such a session has no processor session until that step; `processorUrl` null with a
   * `processorSessionId` means Kassa closed that one for a change of location.
   */
  locationStep?: boolean;
  expiresAt: Date;
  createdAt: Date;
  updatedAt: Date;
}

export interface IdempotencyRecord {
  orgId: string;
  key: string;
  requestHash: string;
  checkoutSessionId: string;
  createdAt: Date;
}

// ---- orders and customers ----

export type OrderStatus = 'PENDING' | 'PAID' | 'FAILED' | 'REFUNDED' | 'UNDERPAID';

export type Rail = 'STRIPE' | 'CRYPTO';

/**
 * One line of an order, as commerce/pricing.ts priced it (the only place amounts are computed):
 * the order's `amountCents` is the sum of its lines' `amount`. Stored in order_lines (migration 0240).
 */
export type OrderLine = PricedLine;

export interface Order {
  id: string;
  orgId: string;
  status: OrderStatus;
  provider: Rail;
  amountCents: number;
  amountRefundedCents: number;
  currency: string;
  customerId: string;
  customerEmail: string;
  productId: string | null;
  productName: string | null;
  paymentLinkId: string | null;
  checkoutSessionId: string | null;
  subscriptionId: string | null;
  originalOrderId: string | null;
  merchantReference: string | null;
  merchantMetadata: Record<string, string> | null;
  note: string | null;
  disputed: boolean;
  settledAvailableOn: Date | null;
  chain: string | null;
  fromAddress: string | null;
  txHash: string | null;
  /** Crypto orders: token units the transfer carried (differs from amountCents on under/overpayment). */
  amountReceivedCents?: number | null;
  /**
   * The card processor's payment: the Stripe PaymentIntent (`pi_…`; an invoice `in_…` Stripe
   * settled without one), or the sandbox's (`sbx_pay_…`). The id of x402 settlements on CRYPTO.
   */
  processorPaymentId: string | null;
  /**
   * That payment's status as the processor reported it when Kassa last applied a change of the
   * order's status (Stripe's PaymentIntent statuses; the sandbox uses the same words). Null on CRYPTO.
   */
  processorStatus: string | null;
  /** The processor's reusable payment method (saved for subscription renewals). */
  paymentMethod: string | null;
  /** Billing period a subscription order pays: 0 at checkout, then 1, 2, … */
  billingPeriod: number | null;
  /** What the order charges, line by line; `amountCents` is their sum. Written with the order, never changed. */
  lines: OrderLine[];
  createdAt: Date;
  updatedAt: Date;
}

/** Why a refund was made, in Stripe's words (passed to Stripe's `reason`). */
export type RefundReason = 'requested_by_customer' | 'duplicate' | 'fraudulent';

/**
 * A refund's state in Stripe's words (`requires_action` counts as `pending`): `pending` and
 * `succeeded` count in the order's `amountRefundedCents`; `failed` and `canceled` no longer do.
 */
export type RefundStatus = 'pending' | 'succeeded' | 'failed' | 'canceled';

/** One refund of an order: made through Kassa (`kassa`) or outside it, seen in the processor's events (`dashboard`: the Stripe Dashboard, Stripe itself). */
export interface OrderRefund {
  id: string;
  orgId: string;
  orderId: string;
  amountCents: number;
  currency: string;
  reason: RefundReason | null;
  status: RefundStatus;
  source: 'kassa' | 'dashboard';
  /** Stripe's refund (`re_…`); null on the sandbox and crypto. */
  processorRefundId: string | null;
  /** Stripe's `failure_reason` of a failed refund. */
  failureReason: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** Stripe's dispute statuses; those in DISPUTE_CLOSED are final. Kept as text: Stripe may add more. */
export type DisputeStatus = string;
export const DISPUTE_CLOSED: ReadonlySet<string> = new Set(['won', 'lost', 'warning_closed', 'prevented']);

/** One dispute (chargeback or inquiry) of an order's payment, as the processor last reported it. */
export interface OrderDispute {
  id: string;
  orgId: string;
  orderId: string;
  processorDisputeId: string;
  amountCents: number;
  currency: string;
  /** Stripe's reason (`fraudulent`, `product_not_received`, …). */
  reason: string;
  status: DisputeStatus;
  evidenceDueBy: Date | null;
  /** Set when closed: `won` (the merchant keeps the money: won, an inquiry closed, a prevented dispute) or `lost`. */
  outcome: 'won' | 'lost' | null;
  createdAt: Date;
  updatedAt: Date;
  closedAt: Date | null;
}

export interface OrderFilter {
  status?: OrderStatus;
  customerId?: string;
  subscriptionId?: string;
  merchantReference?: string;
  productId?: string;
  provider?: Rail;
  fromAddress?: string;
  /** A crypto order's transaction hash, compared in lower case. */
  txHash?: string;
  createdFrom?: Date;
  createdBefore?: Date;
}

export interface Customer {
  id: string;
  orgId: string;
  email: string;
  /** The merchant's own id of the customer, unique in the organization; null when none. */
  externalId: string | null;
  createdAt: Date;
}

// ---- subscriptions ----

export type SubscriptionStatus = 'ACTIVE' | 'CANCELED' | 'PAUSED' | 'EXPIRED' | 'ENDED';

export interface SubscriptionPaymentAction {
  invoiceId: string;
  url: string;
  requiredAt: Date;
}

/** The price, product and seats a subscription moves to at its period's end (issue 39). */
export interface ScheduledPlanChange {
  priceId: string | null;
  productId: string | null;
  productName: string;
  /** Unit amount × quantity. */
  amountCents: number;
  quantity: number;
  requestedAt: Date;
}

export interface Subscription {
  id: string;
  orgId: string;
  status: SubscriptionStatus;
  provider: 'STRIPE';
  customerId: string;
  customerEmail: string;
  productId: string | null;
  productName: string;
  priceId: string | null;
  /** What a period charges: the price's unit amount × `quantity`. */
  amountCents: number;
  /** Seats (issue 39): the recurring amount is unit × quantity; 1 when the subscription was sold singly. */
  quantity: number;
  /** A change that takes effect at the period's end (a downgrade, or a change asked for then); null when none. */
  scheduledChange?: ScheduledPlanChange | null;
  currency: string;
  billingInterval: BillingInterval;
  billingIntervalCount: number;
  currentPeriodStart: Date;
  currentPeriodEnd: Date;
  /** End of the free trial (period 0 ends then); null or absent when it started without one. */
  trialEnd?: Date | null;
  periodNumber: number;
  billingAnchor: Date;
  anchorPeriod: number;
  cancelAtPeriodEnd: boolean;
  canceledAt: Date | null;
  endedAt: Date | null;
  pausedAt: Date | null;
  nextActionAt: Date;
  failedAttempts: number;
  initialOrderId: string;
  latestOrderId: string;
  checkoutSessionId: string;
  paymentMethod: string;
  manageToken: string;
  /** The processor's own subscription (Stripe `sub_…`) when its billing renews it; null when Kassa's renewal job does. */
  processorSubscriptionId: string | null;
  /**
   * A renewal waiting for the buyer (Stripe's `invoice.payment_action_required`, e.g. 3-D Secure):
   * the invoice and the processor's hosted page where the buyer completes it; null otherwise.
   */
  paymentAction: SubscriptionPaymentAction | null;
  /**
   * The processor's prices (Stripe `price_…`) Kassa made for this subscription's plans, at checkout
   * and at each of its own plan changes, with the Kassa plan each stands for: how a change made in
   * the processor's dashboard is told from Kassa's own (processor-billing.ts `applyProcessorItem`).
   */
  processorPrices?: Readonly<Record<string, ProcessorPlanRef>> | null;
  /** Set while the processor bills a price Kassa does not know (made in its dashboard); null otherwise. */
  processorMismatch?: ProcessorMismatch | null;
  createdAt: Date;
  updatedAt: Date;
}

/** The Kassa plan a processor's price stands for. */
export interface ProcessorPlanRef {
  priceId: string | null;
  productId: string | null;
  productName: string;
}

/** Why Kassa's plan is not the processor's: the processor's item, as last read. */
export interface ProcessorMismatch {
  reason: 'UNKNOWN_PROCESSOR_PRICE';
  processorPriceId: string;
  quantity: number;
  detectedAt: Date;
}

// ---- crypto quotes (the crypto rail's part of a session) ----

export interface CryptoQuote {
  checkoutSessionId: string;
  orgId: string;
  chainId: number;
  tokenSymbol: 'USDC' | 'USDT';
  tokenAddress: `0x${string}`;
  recipient: `0x${string}`;
  /** The session's amount (token units). */
  priceUnits: number;
  /** The exact amount to pay: price + a reserved offset; null until issued. */
  amountUnits: number | null;
  issuedAt: Date | null;
  reservedUntil: Date | null;
  createdAt: Date;
}

export interface AmountKey {
  chainId: number;
  tokenAddress: string;
  recipient: string;
}
