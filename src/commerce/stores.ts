/**
 * The commerce stores: the repositories a commerce flow works with, bound to one executor — the
 * database, or a transaction so a state change, the rows it touches and its webhook event commit
 * together. Declared here, implemented by each domain's repository, composed in src/services.ts.
 */
import type { TaxContext } from './tax.js';
import type { components } from '../../generated/merchant.js';
import type { UnitOfWork } from '../kernel/unit-of-work.js';
import type { Keyset, ListPage, ListWindow } from '../kernel/list.js';
import type {
  AmountKey,
  CheckoutSession,
  CryptoQuote,
  Customer,
  IdempotencyRecord,
  Order,
  OrderDispute,
  OrderFilter,
  OrderRefund,
  RefundStatus,
  OrderStatus,
  ProviderFailure,
  SessionStatus,
  Subscription,
  SubscriptionStatus,
} from './model.js';

/** The ids of a session's discount, as a conditional write compares them. */
export interface DiscountIds {
  couponId: string;
  promotionCodeId: string | null;
}

/** A webhook event queued with the state change that caused it (the transactional outbox). */
export interface CommerceEvent {
  orgId: string;
  type: components['schemas']['WebhookEventType'];
  data:
    | { order: components['schemas']['WebhookOrder'] }
    | { order: components['schemas']['WebhookOrder']; refund: components['schemas']['Refund'] }
    | { order: components['schemas']['WebhookOrder']; dispute: components['schemas']['Dispute'] }
    | { subscription: components['schemas']['WebhookSubscription'] }
    | { customer: { customerId: string; externalId: string | null }; balance: components['schemas']['MeterBalance'] }
    | components['schemas']['MeterThresholdWebhookEvent']['data'];
  /**
   * Not sent in the webhook: the subscription's cancellation state before this change, so the
   * buyer's "canceled" e-mail is owed by the change that scheduled it (issue 37 §29), not by a
   * timestamp (Stripe's canceled_at is in whole seconds).
   */
  previous?: {
    cancelAtPeriodEnd: boolean;
    /** A plan or seat change (issue 39): the price, seats and amount before it (the buyer's "plan changed" e-mail). */
    plan?: { priceId: string | null; productName: string; quantity: number; amountCents: number };
  };
}

/** What a checkout session shows of its order. */
export type SessionOrder = Pick<Order, 'id' | 'status'>;

