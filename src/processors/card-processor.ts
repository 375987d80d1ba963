/**
 * The card rail behind the hosted checkout page. A real processor plugs in here; the built-in
 * implementation is the sandbox processor (sandbox-processor.ts), whose test cards are documented
 * in openapi/merchant.yaml (createCheckoutSession).
 */
import type { CheckoutSession, RefundReason, RefundStatus } from '../commerce/model.js';
import type { ProcessorExtraInvoice, ProcessorSubscriptionState } from '../commerce/processor-billing.js';

export interface CardDetails {
  number: string;
  expMonth: number;
  expYear: number;
  cvc: string;
}

export interface ChargeRequest {
  orgId: string;
  checkoutSessionId: string;
  amount: number;
  currency: string;
  card: CardDetails;
}

export type ChargeResult =
  /** `paymentMethod`: a reusable token of the card, for subscription renewals. */
  | { status: 'succeeded'; paymentId: string; paymentMethod: string }
  /** Accepted; the result arrives later through OrderService.applyPaymentResult. */
  | { status: 'pending'; paymentId: string; paymentMethod: string }
  | { status: 'declined'; code: string; message: string; requestId: string }
  /** The session already has an accepted payment (a second click, a second tab). */
  | { status: 'already_accepted' };

export interface SavedMethodChargeRequest {
  orgId: string;
  paymentMethod: string;
  amount: number;
  currency: string;
  /** The same key never charges twice (one per subscription period and attempt). */
  idempotencyKey: string;
}

export type SavedMethodChargeResult =
  | { status: 'succeeded'; paymentId: string }
  | { status: 'declined'; code: string; message: string; requestId: string };

export interface CardProcessor {
  charge(request: ChargeRequest): Promise<ChargeResult>;
  /** Off-session charge of a saved payment method (subscription renewals). */
  chargeSavedMethod(request: SavedMethodChargeRequest): Promise<SavedMethodChargeResult>;
}

/**
 * A processor whose own page takes the card (Stripe Checkout): Kassa's checkout page sends the
 * buyer there, and the result comes back as the processor's events. Card data never reaches Kassa.
 */
export interface HostedCardCheckout {
  /**
   * Opens the processor's checkout for a new Kassa session (not yet stored). Retrying with the
   * same session is safe (an idempotency key derived from its ids). SERVICE_UNAVAILABLE when the
   * processor cannot be reached; FORBIDDEN for a purchase this deployment cannot sell there.
   * `expiresAt`: when the processor's checkout expires, never earlier than the session's own
   * (a processor may need a longer minimum); the session takes it, so both expire together.
   * `handOff`: a session given its location on Kassa's page (docs/tax.md) is opened once per
   * (previous processor session, location), so the same step submitted twice gets the same
   * processor session back, and each change of location a new one.
   */
  open(session: CheckoutSession, handOff?: string): Promise<{ processorSessionId: string; url: string; expiresAt: Date }>;
  /** Closes it so it can no longer be paid: `closed`, or `completed` when the buyer already paid. */
  close(processorSessionId: string): Promise<'closed' | 'completed'>;
}

/** Payment ids of Stripe PaymentIntents: orders paid through Stripe are refunded through Stripe. */
export const isStripePaymentId = (processorPaymentId: string | null): processorPaymentId is string => processorPaymentId?.startsWith('pi_') === true;

/**
 * Orders Stripe settled without a PaymentIntent (an invoice marked paid out of band or with
 * nothing to charge, named by the invoice `in_…`, or the subscription `sub_…` when Stripe named no
 * invoice): there is no card payment Kassa could refund.
 */
export const isStripeInvoiceSettlement = (processorPaymentId: string | null): boolean =>
  processorPaymentId?.startsWith('in_') === true || processorPaymentId?.startsWith('sub_') === true;