export interface CheckoutSessionRepository {
  insert(session: CheckoutSession): Promise<void>;
  find(orgId: string, id: string): Promise<CheckoutSession | undefined>;
  /** The session with the id and status of its order (null before a payment made one), in one read. */
  findWithOrder(orgId: string, id: string): Promise<{ session: CheckoutSession; order: SessionOrder | null } | undefined>;
  /** Locks the session row for the rest of the transaction (payment results and expiry serialize on it). */
  findForUpdate(id: string): Promise<CheckoutSession | undefined>;
  findByPageToken(token: string): Promise<CheckoutSession | undefined>;
  /**
   * Writes the session's changeable columns (status, customer, lastError) only while its stored
   * status is still `expected`: false, with nothing written, when another writer moved it on.
   */
  update(session: CheckoutSession, expected: SessionStatus): Promise<boolean>;
  /** Moves an open session's `expiresAt` earlier to `expiresAt` (never later); false unless it is still CREATED. */
  bringExpiryForward(id: string, expiresAt: Date, now: Date): Promise<boolean>;
  /**
   * Sets or removes the session's discount (issue 39): its pricing snapshot and discounted amount,
   * only while it is CREATED and its amount still `expectedAmount` (what the caller read); false otherwise.
   */
  setDiscount(id: string, pricing: CheckoutSession['pricing'], amount: number, expectedAmount: number, now: Date): Promise<boolean>;
  /** Records a declined attempt on a session that is still CREATED; false when it no longer is. */
  recordAttemptFailure(id: string, failure: ProviderFailure, at: Date): Promise<boolean>;
  /** The buyer's tax location given on the hosted page: tax and amount, while CREATED and still at `expectedAmount`. */
  setTax(id: string, tax: TaxContext, amount: number, expectedAmount: number, at: Date): Promise<boolean>;
  /**
   * The tax the card processor chose from the buyer's address (Stripe's dynamic tax rates), with
   * the amount it makes: only while the session has no tax yet (the caller holds its lock).
   */
  setProcessorTax(id: string, tax: TaxContext, amount: number, at: Date): Promise<boolean>;
  /**
   * Kassa's location step on the Stripe rail (docs/tax.md): the processor session about to be
   * closed for a change of location loses its url (the page asks again, its `expired` event is
   * not the session's), only while CREATED and still that processor session; false otherwise.
   */
  markProcessorClosing(id: string, processorSessionId: string, at: Date): Promise<boolean>;
  /**
   * Kassa's location step: the location's tax and amount with the processor session opened for
   * it, in one write, only while CREATED and still on `previous` (null: none yet); the expiry
   * moves to `expiresAt` if later. Also only while the session's discount is still `discount` (the
   * ids of the one the caller read; null: none), so a promotion code changed meanwhile on the
   * step is never handed off with the old one. False, with nothing written, otherwise.
   */
  handOffWithLocation(id: string, previous: string | null, next: { tax: TaxContext; amount: number; processorSessionId: string; processorUrl: string; expiresAt: Date }, at: Date, discount?: DiscountIds | null): Promise<boolean>;
  /**
   * Kassa's location step: a promotion code typed (or removed) there — the pricing snapshot and the
   * amount, only while CREATED, at `expectedAmount`, on `processorSessionId` (null: none yet) and
   * with no processor session open for the buyer (`processor_url` null; the caller closed it).
   */
  setStepDiscount(id: string, pricing: CheckoutSession['pricing'], amount: number, expectedAmount: number, processorSessionId: string | null, at: Date): Promise<boolean>;
  /**
   * Moves up to `limit` open sessions whose expiry has passed to EXPIRED (rows locked, skipping
   * locked ones); returns their ids and, for each that drew the customer's balance when its payment
   * started, the order id the draw was reserved under (to give it back).
   */
  expireDue(now: Date, limit: number): Promise<Array<{ id: string; drawOrderId: string | null }>>;
  findIdempotencyRecord(orgId: string, key: string): Promise<IdempotencyRecord | undefined>;
  /**
   * Inserts the record unless the key exists with a record created at or after `expiredBefore`
   * (an older one is taken over); waits for a concurrent insert of the same key to settle.
   */
  insertIdempotencyRecord(record: IdempotencyRecord, expiredBefore: Date): Promise<boolean>;
  /**
   * The record and its session in one statement (atomic without an explicit transaction: one
   * round trip instead of four). False, with nothing written, when the key already exists and has
   * not expired; like insertIdempotencyRecord it takes over an expired key and waits for a
   * concurrent insert of the same key to settle.
   */
  insertWithIdempotencyRecord(record: IdempotencyRecord, session: CheckoutSession, expiredBefore: Date): Promise<boolean>;
}

export interface OrderRepository {
  insert(order: Order): Promise<void>;
  find(orgId: string, id: string): Promise<Order | undefined>;
  /** Locks the order row for the rest of the transaction (admin operations name orders by id alone). */
  findForUpdate(id: string): Promise<Order | undefined>;
  findBySession(checkoutSessionId: string): Promise<Order | undefined>;
  /** The order a processor's payment (Stripe PaymentIntent) paid. */
  findByProcessorPaymentId(processorPaymentId: string): Promise<Order | undefined>;
  /** Inserts a chain-paid order unless its (chain, txHash) is already on an order (then false, nothing written; waits for a concurrent insert). */
  insertUnlessTxRecorded(order: Order): Promise<boolean>;
  /** The order a chain transaction paid (at most one, by a unique index). */
  findByChainTx(chain: string, txHash: string): Promise<Order | undefined>;
  findSubscriptionPeriod(subscriptionId: string, billingPeriod: number): Promise<Order | undefined>;
  /** Writes the order only while its stored status is still `expected`; false, with nothing written, otherwise. */
  update(order: Order, expected: OrderStatus): Promise<boolean>;
  /** PAID, unrefunded one-time orders of catalog products, of these customers and/or this payer wallet. */
  listAccessGranting(orgId: string, subject: { customerIds?: string[]; fromAddress?: string }): Promise<Order[]>;
  /** The sort key of one of the organization's orders (a list cursor), if it is one. */
  keyset(orgId: string, id: string): Promise<Keyset | undefined>;
  list(orgId: string, filter: OrderFilter, window: ListWindow): Promise<ListPage<Order>>;
}

export interface RefundRepository {
  insert(refund: OrderRefund): Promise<void>;
  /** Writes status, failure reason and updatedAt only while the stored status is still `expected`. */
  update(refund: OrderRefund, expected: RefundStatus): Promise<boolean>;
  findByProcessorId(processorRefundId: string): Promise<OrderRefund | undefined>;
  /** The order's refunds, oldest first. */
  listForOrder(orgId: string, orderId: string): Promise<OrderRefund[]>;
  /** The refund request made with this Idempotency-Key since `notBefore`, if any. */
  findIdempotencyKey(orgId: string, key: string, notBefore: Date): Promise<RefundIdempotencyRecord | undefined>;
  /**
   * Claims the key (taking over a record older than `expiredBefore`); false when a live record
   * holds it (a concurrent request with the same key won).
   */
  claimIdempotencyKey(record: RefundIdempotencyRecord, expiredBefore: Date): Promise<boolean>;
}

/** A refund request's Idempotency-Key: which order and which parameters it was used for. */
export interface RefundIdempotencyRecord {
  orgId: string;
  key: string;
  requestHash: string;
  orderId: string;
  createdAt: Date;
}

export interface DisputeRepository {
  insert(dispute: OrderDispute): Promise<void>;
  /** Writes the changeable fields only while the stored status is still `expected`. */
  update(dispute: OrderDispute, expected: string): Promise<boolean>;
  findByProcessorId(processorDisputeId: string): Promise<OrderDispute | undefined>;
  /** The order's disputes, oldest first. */
  listForOrder(orgId: string, orderId: string): Promise<OrderDispute[]>;
}

export interface CustomerRepository {
  /** The organization's customer with this e-mail (any case), created when missing; race-safe. */
  findOrCreateByEmail(candidate: Customer): Promise<Customer>;
  find(orgId: string, id: string): Promise<Customer | undefined>;
  findByEmail(orgId: string, email: string): Promise<Customer | undefined>;
  findByExternalId(orgId: string, externalId: string): Promise<Customer | undefined>;
  /** The customers named by these ids and external ids (one read), for usage ingest. */
  findByRefs(orgId: string, refs: { ids: string[]; externalIds: string[] }): Promise<Customer[]>;
  /**
   * The same customers' ids and external ids only (usage ingest: a batch names up to 1,000, and
   * only these two columns are used; a whole row each cost a Date and an object per customer).
   */
  idsByRefs(orgId: string, refs: { ids: string[]; externalIds: string[] }): Promise<Array<{ id: string; externalId: string | null }>>;
  /**
   * Sets (or with null removes) the external id. False when another customer of the organization
   * holds it (nothing written).
   */
  setExternalId(orgId: string, id: string, externalId: string | null): Promise<boolean>;
  /**
   * Gives the customer this external id only when it has none and no other customer holds it
   * (the checkout's `customerExternalId`); never fails the caller's transaction.
   */
  attachExternalId(orgId: string, id: string, externalId: string): Promise<Customer | undefined>;
  /** Customers that have at least one order, newest first. */
  listWithOrders(orgId: string, filter: { email?: string; externalId?: string }, window: ListWindow): Promise<ListPage<Customer>>;
  keyset(orgId: string, id: string): Promise<Keyset | undefined>;
  findWithOrders(orgId: string, id: string): Promise<Customer | undefined>;
}