/** Refunds of card payments taken by a real processor (Stripe). */
export interface CardRefunds {
  /**
   * Refunds `amount` minor units of the payment. The same idempotency key never refunds twice.
   * SERVICE_UNAVAILABLE when the processor cannot be reached; CONFLICT when it refuses.
   */
  refund(input: {
    processorPaymentId: string;
    amount: number;
    idempotencyKey: string;
    /** The payment was transferred to a connected account (destination charge): take the refund back from it. */
    reverseTransfer?: boolean;
    /** Why (Stripe's `reason`). */
    reason?: RefundReason;
  }): Promise<{ refundId: string; status?: RefundStatus; failureReason?: string | null }>;
}

/** A change to a subscription that a processor's billing renews (Stripe Billing). */
/** `keep_renewing` undoes a scheduled `cancel_at_period_end` before the period ends. */
export type SubscriptionChange = 'cancel_at_period_end' | 'keep_renewing' | 'cancel_now' | 'pause' | 'resume';

/** Subscriptions renewed by a real processor's billing: changes are made there first. */
export interface ProcessorSubscriptionBilling {
  /**
   * Makes the change in the processor and returns the subscription as the processor now has it.
   * The same idempotency key never changes twice. SERVICE_UNAVAILABLE when the processor cannot be
   * reached; CONFLICT when it refuses.
   */
  change(processorSubscriptionId: string, change: SubscriptionChange, idempotencyKey: string): Promise<ProcessorSubscriptionState>;
  /**
   * A plan or seat change (issue 39) made in the processor (Stripe's subscription update of its
   * item): `invoice_now` prorates at `prorationDate` and charges the proration at once (Stripe's
   * `always_invoice`, refused with nothing changed when the card is declined: CONFLICT); `none`
   * changes the item without proration (the next renewal bills the new amount). Returns the
   * processor's state and, for `invoice_now`, the paid proration invoice. `explicit_items`: when
   * the item update fails after the invoice was paid, `state` is null and `invoice` is the paid
   * invoice (the change is paid, not yet applied: applyPlanItem makes it later).
   */
  changePlan?(processorSubscriptionId: string, change: ProcessorPlanChange, idempotencyKey: string): Promise<{ state: ProcessorSubscriptionState; invoice?: ProcessorExtraInvoice } | { state: null; invoice: ProcessorExtraInvoice }>;
  /**
   * The item update alone of an `explicit_items` change whose invoice is paid (issue 39, "paid,
   * not yet applied"), with the change's idempotency key: the same request as changePlan's own
   * update, so a retry after a lost answer is replayed. SERVICE_UNAVAILABLE / CONFLICT as above.
   */
  applyPlanItem?(processorSubscriptionId: string, change: ProcessorPlanChange, idempotencyKey: string): Promise<ProcessorSubscriptionState>;
}

/** What a plan or seat change sets on a processor's subscription item. */
export interface ProcessorPlanChange {
  /** Minor units per seat per period, and the seats. */
  unitAmount: number;
  quantity: number;
  currency: string;
  interval: 'DAY' | 'MONTH' | 'YEAR';
  intervalCount: number;
  /** Whether the price changes (else only the quantity does). */
  priceChanged: boolean;
  /** The new price's product: its name (the processor's invoice lines) and Kassa's id; `sameProduct` keeps the processor's product. */
  productName: string;
  productId: string | null;
  sameProduct: boolean;
  /**
   * `invoice_now`: the processor prorates and charges now (Stripe's `always_invoice`); `none`: no
   * proration; `explicit_items`: Kassa prorated the change itself — the item changes without
   * proration and `items` are invoiced and charged now, exactly (issue 39, amount-off coupons and
   * coupons ending inside the period).
   */
  proration: 'invoice_now' | 'none' | 'explicit_items';
  /** The proration's second (Stripe's `proration_date`): the preview's. */
  prorationDate: Date;
  /** For `explicit_items`: the invoice items (Kassa's amounts), the current period's end, and the total Kassa quoted (the invoice must come to it, else nothing is charged). */
  items?: readonly { description: string; amount: number }[];
  periodEnd?: Date;
  amountDue?: number;
}