export interface SubscriptionRepository {
  insert(subscription: Subscription): Promise<void>;
  /** Writes the subscription only while its stored status is still `expected`; false, with nothing written, otherwise. */
  update(subscription: Subscription, expected: SubscriptionStatus): Promise<boolean>;
  find(orgId: string, id: string): Promise<Subscription | undefined>;
  findBySession(checkoutSessionId: string): Promise<Subscription | undefined>;
  findByManageToken(token: string): Promise<Subscription | undefined>;
  /** The subscription a processor's billing renews, by the processor's id (Stripe `sub_…`). */
  findByProcessorSubscription(processorSubscriptionId: string): Promise<Subscription | undefined>;
  /** Locks a subscription for an admin or buyer change (waits for a running renewal). */
  lock(id: string): Promise<Subscription | undefined>;
  /**
   * Locks a subscription for closing its usage period: undefined at once when another worker's
   * close or renewal holds it (SKIP LOCKED on NO KEY UPDATE, which ingest's KEY SHARE does not
   * conflict with), else the row FOR UPDATE, waiting for ingest's short KEY SHARE holds.
   */
  lockForClose(id: string): Promise<Subscription | undefined>;
  /** Ids of ACTIVE subscriptions with work due, oldest first (never those a processor's billing renews). */
  listDue(now: Date, limit: number): Promise<string[]>;
  /** A subscription by id alone, unlocked (the renewal job's read before its lock). */
  findById(id: string): Promise<Subscription | undefined>;
  /** Ids of ACTIVE trials ending in (now, until] still owed `subscription.trial_will_end`, soonest first. */
  listTrialsEnding(now: Date, until: Date, limit: number): Promise<string[]>;
  /**
   * Claims a trial's `subscription.trial_will_end` (conditional write on `trial_will_end_sent_at IS
   * NULL`, ACTIVE, not cancelling, ending in (now, until]): the subscription when this call claimed it.
   */
  claimTrialWillEnd(id: string, now: Date, until: Date): Promise<Subscription | undefined>;
  /** Locks one due subscription, skipping it when another scheduler holds it. */
  lockIfDue(id: string, now: Date): Promise<Subscription | undefined>;
  /**
   * Marks period `period` of a subscription locked by the caller as closed for usage (migration
   * 0285): from its commit on, ingest refuses the period's events (PERIOD_CLOSED).
   */
  closeUsagePeriod(id: string, period: number): Promise<void>;
  /** The last period closed for usage (closeUsagePeriod), null when none: a plan change must not split a period already billed. */
  usageClosedPeriod(id: string): Promise<number | null>;
  list(orgId: string, filter: { status?: SubscriptionStatus; customerId?: string }, window: ListWindow): Promise<ListPage<Subscription>>;
  keyset(orgId: string, id: string): Promise<Keyset | undefined>;
  /** ACTIVE subscriptions to catalog products of these customers. */
  listActiveForCustomers(orgId: string, customerIds: string[]): Promise<Subscription[]>;
}

/** The quote half of the crypto rail's storage: what a checkout transaction writes with its session. */
/**
 * A plan change paid in the processor but not yet applied there (issue 39, docs/plan-changes.md
 * "Paid, not yet applied"): Stripe collected the invoice of a change Kassa prorated itself, then
 * its subscription item update failed. Written with the change's PAID order; applied (and
 * removed) under the subscription's row lock by the caller's retry, the invoice's `invoice.paid`
 * or the retry job, always with the same processor idempotency key.
 */
export interface PendingPlanChange {
  subscriptionId: string;
  orgId: string;
  processorSubscriptionId: string;
  /** The change's processor idempotency key (the item update is retried with it). */
  idempotencyKey: string;
  /** What the processor's item is set to (the processor's change, as JSON; its dates as ISO strings). */
  processorChange: Record<string, unknown>;
  /** The change's quote (PlanChangeQuote as JSON; its dates as ISO strings): the plan applied and the caller's answer. */
  quote: Record<string, unknown>;
  /** The request that made it (a retry of the same request answers it; another change is 409). */
  request: { priceId: string | null; quantity: number | null; prorationDate: string };
  processorInvoiceId: string;
  orderId: string | null;
  attempts: number;
  retryAt: Date | null;
  /** When the item update was made (null: still pending). */
  appliedAt: Date | null;
  createdAt: Date;
}

export interface PendingPlanChangeRepository {
  /** Records it (replacing the subscription's change applied before, if any). */
  insert(change: PendingPlanChange): Promise<void>;
  find(subscriptionId: string): Promise<PendingPlanChange | undefined>;
  /** Marks it applied (no more attempts); false when it was not pending. */
  markApplied(subscriptionId: string, at: Date): Promise<boolean>;
  /** Removes it (a change that can no longer be made). */
  remove(subscriptionId: string): Promise<boolean>;
  /** Due rows (`retry_at` ≤ now), `FOR UPDATE SKIP LOCKED`, moved to `leaseUntil` with one more attempt counted. */
  lease(now: Date, leaseUntil: Date, limit: number): Promise<PendingPlanChange[]>;
  /** The next attempt's time after a failed one. */
  retryAt(subscriptionId: string, at: Date): Promise<void>;
}

/**
 * A part of a metered subscription's period billed on a price it left (migration 0450,
 * src/commerce/metered-plan-change.ts): usage in [start, end) is priced by `priceId`'s metered
 * components at the renewal that closes the period.
 */
export interface UsageSegment {
  subscriptionId: string;
  orgId: string;
  periodNumber: number;
  /** 1, 2, … in the order of the period's changes. */
  seq: number;
  priceId: string | null;
  productName: string;
  start: Date;
  end: Date;
  createdAt: Date;
}

export interface UsageSegmentRepository {
  /** A period's segments, in order (none: the whole period is on the current price). */
  list(subscriptionId: string, periodNumber: number): Promise<UsageSegment[]>;
  /** Records one; the caller holds the subscription's row lock (a second insert of the same seq fails). */
  insert(segment: UsageSegment): Promise<void>;
}

export interface CryptoQuoteRepository {
  insertQuote(quote: CryptoQuote): Promise<void>;
  findQuote(checkoutSessionId: string): Promise<CryptoQuote | undefined>;
  /** Amounts in [from, to) on this (chain, token, recipient) reserved beyond `now`. */
  reservedAmounts(key: AmountKey, from: number, to: number, now: Date): Promise<Set<number>>;
  /** Takes the amount unless a live reservation holds it (an expired one is taken over). */
  reserveAmount(key: AmountKey, amountUnits: number, checkoutSessionId: string, reservedUntil: Date, now: Date): Promise<boolean>;
  /** Sets the reserved exact amount of a quote not issued yet; false when it already was. */
  markQuoteIssued(checkoutSessionId: string, amountUnits: number, issuedAt: Date, reservedUntil: Date): Promise<boolean>;
  /**
   * Serializes, until the transaction ends, the issuers of payment-link sessions on this
   * (chain, token, recipient), so their count of held amounts cannot be raced past the limit.
   */
  lockLinkHolds(key: AmountKey): Promise<void>;
  /** Live reservations in [from, to) held by sessions opened from a payment link, and when the first one ends. */
  linkHolds(key: AmountKey, from: number, to: number, now: Date): Promise<{ count: number; firstEndsAt: Date | null }>;
}

/** One (customer, meter) credit balance: the prepaid units not yet drawn, and since when the customer has held credits of the meter. */
export interface CreditBalance {
  meterId: string;
  units: number;
  since: Date;
}

/** A metered component as the balances read it (metered-billing.ts MeteredComponent has more). */
export interface BasisComponent {
  meterId: string;
  includedUnits: number;
}

/** What a customer's meter balances are computed from, besides the quantities (CreditLedger.balanceBasis). */
export interface MeterBalanceBasis {
  customer: { id: string; externalId: string | null } | undefined;
  credits: CreditBalance[];
  /** ACTIVE subscriptions (with a product) whose current price has metered components, by period start then id. */
  subscriptions: Array<{
    id: string;
    currentPeriodStart: Date;
    currentPeriodEnd: Date;
    /** The price's metered components (metered-billing.ts MeteredComponent, of which the balances read these two fields). */
    components: BasisComponent[];
    /** The current period's parts before a metered plan change (migration 0450), in order; a segment without a price has no components. */
    segments: Array<{ start: Date; end: Date; components: BasisComponent[] }>;
  }>;
  /** Meter id → name, for the meters the subscriptions' components and the credits name. */
  meterNames: Map<string, string>;
}

/**
 * The prepaid-credit ledger (issue 38, migration 0310): every change is a ledger entry written
 * once (unique per order and kind, per subscription period and meter) with the balance row it
 * moves, under that row's lock, in the caller's transaction.
 */
/**
 * Redemptions of coupons and promotion codes (issue 39), as the checkout's expiry and payment see
 * them, in the caller's transaction under the session's row lock (src/discounts/redemption-ledger.repository.ts).
 */
export interface RedemptionLedger {
  /**
   * Gives back the redemptions claimed by these sessions that have no order other than FAILED:
   * marks each released and lowers its coupon's and code's `times_redeemed`, once (a released one
   * is never released again). Returns how many were given back.
   */
  releaseUnpaid(checkoutSessionIds: readonly string[], now: Date): Promise<number>;
  /**
   * A late payment of a session whose redemption was given back takes it back, within the limits
   * (`refused` when the freed redemption was taken by another buyer meanwhile: nothing written).
   */
  takeBack(checkoutSessionId: string, now: Date): Promise<'held' | 'taken_back' | 'refused' | 'none'>;
}

export interface CreditLedger {
  /** Grants a paid credit pack's units; false, nothing written, when this order already granted. */
  grant(entry: { orgId: string; customerId: string; meterId: string; units: number; orderId: string; at: Date }): Promise<boolean>;
  /**
   * Revokes what is left of the order's grant: min(granted units, balance). Returns the units
   * revoked; null when the order granted nothing or was revoked before.
   */
  revokeOrderGrant(orderId: string, at: Date): Promise<number | null>;
  /**
   * Draws up to `wanted` units for a subscription's closed period (min(balance, wanted)); a
   * period and meter already drawn returns that draw again, drawing nothing more.
   */
  draw(entry: { orgId: string; customerId: string; meterId: string; subscriptionId: string; period: number; wanted: number; at: Date }): Promise<number>;
  /** Which of these customers hold a credit balance row (of any meter). */
  customersWithCredits(orgId: string, customerIds: readonly string[]): Promise<string[]>;
  /** The customer's balances (every meter with a balance row), by meter id. */
  balances(orgId: string, customerId: string): Promise<CreditBalance[]>;
  /**
   * Everything a customer's meter balances read besides the quantities, in one statement
   * (src/commerce/meter-balances.ts): the customer named by `customerRef` (its CUS_… id first,
   * else its externalId), its credit balances, its ACTIVE subscriptions whose price has metered
   * components (the earliest period first) with the current period's usage segments, and the
   * names of the meters those name. `customer` undefined: no such customer (nothing else read).
   */
  balanceBasis(orgId: string, customerRef: string): Promise<MeterBalanceBasis>;
  /**
   * Claims a balance webhook of (customer, meter, period key, kind): true for the one caller whose
   * insert stored it (exactly once under concurrency), false when it was sent before.
   */
  claimAlert(alert: { orgId: string; customerId: string; meterId: string; periodKey: string; kind: string; at: Date }): Promise<boolean>;
  /**
   * The alerts already claimed among these (customer, meter, period key) triples, every kind, as
   * `customerId|meterId|periodKey|kind` (one read, to skip what is sent without reading usage).
   */
  claimedAlerts(orgId: string, keys: ReadonlyArray<{ customerId: string; meterId: string; periodKey: string }>): Promise<Set<string>>;
}

/**
 * The customer's credit balance (issue 39, migration 0445): one amount per customer and currency,
 * as Stripe's customer balance. Every change locks the balance row in the caller's transaction
 * (a downgrade adding to it and a renewal drawing it serialize there) and writes one ledger entry.
 */
/** One change of a customer's credit balance (the ledger). */
export interface CustomerBalanceEntry {
  id: string;
  orgId: string;
  customerId: string;
  currency: string;
  kind: 'CARRIED' | 'APPLIED' | 'RESTORED' | 'ADJUSTMENT';
  amountCents: number;
  endingBalanceCents: number;
  description: string | null;
  orderId: string | null;
  subscriptionId: string | null;
  createdAt: Date;
  /** An adjustment's Idempotency-Key and the hash of its request; null for the other kinds. */
  idempotencyKey: string | null;
  requestHash: string | null;
}

export interface CustomerBalanceLedger {
  /** Adds a downgrade's credit (`amount` > 0) carried by `orderId`; returns the balance after. */
  carry(entry: { orgId: string; customerId: string; currency: string; amount: number; orderId: string; subscriptionId: string; at: Date }): Promise<number>;
  /** Draws up to `wanted` for `orderId` (min(balance, wanted)); returns what was drawn (0 without a balance). */
  apply(entry: { orgId: string; customerId: string; currency: string; wanted: number; orderId: string; subscriptionId: string | null; at: Date }): Promise<number>;
  /** Gives back what `orderId` drew (an order never paid), once; returns the amount given back. */
  restore(orderId: string, at: Date): Promise<number>;
  /** The customer's balance in a currency (0 when none). */
  balance(orgId: string, customerId: string, currency: string): Promise<number>;
  /** Every currency the customer has a balance row in, by currency. */
  balancesOf(orgId: string, customerId: string): Promise<Array<{ currency: string; amountCents: number; updatedAt: Date }>>;
  /** The ledger newest first; undefined when `startingAfter` is not one of this customer's entries. */
  entries(orgId: string, customerId: string, page: { currency?: string; limit: number; startingAfter?: string }): Promise<{ items: CustomerBalanceEntry[]; hasMore: boolean } | undefined>;
  /** The adjustment made under an Idempotency-Key of the organization, if any. */
  findByIdempotencyKey(orgId: string, key: string): Promise<CustomerBalanceEntry | undefined>;
  /** The balance (0 when none) with its row, if any, locked for the rest of the transaction (a draw that follows takes no more than this). */
  lockedBalance(k: { orgId: string; customerId: string; currency: string }): Promise<number>;
  /** The balance (0 when none) with its row created if missing and locked for the rest of the transaction. */
  lockForChange(k: { orgId: string; customerId: string; currency: string }, at: Date): Promise<number>;
  /**
   * Writes a merchant adjustment of a balance locked by `lockForChange` (`balanceBefore` as read
   * under that lock) and moves the balance; undefined when another adjustment holds the key.
   */
  recordAdjustment(a: { orgId: string; customerId: string; currency: string; amount: number; balanceBefore: number; description: string; idempotencyKey: string; requestHash: string; at: Date }): Promise<CustomerBalanceEntry | undefined>;
}

/**
 * One move of a processor customer's balance that an invoice reported (Stripe: `ending_balance −
 * starting_balance` in Stripe's sign, where a credit is below 0): > 0 the invoice drew credit, < 0 it
 * added credit (an invoice whose total is below 0).
 */
export interface ProcessorBalanceMove {
  orgId: string;
  customerId: string;
  processorCustomerId: string;
  currency: string;
  move: number;
  orderId: string;
  subscriptionId: string;
  processorInvoiceId: string | null;
  at: Date;
}

/**
 * Kassa's mirror of processor customer balances (issue 39, migration 0441): the processor's balance
 * is authoritative; each move it reported on an invoice Kassa wrote an order for is recorded once
 * per order, under the balance row's lock, so the mirror is minus the processor's balance.
 */
export interface ProcessorBalanceMirror {
  /** Records a move for `orderId` (once); returns the credit after it. */
  record(move: ProcessorBalanceMove): Promise<number>;
  /** The credit of a processor customer in a currency (0 when none). */
  balance(orgId: string, processorCustomerId: string, currency: string): Promise<number>;
  /** The credit of the processor customer a subscription's invoices moved (undefined: none recorded yet). */
  balanceOfSubscription(orgId: string, subscriptionId: string, currency: string): Promise<number | undefined>;
}

export interface CommerceStores {
  sessions: CheckoutSessionRepository;
  orders: OrderRepository;
  customers: CustomerRepository;
  subscriptions: SubscriptionRepository;
  refunds: RefundRepository;
  disputes: DisputeRepository;
  /** A crypto session's quote is stored and issued with the session. */
  quotes: CryptoQuoteRepository;
  /** Prepaid credits of meters (credit packs), granted by payments and drawn by period closes. */
  credits: CreditLedger;
  /** Coupon and promotion-code redemptions given back at expiry, taken back by a late payment. */
  redemptions: RedemptionLedger;
  /** Plan changes paid in the processor whose item update is still to be made (issue 39). */
  planChanges: PendingPlanChangeRepository;
  /** The customers' credit balances (immediate downgrades' credit, drawn by renewals; issue 39). */
  balances: CustomerBalanceLedger;
  /** Kassa's mirror of processor (Stripe) customer balances, moved by the invoices it records (issue 39). */
  processorBalances: ProcessorBalanceMirror;
  /** Parts of a metered subscription's period billed on a price it left by a plan change (issue 39). */
  usageSegments: UsageSegmentRepository;
  /** Queues a webhook event; only inside `transaction`, so it commits with the change. */
  emit(event: CommerceEvent, now: Date): Promise<string>;
  /**
   * A refund was recorded on the order (`refundCents` of it, `order` as it is after): queues the
   * buyer's "refund issued" e-mail in this transaction when buyer e-mails are on (SMTP_URL), else
   * nothing. Called wherever a refund is recorded (orders/order.service.ts refund,
   * commerce/payment-flow.ts applyRefundedTotal); an `order.refunded` webhook belongs next to it.
   */
  notifyBuyerOfRefund(order: Order, refundCents: number, now: Date): Promise<void>;
}

export type CommerceUnitOfWork = UnitOfWork<CommerceStores>;

/**
 * State changes are conditional writes (`… WHERE status = <the status they assume>`). Under the
 * row's lock the condition always holds; a write that matched nothing means a path changed the
 * row without taking its lock, and the transaction is rolled back rather than lose an update.
 */
export function assertWritten(written: boolean, what: string): void {
  if (!written) throw new Error(`lost update refused: the ${what} was changed by a concurrent writer`);
}
