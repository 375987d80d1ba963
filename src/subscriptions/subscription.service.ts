/**
 * Subscriptions on the card rail: started by the first successful payment of a SUBSCRIPTION
 * checkout, renewed by the scheduler off the injectable clock, cancelled, paused and resumed by
 * the operator (admin API) or the buyer (manage page). State table: openapi/merchant.yaml.
 */
import { resolveWindow, type ListRequest } from '../kernel/list.js';
import type { Clock } from '../kernel/clock.js';
import { randomToken } from '../kernel/ids.js';
import { AppError, conflict, notFound } from '../kernel/errors.js';
import type { CardProcessor, ProcessorPlanChange, ProcessorSubscriptionBilling, SavedMethodChargeResult, SubscriptionChange } from '../processors/card-processor.js';
import { applyProcessorState, insertExtraInvoiceOrder, type ProcessorSubscriptionState } from '../commerce/processor-billing.js';
import { assertWritten, type CommerceStores, type CommerceUnitOfWork, type PendingPlanChange } from '../commerce/stores.js';
import type { Order, Subscription, SubscriptionStatus } from '../commerce/model.js';
import { presentWebhookOrder } from '../commerce/order.presenter.js';
import type { Logger } from '../kernel/logger.js';
import { periodEnd } from '../commerce/billing-period.js';
import { presentWebhookSubscription } from '../commerce/subscription.presenter.js';
import { changePricing, discountEndsBefore, renewalOrder } from '../commerce/renewal-order.js';
import { outcomeProcessorStatus } from '../commerce/payment-flow.js';
import { CARD_SETTLEMENT_DELAY_MS } from '../commerce/renewal-order.js';
import { USAGE_CLOSE_DELAY_MS, drawCredits, usageLineInputs, type MeteredBilling } from '../commerce/metered-billing.js';
import { amountLine, type LineInput } from '../commerce/pricing.js';
import type { ProcessorUsageFlow } from '../commerce/processor-usage.js';
import { estimateNextCharge, type UsageEstimate } from '../commerce/usage-estimate.js';
import { applyScheduled, changedSubscription, quotePlanChange, type PlanCatalog, type PlanChangeQuote, type PlanChangeRequest, type PlanChangeScope } from '../commerce/plan-change.js';
import { taxContextOfLines } from '../commerce/tax.js';
import { APPLIED_BALANCE_DESCRIPTION } from '../commerce/proration.js';
import { hasMeteredPart, nextUsageSegment, paidForPlan, partsWithin, periodUsageLineInputs, usageParts } from '../commerce/metered-plan-change.js';

const DAY_MS = 24 * 3600 * 1000;
/** Dunning: after a failed renewal at period end, retry 1, 3 and 5 days after the period end; then EXPIRED. */
export const DUNNING_RETRY_DAYS = [1, 3, 5] as const;
/** `subscription.trial_will_end` this many days before a trial ends (Stripe's timing for `customer.subscription.trial_will_end`). */
export const TRIAL_WILL_END_DAYS = 3;

/**
 * Whose subscription a change may touch: the portal's buyer (organization and customer) or a
 * console member (organization only). Any other subscription is 404. The operator passes none.
 */
export interface SubscriptionOwner {
  orgId: string;
  customerId?: string;
}

/** A metered subscription's closing usage, read before the lock (see processDue). */
interface ClosingUsage {
  /** Whether the locked subscription is still the one read (same period, same attempt). */
  fits(locked: Subscription): boolean;
  /** When the grace window closes, while it is open. */
  waitUntil: Date | null;
  lines: LineInput[];
}

/** A draft renewal order with its charge's outcome. A declined sandbox charge has no payment id; its status says why the order failed. */
function charged(draft: Order, charge: SavedMethodChargeResult, now: Date): Order {
  const paid = charge.status === 'succeeded';
  return {
    ...draft,
    status: paid ? 'PAID' : 'FAILED',
    processorPaymentId: paid ? charge.paymentId : null,
    processorStatus: outcomeProcessorStatus(paid ? 'succeeded' : 'failed'),
    settledAvailableOn: paid ? new Date(now.getTime() + CARD_SETTLEMENT_DELAY_MS) : null,
  };
}

export class SubscriptionService {
  constructor(
    private readonly uow: CommerceUnitOfWork,
    private readonly processor: CardProcessor,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Stripe Billing, when Stripe is the card processor: changes to the subscriptions it renews are made there first. */
    private readonly billing?: ProcessorSubscriptionBilling,
    /** Metered components and their usage (issue 38); without it every renewal charges its fee alone. */
    private readonly metered?: MeteredBilling,
    /** Stripe-billed metered subscriptions: a cancel-now's partial period invoiced on Stripe. */
    private readonly processorUsage?: ProcessorUsageFlow,
    /** The catalog's prices, for plan changes (issue 39); without it a change to another price is refused. */
    private readonly plans?: PlanCatalog,
  ) {}

  /**
   * Scheduler pass. Each due subscription is handled in its own transaction under a row lock taken
   * with SKIP LOCKED, and each period's order is unique per (subscription, period): two schedulers
   * never renew the same period twice.
   *
   * Metered subscriptions (src/commerce/metered-billing.ts): the closing period's usage is read
   * outside the order's transaction (it is the usage module's read, and PGlite has one
   * connection), and only once the grace window after the period's end has passed and the period
   * is marked closed for usage (closingUsage), when its quantities no longer change; under the
   * lock it is used only if the subscription is still in that period, and the
   * fee and the usage lines are written as one order in the same transaction as the charge's
   * result. A pass killed before its commit leaves nothing: the next pass reads the same usage and
   * writes the same order (the charge's idempotency key is the same too).
   */
  async processDue(limit = 100, concurrency = 1): Promise<number> {
    const now = this.clock.now();
    const ids = await this.uow.stores.subscriptions.listDue(now, limit);
    let handled = 0;
    let next = 0;
    // Subscriptions are independent (a transaction and a row lock each): on PostgreSQL a pass
    // closes a few at once, so its ~20 statements' round trips overlap.
    const lane = async () => {
      while (next < ids.length) {
        if (await this.processOne(ids[next++]!, now)) handled++;
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, ids.length)) }, lane));
    return handled;
  }

  private async processOne(id: string, now: Date): Promise<boolean> {
    try {
      const usage = await this.closingUsage(id, now);
      // Another pass renewed it meanwhile: nothing to do.
      if (usage === 'busy') return false;
      const done = await this.uow.transaction(async (stores) => {
        const subscription = await stores.subscriptions.lockIfDue(id, now);
        if (!subscription) return false;
        if (usage && !usage.fits(subscription)) return false;
        if (usage?.waitUntil) {
          // Not yet: the period's late usage events are accepted until then.
          assertWritten(await stores.subscriptions.update({ ...subscription, nextActionAt: usage.waitUntil, updatedAt: now }, subscription.status), 'subscription');
          return false;
        }
        const lines = usage?.lines ?? [];
        if (subscription.cancelAtPeriodEnd) await this.endAtPeriodEnd(stores, subscription, now, lines);
        else if (subscription.periodNumber === 0 && subscription.trialEnd && subscription.paymentMethod === 'none') await this.endTrialWithoutCard(stores, subscription, now);
        // A change scheduled for the period's end (a downgrade) is the plan the next period charges.
        else await this.attemptRenewal(stores, applyScheduled(subscription), now, lines);
        return true;
      });
      return done;
    } catch (err) {
      this.logger.error({ err, subscriptionId: id }, 'subscription renewal failed; it stays due');
      return false;
    }
  }

  /**
   * The closing period's usage lines of a metered subscription (undefined when it has no metered
   * component): `waitUntil` while the grace window is open; no lines read when the period's order
   * exists already (a dunning retry charges what that order holds).
   *
   * Before the read, the period is marked closed for usage in a transaction of its own, under the
   * subscription's row lock (FOR UPDATE, migration 0285): ingest stores a subscriber's events under
   * a FOR KEY SHARE lock of that row and refuses the events of a closed period, so every event of
   * the period is either committed before the mark (and counted by the read after it) or refused
   * with PERIOD_CLOSED. 'busy' when the subscription moved on meanwhile (another pass renewed it).
   */
  private async closingUsage(id: string, now: Date): Promise<ClosingUsage | 'busy' | undefined> {
    if (!this.metered) return undefined;
    const s = await this.uow.stores.subscriptions.findById(id);
    if (!s || s.priceId === null) return undefined;
    // The period's parts: a plan change during it may have moved the subscription between prices (metered-plan-change.ts).
    const parts = await this.periodParts(s, s.currentPeriodEnd);
    if (!hasMeteredPart(parts)) return undefined;
    const fits = (locked: Subscription) => locked.periodNumber === s.periodNumber && locked.currentPeriodEnd.getTime() === s.currentPeriodEnd.getTime() && locked.failedAttempts === s.failedAttempts;
    const closeAt = new Date(s.currentPeriodEnd.getTime() + USAGE_CLOSE_DELAY_MS);
    if (now < closeAt) return { fits, waitUntil: closeAt, lines: [] };
    if (await this.uow.stores.orders.findSubscriptionPeriod(s.id, s.periodNumber + 1)) return { fits, waitUntil: null, lines: [] };
    const marked = await this.uow.transaction(async (stores) => {
      // Another worker closing or renewing it: skipped at once (it is 'busy'), so worker processes
      // split the due set instead of queueing on the same oldest ids. Otherwise a waiting lock:
      // overlapping ingests hold the row KEY SHARE in turn and must not starve the close; each
      // holds it for one short statement.
      const locked = await stores.subscriptions.lockForClose(id);
      if (!locked || locked.status !== 'ACTIVE' || locked.nextActionAt > now || !fits(locked)) return false;
      await stores.subscriptions.closeUsagePeriod(id, locked.periodNumber);
      return true;
    });
    if (!marked) return 'busy';
    // The parts again, after the mark's commit: a plan change holding the row lock before it has committed its segment.
    return { fits, waitUntil: null, lines: await periodUsageLineInputs(this.metered, s, await this.periodParts(s, s.currentPeriodEnd)) };
  }

  /** The parts of a subscription's current period up to `end`, each with its price's metered components. */
  private async periodParts(s: Subscription, end: Date) {
    const segments = await this.uow.stores.usageSegments.list(s.id, s.periodNumber);
    // A change paid in Stripe whose item update still waits (202): the part after its segment is the plan paid for.
    const plan = s.processorSubscriptionId ? paidForPlan(s, await this.uow.stores.planChanges.find(s.id)) : s;
    return usageParts(this.metered!, plan, plan.priceId === null ? [] : await this.metered!.componentsOf(plan.orgId, plan.priceId), segments, end);
  }

  /** Ends the subscription at its period's end; a metered one's last period of usage is charged first, as an order of its own. */
  private async endAtPeriodEnd(stores: CommerceStores, s: Subscription, now: Date, usage: readonly LineInput[]): Promise<void> {
    if (usage.length > 0) await this.chargeFinalUsage(stores, s, now, usage);
    const ended: Subscription = { ...s, status: 'ENDED', endedAt: s.currentPeriodEnd, updatedAt: now };
    assertWritten(await stores.subscriptions.update(ended, s.status), 'subscription');
    await stores.emit({ orgId: s.orgId, type: 'subscription.ended', data: { subscription: presentWebhookSubscription(ended) } }, now);
  }

  /**
   * A trial started without a card (`trialPaymentMethodCollection: IF_REQUIRED`) that reaches its
   * end: nothing can be charged, so the subscription ends EXPIRED without an order (Stripe's
   * `missing_payment_method: cancel`).
   */
  private async endTrialWithoutCard(stores: CommerceStores, s: Subscription, now: Date): Promise<void> {
    const expired: Subscription = { ...s, status: 'EXPIRED', endedAt: s.currentPeriodEnd, updatedAt: now };
    assertWritten(await stores.subscriptions.update(expired, s.status), 'subscription');
    await stores.emit({ orgId: s.orgId, type: 'subscription.expired', data: { subscription: presentWebhookSubscription(expired) } }, now);
  }

  /**
   * Reminder pass: `subscription.trial_will_end` (and the buyer's e-mail, through the same event)
   * for ACTIVE trials ending within TRIAL_WILL_END_DAYS, not scheduled to cancel. Exactly once per
   * trial: the event is emitted in the transaction of the conditional write that claims the trial
   * (`trial_will_end_sent_at IS NULL`), so of two workers racing, one writes and emits, the other
   * changes nothing; a rollback releases the claim with the event.
   */
  async remindTrialsEnding(limit = 100): Promise<number> {
    const now = this.clock.now();
    const until = new Date(now.getTime() + TRIAL_WILL_END_DAYS * DAY_MS);
    const ids = await this.uow.stores.subscriptions.listTrialsEnding(now, until, limit);
    let sent = 0;
    for (const id of ids) {
      try {
        const claimed = await this.uow.transaction(async (stores) => {
          const s = await stores.subscriptions.claimTrialWillEnd(id, now, until);
          if (!s) return false;
          await stores.emit({ orgId: s.orgId, type: 'subscription.trial_will_end', data: { subscription: presentWebhookSubscription(s) } }, now);
          return true;
        });
        if (claimed) sent++;
      } catch (err) {
        this.logger.error({ err, subscriptionId: id }, 'trial reminder failed; it is retried at the next pass');
      }
    }
    return sent;
  }

  /**
   * The last period's usage of an ending subscription: one order of USAGE lines (no fee: no new
   * period starts), charged once; when the usage costs nothing, or the charge is declined, no
   * retry follows (the order says FAILED and the subscription ends all the same). The customer's
   * credit balance pays what it can, as on a renewal (Stripe applies it to the final invoice); an
   * order it covers whole is PAID without a charge, and a declined one gives its draw back.
   */
  private async chargeFinalUsage(stores: CommerceStores, s: Subscription, now: Date, usage: readonly LineInput[]): Promise<void> {
    const period = s.periodNumber + 1;
    if (await stores.orders.findSubscriptionPeriod(s.id, period)) return;
    // Credits are drawn even when they cover everything (no order then): the usage was consumed.
    const credited = await drawCredits(stores, s, usage, now);
    const priced = await renewalOrder(stores, s, period, false, { processorPaymentId: null, processorStatus: null }, now, credited, { fee: false });
    if (priced.amountCents === 0) return;
    const { order: draft, drawn } = await withAppliedBalance(stores, s, priced, now);
    const order =
      draft.amountCents === 0
        ? { ...draft, status: 'PAID' as const, processorPaymentId: null, processorStatus: outcomeProcessorStatus('succeeded'), settledAvailableOn: null }
        : charged(draft, await this.processor.chargeSavedMethod({ orgId: s.orgId, paymentMethod: s.paymentMethod, amount: draft.amountCents, currency: s.currency, idempotencyKey: `${s.id}:${period}:final` }), now);
    await stores.orders.insert(order);
    if (order.status !== 'PAID' && drawn > 0) await stores.balances.restore(order.id, now);
    await stores.emit({ orgId: s.orgId, type: order.status === 'PAID' ? 'order.paid' : 'order.failed', data: { order: presentWebhookOrder(order, { subscription: s }) } }, now);
  }

  private async attemptRenewal(stores: CommerceStores, s: Subscription, now: Date, usage: readonly LineInput[]): Promise<void> {
    const period = s.periodNumber + 1;
    const existing = await stores.orders.findSubscriptionPeriod(s.id, period);
    // The period's order is priced once, before its first charge: a retry charges what it holds.
    // Prepaid credits are drawn with the order's first pricing, in its transaction (once per period).
    const priced = existing ? undefined : await renewalOrder(stores, s, period, false, { processorPaymentId: null, processorStatus: null }, now, await drawCredits(stores, s, usage, now));
    // The customer's credit balance (immediate downgrades) pays what it can, drawn once with the order's first pricing.
    const applied = priced && (await withAppliedBalance(stores, s, priced, now));
    const draft = applied?.order;
    const coveredByBalance = applied !== undefined && applied.drawn > 0 && applied.order.amountCents === 0;
    const charge = coveredByBalance
      ? undefined
      : await this.processor.chargeSavedMethod({
          orgId: s.orgId,
          paymentMethod: s.paymentMethod,
          amount: existing?.amountCents ?? draft!.amountCents,
          currency: s.currency,
          idempotencyKey: `${s.id}:${period}:${s.failedAttempts}`,
        });
    const paid = charge === undefined || charge.status === 'succeeded';
    let order: Order;
    if (existing) {
      order = paid ? { ...existing, status: 'PAID', processorPaymentId: charge?.status === 'succeeded' ? charge.paymentId : null, processorStatus: outcomeProcessorStatus('succeeded'), updatedAt: now } : existing;
      if (paid) assertWritten(await stores.orders.update(order, existing.status), 'order');
    } else {
      // Paid whole by the balance: no card payment, nothing to settle (as an order a coupon makes free).
      order = charge ? charged(draft!, charge, now) : { ...draft!, status: 'PAID', processorPaymentId: null, processorStatus: outcomeProcessorStatus('succeeded'), settledAvailableOn: null };
      await stores.orders.insert(order);
    }
    if (paid) {
      if (existing?.status !== 'PAID') {
        await stores.emit({ orgId: s.orgId, type: 'order.paid', data: { order: presentWebhookOrder(order, { subscription: s }) } }, now);
      }
      const currentPeriodEnd = periodEnd(s, period);
      const renewed: Subscription = {
        ...s,
        periodNumber: period,
        currentPeriodStart: s.currentPeriodEnd,
        currentPeriodEnd,
        latestOrderId: order.id,
        failedAttempts: 0,
        nextActionAt: currentPeriodEnd,
        updatedAt: now,
      };
      assertWritten(await stores.subscriptions.update(renewed, s.status), 'subscription');
      await stores.emit({ orgId: s.orgId, type: 'subscription.updated', data: { subscription: presentWebhookSubscription(renewed) } }, now);
      // The checkout's coupon no longer covers this period (issue 39): once, with the period's move.
      if (await discountEndsBefore(stores, s, period)) {
        await stores.emit({ orgId: s.orgId, type: 'subscription.discount_ended', data: { subscription: presentWebhookSubscription(renewed) } }, now);
      }
      return;
    }
    if (!existing) await stores.emit({ orgId: s.orgId, type: 'order.failed', data: { order: presentWebhookOrder(order, { subscription: s }) } }, now);
    const attempts = s.failedAttempts + 1;
    const retryInDays = DUNNING_RETRY_DAYS[attempts - 1];
    if (retryInDays === undefined) {
      // The period's order is never paid: the credit balance it drew goes back to the customer.
      await stores.balances.restore(order.id, now);
      const expired: Subscription = { ...s, status: 'EXPIRED', failedAttempts: attempts, endedAt: now, updatedAt: now };
      assertWritten(await stores.subscriptions.update(expired, s.status), 'subscription');
      await stores.emit({ orgId: s.orgId, type: 'subscription.expired', data: { subscription: presentWebhookSubscription(expired) } }, now);
      return;
    }
    assertWritten(await stores.subscriptions.update({ ...s, failedAttempts: attempts, nextActionAt: new Date(s.currentPeriodEnd.getTime() + retryInDays * DAY_MS), updatedAt: now }, s.status), 'subscription');
  }

  /** Applies a change under the subscription's row lock; `owner` (the portal's buyer) must own it, else 404. */
  private async change(owner: SubscriptionOwner | undefined, id: string, apply: (s: Subscription, now: Date, stores: CommerceStores) => Promise<Subscription>): Promise<Subscription> {
    return this.underLock(owner, id, apply);
  }

  private async underLock<T>(owner: SubscriptionOwner | undefined, id: string, apply: (s: Subscription, now: Date, stores: CommerceStores) => Promise<T>): Promise<T> {
    return this.uow.transaction(async (stores) => {
      const locked = await stores.subscriptions.lock(id);
      if (!locked || (owner && (locked.orgId !== owner.orgId || (owner.customerId !== undefined && locked.customerId !== owner.customerId)))) throw notFound('Subscription');
      return apply(locked, this.clock.now(), stores);
    });
  }

  /**
   * A subscription a processor's billing renews (Stripe) is changed there first, under its row
   * lock, with an idempotency key naming the state the change starts from (a retry after a lost
   * answer replays it); Kassa then takes the processor's answer. Unreachable → 503, nothing changed.
   */
  private async viaProcessor(stores: CommerceStores, s: Subscription, change: SubscriptionChange, now: Date): Promise<Subscription> {
    if (!this.billing) throw conflict('This subscription is billed by Stripe; it can be changed only while Stripe is the card processor (STRIPE_SECRET_KEY)');
    const state = await this.billing.change(s.processorSubscriptionId!, change, `kassa_subscription_${change}_${s.id}_${s.updatedAt.getTime()}`);
    return applyProcessorState(stores, s, state, now);
  }

  /**
   * Cancels at period end (status stays ACTIVE until then) or at once (CANCELED). Canceled at once,
   * a metered subscription's partial period is billed (cancelUsage): on the sandbox as an order of
   * USAGE lines charged with the cancel, on Stripe as an invoice of its own finalized before the
   * cancel is made there.
   */
  async cancel(id: string, options: { atPeriodEnd: boolean }, owner?: SubscriptionOwner): Promise<Subscription> {
    const usage = options.atPeriodEnd ? undefined : await this.cancelUsage(id, owner);
    if (usage?.processor) await this.processorUsage!.billFinal(usage.subscription, usage.range, usage.read);
    return this.change(owner, id, async (s, now, stores) => {
      if (s.status !== 'ACTIVE' && s.status !== 'PAUSED') throw conflict(`A ${s.status} subscription cannot be canceled`);
      if (options.atPeriodEnd) {
        if (s.status !== 'ACTIVE') throw conflict('Only an ACTIVE subscription can be canceled at period end; resume it or cancel it now');
        if (s.cancelAtPeriodEnd) return s;
        if (s.processorSubscriptionId) return this.viaProcessor(stores, s, 'cancel_at_period_end', now);
        const scheduled: Subscription = { ...s, cancelAtPeriodEnd: true, canceledAt: now, nextActionAt: s.currentPeriodEnd, updatedAt: now };
        assertWritten(await stores.subscriptions.update(scheduled, s.status), 'subscription');
        await stores.emit({ orgId: s.orgId, type: 'subscription.updated', data: { subscription: presentWebhookSubscription(scheduled) }, previous: { cancelAtPeriodEnd: s.cancelAtPeriodEnd } }, now);
        return scheduled;
      }
      // The usage was read for the subscription as it was: a renewal in between closed another period.
      if (usage && !usage.fits(s)) throw conflict('The subscription renewed while it was being canceled; retry the cancel');
      if (s.processorSubscriptionId) return this.viaProcessor(stores, s, 'cancel_now', now);
      const canceled: Subscription = { ...s, status: 'CANCELED', canceledAt: s.canceledAt ?? now, endedAt: now, updatedAt: now };
      assertWritten(await stores.subscriptions.update(canceled, s.status), 'subscription');
      await stores.emit({ orgId: s.orgId, type: 'subscription.ended', data: { subscription: presentWebhookSubscription(canceled) } }, now);
      // After the subscription's own event: its last order follows it, as at a period end.
      if (usage) await this.chargeFinalUsage(stores, s, now, usage.lines);
      return canceled;
    });
  }

  /**
   * The partial period of a metered subscription canceled at once, closed and read (undefined
   * without metered components, or when the cancel will be refused anyway). The range is
   * [currentPeriodStart, now): what the customer consumed until the cancel. It is closed for usage
   * first, in a transaction of its own under the row lock, as a renewal's close: from its commit
   * ingest refuses its events (PERIOD_CLOSED; no grace window: the subscription ends now), so every
   * event ACCEPTED before is in the read that follows. A cancel in the grace hour after the period's
   * end closes the next period too (its events up to now are in the range). On the sandbox one
   * order bills the whole range; on a processor (`read`) billFinal chooses the range: the period's
   * renewal draft may bill [currentPeriodStart, currentPeriodEnd) and the cancel's invoice the rest.
   */
  private async cancelUsage(id: string, owner: SubscriptionOwner | undefined) {
    if (!this.metered) return undefined;
    const s = await this.uow.stores.subscriptions.findById(id);
    if (!s || s.priceId === null || (s.status !== 'ACTIVE' && s.status !== 'PAUSED')) return undefined;
    if (owner && (s.orgId !== owner.orgId || (owner.customerId !== undefined && s.customerId !== owner.customerId))) return undefined;
    if (s.processorSubscriptionId && !this.processorUsage) return undefined;
    const now = this.clock.now();
    // The period may be split by plan changes (metered-plan-change.ts), on either rail.
    const parts = await this.periodParts(s, now);
    if (!hasMeteredPart(parts)) return undefined;
    const fits = (locked: Subscription) => locked.periodNumber === s.periodNumber && locked.currentPeriodEnd.getTime() === s.currentPeriodEnd.getTime();
    const closes = now >= s.currentPeriodEnd ? s.periodNumber + 1 : s.periodNumber;
    // The plan as the close found it (a change committed before the close is in it and in its segments).
    let atClose = s;
    await this.uow.transaction(async (stores) => {
      const locked = await stores.subscriptions.lock(id);
      if (!locked || !fits(locked)) throw conflict('The subscription renewed while it was being canceled; retry the cancel');
      await stores.subscriptions.closeUsagePeriod(id, closes);
      atClose = locked;
    });
    const range = { start: s.currentPeriodStart, end: now };
    const metered = this.metered;
    // The processor's invoice bills a range billFinal chooses: within the current period, its parts;
    // from the period's end on (a grace-hour cancel), the next period's usage at the current price
    // with its full included units.
    const read = async (r: { start: Date; end: Date }) => {
      const within = await this.periodParts(atClose, r.end);
      if (r.start.getTime() >= atClose.currentPeriodEnd.getTime()) return usageLineInputs(metered, { ...atClose, currentPeriodStart: r.start, currentPeriodEnd: r.end }, within[within.length - 1]!.components);
      return periodUsageLineInputs(metered, atClose, partsWithin(within, r), within.length > 1);
    };
    const processor = s.processorSubscriptionId !== null;
    // The sandbox's lines are read here, outside the cancel's transaction (the usage module's read).
    // The parts read again after the close's commit (a change committed before it is in them).
    return { subscription: s, fits, range, read, lines: processor ? [] : await periodUsageLineInputs(metered, atClose, await this.periodParts(atClose, now)), processor };
  }

  private get catalog(): PlanCatalog {
    return this.plans ?? { findPrice: async () => undefined };
  }

  /** The customer's credit balance in the subscription's currency (issue 39: immediate downgrades' credit, drawn by renewals). */
  async customerBalance(s: Subscription): Promise<number> {
    // Stripe-billed: Stripe's customer balance is the one that pays, shown as Kassa mirrors it (docs/plan-changes.md).
    if (s.processorSubscriptionId) return (await this.uow.stores.processorBalances.balanceOfSubscription(s.orgId, s.id, s.currency)) ?? 0;
    return this.uow.stores.balances.balance(s.orgId, s.customerId, s.currency);
  }

  /** Quotes a plan or seat change without changing anything (src/commerce/plan-change.ts); the same rules as changePlan. */
  async previewChange(id: string, request: PlanChangeRequest, owner: SubscriptionOwner, scope?: PlanChangeScope): Promise<PlanChangeQuote> {
    const s = await this.uow.stores.subscriptions.find(owner.orgId, id);
    if (!s || (owner.customerId !== undefined && s.customerId !== owner.customerId)) throw notFound('Subscription');
    if (s.processorSubscriptionId && !this.billing?.changePlan) throw conflict('This subscription is billed by Stripe; it can be changed only while Stripe is the card processor (STRIPE_SECRET_KEY)');
    const waiting = s.processorSubscriptionId ? await this.uow.stores.planChanges.find(s.id) : undefined;
    if (waiting && !waiting.appliedAt) throw pendingConflict(waiting);
    // The sandbox's credit balance pays what it can of an immediate change's charge (Stripe applies its own).
    const balance = s.processorSubscriptionId ? 0 : await this.uow.stores.balances.balance(s.orgId, s.customerId, s.currency);
    const quote = await quotePlanChange(s, request, this.catalog, this.clock.now(), scope, await changePricing(this.uow.stores, s), balance);
    if (s.processorSubscriptionId) refuseProcessorMismatch(s, quote);
    if (s.processorSubscriptionId) refuseOverScheduledOnProcessor(s, quote);
    return quote;
  }

  /**
   * Changes the price and/or seats (issue 39) under the subscription's row lock: the quote is made
   * on the locked row, so two changes, or a change and a renewal (FOR NO KEY UPDATE … SKIP LOCKED),
   * apply one after the other on the state the other left; `expectedAmountDueCents` turns a
   * quote that moved since the preview into a 409 with nothing charged. An immediate change that
   * costs something is charged to the saved card first (idempotency key: the subscription, the
   * state it starts from and the proration second); declined, nothing changes (409). The order
   * (PRORATION lines), its `order.paid`, the subscription and its `subscription.updated` commit
   * together.
   */
  changePlan(id: string, request: PlanChangeRequest, owner?: SubscriptionOwner, scope?: PlanChangeScope): Promise<{ subscription: Subscription; order: Order | null; quote: PlanChangeQuote; pending: boolean }> {
    return this.pricesFor(id, request).then((prices) => this.underLock(owner, id, async (s, now, stores) => {
      // A change paid in Stripe and not yet applied: its retry applies it; any other change waits (409).
      const waiting = s.processorSubscriptionId ? await stores.planChanges.find(s.id) : undefined;
      if (waiting && !waiting.appliedAt) return this.retryPending(stores, s, waiting, request, now);
      // The same request again after it was applied (by the job or the webhook): the change made, not a second one.
      const paidFor = waiting && reviveQuote(waiting.quote);
      if (waiting && paidFor && sameRequest(waiting, request) && s.priceId === paidFor.to.priceId && s.quantity === paidFor.to.quantity && !s.scheduledChange) {
        const order = waiting.orderId ? ((await stores.orders.find(s.orgId, waiting.orderId)) ?? null) : null;
        return { subscription: s, order, quote: paidFor, pending: false };
      }
      // The sandbox's credit balance, read under its row's lock (held to the commit): the quote's CREDIT
      // line is what this change draws, and a renewal or another change drawing it meanwhile waits.
      const balance = s.processorSubscriptionId ? 0 : await stores.balances.lockedBalance({ orgId: s.orgId, customerId: s.customerId, currency: s.currency });
      const quote = await quotePlanChange(s, request, prices, now, scope, await changePricing(stores, s), balance);
      let order: Order | null = null;
      let next = changedSubscription(s, quote, now);
      // A metered subscription moved to another price at once: the part of the period the old price bills
      // (on Stripe too: Kassa prices the usage items of Stripe's renewal draft, per part).
      const segment = quote.metered?.from || quote.metered?.to ? nextUsageSegment(s, quote, await stores.usageSegments.list(s.id, s.periodNumber), now) : undefined;
      // The period's usage is closed (Stripe's renewal draft billed, or a cancel-now's invoice): a
      // split now would come after its read and the part after the change would be billed at the old price.
      const closedThrough = segment ? await stores.subscriptions.usageClosedPeriod(s.id) : null;
      if (closedThrough !== null && closedThrough >= s.periodNumber) {
        throw conflict('This period’s usage is already closed for billing; the plan can change in the next period');
      }
      if (s.processorSubscriptionId) {
        const made = await this.changeOnProcessor(stores, s, next, quote, now, request);
        // Paid, not yet applied: the order is recorded with the change waiting for its item update;
        // the subscription is unchanged (and says nothing) until it is applied.
        // The usage still splits at the second the fee was prorated from (what the buyer paid for).
        if (made.pending) {
          if (segment) await stores.usageSegments.insert(segment);
          return { subscription: s, order: made.order, quote, pending: true };
        }
        order = made.order;
        next = made.next;
      } else if (quote.balanceCredit !== undefined) {
        order = await this.recordDowngradeCredit(stores, s, quote, now);
      } else if (quote.lines.length > 0) {
        // The quote's own lines (PRORATION, the coupon's DISCOUNT, TAX): the preview is the charge.
        const draft = await renewalOrder(stores, s, 0, false, { processorPaymentId: null, processorStatus: null }, now, [], { fee: false, priced: { lines: quote.lines, total: quote.amountDue } });
        if (quote.amountDue > 0) {
          if (s.paymentMethod === 'none') throw conflict('No card is saved for this subscription, so the change cannot be charged');
          const charge = await this.processor.chargeSavedMethod({
            orgId: s.orgId,
            paymentMethod: s.paymentMethod,
            amount: draft.amountCents,
            currency: s.currency,
            idempotencyKey: `${s.id}:change:${s.updatedAt.getTime()}:${quote.prorationDate.getTime() / 1000}`,
          });
          order = { ...charged(draft, charge, now), billingPeriod: null, productId: quote.to.productId, productName: quote.to.productName };
          if (order.status !== 'PAID') throw conflict('The card was declined: the plan was not changed and nothing was charged');
        } else {
          // A proration above 0 that the coupon covers whole: an order of 0, paid without a charge (as a
          // checkout a coupon makes free), so the previewed lines are recorded and `order.paid` says so.
          // (Before, no order was written: the upgrade applied with no record of its proration.)
          order = { ...draft, status: 'PAID', processorStatus: outcomeProcessorStatus('succeeded'), settledAvailableOn: null, billingPeriod: null, productId: quote.to.productId, productName: quote.to.productName };
        }
        // The quote's CREDIT line, drawn from the balance locked above in this transaction (a declined
        // card threw before: nothing drawn).
        if ((quote.appliedBalance ?? 0) > 0) {
          const drawn = await stores.balances.apply({ orgId: s.orgId, customerId: s.customerId, currency: s.currency, wanted: quote.appliedBalance!, orderId: order.id, subscriptionId: s.id, at: now });
          if (drawn !== quote.appliedBalance) throw new Error(`The credit balance moved under its lock: drew ${drawn}, quoted ${quote.appliedBalance}`);
        }
        await stores.orders.insert(order);
        await stores.emit({ orgId: s.orgId, type: 'order.paid', data: { order: presentWebhookOrder(order, { subscription: s }) } }, now);
      }
      if (segment) await stores.usageSegments.insert(segment);
      await this.writePlanChange(stores, s, next, now);
      return { subscription: next, order, quote, pending: false };
    }));
  }

  /**
   * An immediate downgrade on the sandbox (issue 39), on the locked row: its order of total 0 (the
   * quote's lines: PRORATION, the mirrored DISCOUNT and TAX, the BALANCE line), PAID without a
   * charge, and its credit added to the customer's balance in the same transaction (the balance
   * row locked: a renewal drawing it meanwhile waits). `order.paid` carries the lines.
   */
  private async recordDowngradeCredit(stores: CommerceStores, s: Subscription, quote: PlanChangeQuote, now: Date): Promise<Order | null> {
    if (quote.lines.length === 0) return null;
    const draft = await renewalOrder(stores, s, 0, false, { processorPaymentId: null, processorStatus: null }, now, [], { fee: false, priced: { lines: quote.lines, total: 0 } });
    const order: Order = { ...draft, status: 'PAID', processorStatus: outcomeProcessorStatus('succeeded'), settledAvailableOn: null, billingPeriod: null, productId: quote.to.productId, productName: quote.to.productName };
    await stores.orders.insert(order);
    if ((quote.balanceCredit ?? 0) > 0) {
      await stores.balances.carry({ orgId: s.orgId, customerId: s.customerId, currency: s.currency, amount: quote.balanceCredit!, orderId: order.id, subscriptionId: s.id, at: now });
    }
    await stores.emit({ orgId: s.orgId, type: 'order.paid', data: { order: presentWebhookOrder(order, { subscription: s }) } }, now);
    return order;
  }

  /** The changed subscription written on the locked row, and its one `subscription.updated` (with the plan before). */
  private async writePlanChange(stores: CommerceStores, s: Subscription, next: Subscription, now: Date): Promise<void> {
    assertWritten(await stores.subscriptions.update(next, s.status), 'subscription');
    await stores.emit(
      {
        orgId: s.orgId,
        type: 'subscription.updated',
        data: { subscription: presentWebhookSubscription(next) },
        previous: { cancelAtPeriodEnd: s.cancelAtPeriodEnd, plan: { priceId: s.priceId, productName: s.productName, quantity: s.quantity, amountCents: s.amountCents } },
      },
      now,
    );
  }

  /**
   * A change request while a change of this subscription is paid in Stripe and not yet applied
   * (docs/plan-changes.md, "Paid, not yet applied"): the same request (price, seats, and the
   * proration second when given) is its retry — the item update is tried now with the change's
   * key, and the answer is the change with its order (applied, or still pending: 202), never a
   * second invoice; any other change is 409 until it is applied.
   */
  private async retryPending(stores: CommerceStores, s: Subscription, waiting: PendingPlanChange, request: PlanChangeRequest, now: Date): Promise<{ subscription: Subscription; order: Order | null; quote: PlanChangeQuote; pending: boolean }> {
    if (!sameRequest(waiting, request)) throw pendingConflict(waiting);
    const applied = await this.applyPending(stores, s, waiting, now);
    const order = waiting.orderId ? ((await stores.orders.find(s.orgId, waiting.orderId)) ?? null) : null;
    return { subscription: applied ?? s, order, quote: reviveQuote(waiting.quote), pending: applied === undefined };
  }

  /**
   * Makes the item update of a change paid and not yet applied, on the subscription the caller
   * locked, with the change's idempotency key (Stripe replays an update it made whose answer was
   * lost): the subscription takes the change (`subscription.updated`, once: the row is removed in
   * the same transaction). Undefined when the processor failed again (the row stays for the job).
   * A subscription ended meanwhile drops it (nothing left to change; logged).
   */
  private async applyPending(stores: CommerceStores, s: Subscription, waiting: PendingPlanChange, now: Date): Promise<Subscription | undefined> {
    if (waiting.appliedAt) return s;
    if (s.status === 'CANCELED' || s.status === 'ENDED' || s.status === 'EXPIRED') {
      await stores.planChanges.remove(s.id);
      this.logger.warn({ subscriptionId: s.id, invoiceId: waiting.processorInvoiceId, orderId: waiting.orderId }, 'a paid plan change was never applied: the subscription ended first');
      return s;
    }
    if (!this.billing?.applyPlanItem) return undefined;
    const change = reviveProcessorChange(waiting.processorChange);
    let state: ProcessorSubscriptionState;
    try {
      state = await this.billing.applyPlanItem(waiting.processorSubscriptionId, change, waiting.idempotencyKey);
    } catch (err) {
      this.logger.warn({ err, subscriptionId: s.id, invoiceId: waiting.processorInvoiceId, attempts: waiting.attempts }, 'a paid plan change could not be applied in Stripe yet; retried');
      return undefined;
    }
    const quote = reviveQuote(waiting.quote);
    const next = withProcessorPrice(changedSubscription(s, quote, now), quote.to, state);
    if (!(await stores.planChanges.markApplied(s.id, now))) return undefined;
    await this.writePlanChange(stores, s, next, now);
    return next;
  }

  /**
   * The invoice of Kassa's own change of this Stripe subscription is paid (`invoice.paid`): a change
   * still waiting for its item update is applied now, under the row lock. Never throws (the webhook
   * has recorded its order; the job retries what is left). True when one was applied.
   */
  async applyPendingPlanChangeOf(processorSubscriptionId: string): Promise<boolean> {
    try {
      const found = await this.uow.stores.subscriptions.findByProcessorSubscription(processorSubscriptionId);
      const seen = found && (await this.uow.stores.planChanges.find(found.id));
      if (!found || !seen || seen.appliedAt) return false;
      return await this.uow.transaction(async (stores) => {
        const locked = await stores.subscriptions.lock(found.id);
        const waiting = locked && (await stores.planChanges.find(found.id));
        if (!locked || !waiting || waiting.appliedAt) return false;
        return (await this.applyPending(stores, locked, waiting, this.clock.now())) !== undefined;
      });
    } catch (err) {
      this.logger.warn({ err, processorSubscriptionId }, 'a paid plan change could not be applied on its invoice.paid; the job retries it');
      return false;
    }
  }

  /**
   * The `stripe-plan-change-items` job's pass: changes paid and not yet applied whose next attempt
   * is due, leased (moved PENDING_LEASE_MS ahead, `FOR UPDATE SKIP LOCKED`, so two workers never
   * try the same row at once) and applied under the subscription's row lock (applyPending). A
   * failed attempt waits pendingBackoffMs (1 minute doubling, at most 6 hours; never given up:
   * the buyer paid for it — from the 24th attempt each failure is logged as an error). Returns the
   * changes applied.
   */
  async applyPendingPlanChanges(limit = 20): Promise<number> {
    if (!this.billing?.applyPlanItem) return 0;
    const now = this.clock.now();
    const leased = await this.uow.stores.planChanges.lease(now, new Date(now.getTime() + PENDING_LEASE_MS), limit);
    let applied = 0;
    for (const row of leased) {
      let done = false;
      try {
        done = await this.uow.transaction(async (stores) => {
          const locked = await stores.subscriptions.lock(row.subscriptionId);
          const waiting = locked && (await stores.planChanges.find(row.subscriptionId));
          if (!locked || !waiting || waiting.appliedAt) return true;
          return (await this.applyPending(stores, locked, waiting, this.clock.now())) !== undefined;
        });
      } catch (err) {
        this.logger.warn({ err, subscriptionId: row.subscriptionId }, 'a paid plan change could not be applied; retried');
      }
      if (done) {
        applied++;
        continue;
      }
      await this.uow.stores.planChanges.retryAt(row.subscriptionId, new Date(this.clock.now().getTime() + pendingBackoffMs(row.attempts)));
      if (row.attempts >= PENDING_ERROR_AFTER) this.logger.error({ subscriptionId: row.subscriptionId, invoiceId: row.processorInvoiceId, attempts: row.attempts }, 'a plan change paid in Stripe is still not applied there; retried');
    }
    return applied;
  }

  /**
   * A plan or seat change of a subscription Stripe bills (issue 39), made in Stripe first under the
   * row lock (src/processors/stripe-subscription-events.ts `changePlan`): Stripe's one item moves
   * to the plan the subscription will bill next — the new plan for an immediate or trial change
   * and for a scheduled downgrade (without proration: Stripe's next renewal bills it, Kassa applies
   * the scheduled change when that renewal's invoice is paid), the current plan again when a
   * scheduled change is dropped. An immediate change that costs something is Stripe's
   * `always_invoice` proration at the quote's second; its paid invoice becomes the PRORATION order
   * here (the invoice's `invoice.paid` then finds it). Idempotency key: the subscription, the state
   * it starts from and the proration second, as on the sandbox.
   */
  private async changeOnProcessor(stores: CommerceStores, s: Subscription, changed: Subscription, quote: PlanChangeQuote, now: Date, request: PlanChangeRequest): Promise<{ order: Order | null; next: Subscription; pending?: true }> {
    if (!this.billing?.changePlan) throw conflict('This subscription is billed by Stripe; it can be changed only while Stripe is the card processor (STRIPE_SECRET_KEY)');
    refuseOverScheduledOnProcessor(s, quote);
    refuseProcessorMismatch(s, quote);
    // What Stripe's item holds now: the scheduled plan once a downgrade was scheduled, else the current one.
    const held = s.scheduledChange ? { priceId: s.scheduledChange.priceId, productId: s.scheduledChange.productId } : { priceId: s.priceId, productId: s.productId };
    const target = quote.mode === 'unschedule' ? quote.from : quote.to;
    const key = `kassa_subscription_plan_${s.id}_${s.updatedAt.getTime()}_${quote.prorationDate.getTime() / 1000}`;
    const processorChange: ProcessorPlanChange = {
      unitAmount: target.unitAmount,
      quantity: target.quantity,
      currency: s.currency,
      interval: s.billingInterval,
      intervalCount: s.billingIntervalCount,
      // Stripe's item has a price Kassa does not know (issue 39): Kassa's own is sent again.
      priceChanged: target.priceId !== held.priceId || Boolean(s.processorMismatch),
      productName: target.productName,
      productId: target.productId,
      sameProduct: target.productId === held.productId,
      // Kassa's own proration (an amount-off coupon, a coupon ending inside the period): its exact
      // amounts are invoiced, even when the coupon brings them to 0, so the order has its invoice.
      // An immediate downgrade is Stripe's proration too: its invoice's total is below 0 and Stripe moves the credit to the customer's balance.
      proration: quote.mode === 'immediate' && quote.processorItems && quote.lines.length > 0 ? 'explicit_items' : quote.mode === 'immediate' && (quote.amountDue > 0 || (quote.balanceCredit ?? 0) > 0) ? 'invoice_now' : 'none',
      prorationDate: quote.prorationDate,
      ...(quote.processorItems && { items: quote.processorItems, periodEnd: quote.periodEnd, amountDue: quote.amountDue }),
    };
    const result = await this.billing.changePlan(s.processorSubscriptionId!, processorChange, key);
    if (result.state === null) {
      // Paid, not yet applied (Kassa's own proration: the invoice is paid, the item update failed):
      // the PAID order and the change waiting for its item update, in this one transaction.
      const order = (await insertExtraInvoiceOrder(stores, changed, result.invoice, now, { lines: quote.lines, total: quote.amountDue })) ?? (await stores.orders.findByProcessorPaymentId(result.invoice.processorPaymentId)) ?? null;
      await stores.planChanges.insert({
        subscriptionId: s.id,
        orgId: s.orgId,
        processorSubscriptionId: s.processorSubscriptionId!,
        idempotencyKey: key,
        processorChange: JSON.parse(JSON.stringify(processorChange)) as Record<string, unknown>,
        quote: JSON.parse(JSON.stringify(quote)) as Record<string, unknown>,
        request: { priceId: request.priceId ?? null, quantity: request.quantity ?? null, prorationDate: quote.prorationDate.toISOString() },
        processorInvoiceId: result.invoice.invoiceId ?? result.invoice.processorPaymentId,
        orderId: order?.id ?? null,
        attempts: 0,
        retryAt: new Date(now.getTime() + pendingBackoffMs(0)),
        appliedAt: null,
        createdAt: now,
      });
      this.logger.warn({ subscriptionId: s.id, invoiceId: result.invoice.invoiceId, orderId: order?.id }, 'a plan change is paid in Stripe and waits for its item update');
      return { order, next: s, pending: true };
    }
    // The Stripe price Stripe's item now has is Kassa's for the target plan (issue 39): the
    // `customer.subscription.updated` this change makes is then read as Kassa's own, not applied twice.
    const next = withProcessorPrice(changed, target, result.state);
    if (!result.invoice) return { order: null, next };
    // The invoice's `invoice.paid` may have recorded the order first (an earlier attempt whose answer was lost).
    const order = (await insertExtraInvoiceOrder(stores, next, result.invoice, now, { lines: quote.lines, total: quote.amountDue })) ?? (await stores.orders.findByProcessorPaymentId(result.invoice.processorPaymentId));
    // Stripe's customer balance may pay part of it (a CREDIT line on the order): compared before it.
    const drawn = Math.max(0, result.invoice.balance?.move ?? 0);
    if (order && order.amountCents + drawn !== quote.amountDue) {
      // Stripe's invoice is what was charged, and the order says so; the preview was Kassa's arithmetic.
      this.logger.warn({ subscriptionId: s.id, quoted: quote.amountDue, charged: order.amountCents }, 'Stripe charged a plan change differently from its preview');
    }
    return { order: order ?? null, next };
  }

  /**
   * The prices a change reads, read before the row lock (the catalog is another module's, and
   * PGlite has one connection): a price's amount, interval and currency never change, so only its
   * `active` flag could move meanwhile. A subscription whose price changed between this read and
   * the lock finds no price here and is refused (409), never quoted on a guess.
   */
  private async pricesFor(id: string, request: PlanChangeRequest): Promise<PlanCatalog> {
    const s = await this.uow.stores.subscriptions.findById(id);
    const ids = [...new Set([s?.priceId, request.priceId].filter((x): x is string => typeof x === 'string'))];
    const found = new Map<string, Awaited<ReturnType<PlanCatalog['findPrice']>>>();
    for (const priceId of ids) found.set(priceId, s ? await this.catalog.findPrice(s.orgId, priceId) : undefined);
    return {
      findPrice: async (_orgId, priceId) => {
        if (!found.has(priceId)) throw conflict('The subscription changed while this change was made; try again');
        return found.get(priceId);
      },
    };
  }

  cancelByManageToken(token: string): Promise<Subscription> {
    return this.uow.stores.subscriptions.findByManageToken(token).then((s) => {
      if (!s) throw notFound('Subscription');
      return this.cancel(s.id, { atPeriodEnd: true });
    });
  }

  /**
   * Undoes a scheduled cancellation (cancel at period end) while the period runs: the subscription
   * renews again. Nothing to undo (not scheduled) returns it unchanged; an ended one is 409.
   */
  keepRenewing(id: string, owner?: SubscriptionOwner): Promise<Subscription> {
    return this.change(owner, id, async (s, now, stores) => {
      if (s.status !== 'ACTIVE') throw conflict(`A ${s.status} subscription cannot be renewed again; start a new one`);
      if (!s.cancelAtPeriodEnd) return s;
      if (s.processorSubscriptionId) return this.viaProcessor(stores, s, 'keep_renewing', now);
      const kept: Subscription = { ...s, cancelAtPeriodEnd: false, canceledAt: null, updatedAt: now };
      assertWritten(await stores.subscriptions.update(kept, s.status), 'subscription');
      await stores.emit({ orgId: s.orgId, type: 'subscription.updated', data: { subscription: presentWebhookSubscription(kept) } }, now);
      return kept;
    });
  }

  keepRenewingByManageToken(token: string): Promise<Subscription> {
    return this.uow.stores.subscriptions.findByManageToken(token).then((s) => {
      if (!s) throw notFound('Subscription');
      return this.keepRenewing(s.id);
    });
  }

  /** A buyer's subscriptions (the portal), newest first. */
  /**
   * A customer's usage this period (`CUS_…` id, else externalId; unknown or another
   * organization's: 404): for each ACTIVE subscription whose price has metered components, the
   * estimated next charge (src/commerce/usage-estimate.ts).
   */
  async usageThisPeriod(orgId: string, customerRef: string): Promise<{ customerId: string; estimates: UsageEstimate[] }> {
    const customers = this.uow.stores.customers;
    const customer = (await customers.find(orgId, customerRef)) ?? (await customers.findByExternalId(orgId, customerRef));
    if (!customer) throw notFound('Customer');
    const estimates: UsageEstimate[] = [];
    if (!this.metered) return { customerId: customer.id, estimates };
    for (const s of await this.listOfCustomer(orgId, customer.id)) {
      if (s.status !== 'ACTIVE' || s.priceId === null) continue;
      const parts = await this.periodParts(s, s.currentPeriodEnd);
      if (!hasMeteredPart(parts)) continue;
      const split = parts.length > 1 ? await periodUsageLineInputs(this.metered, s, parts) : undefined;
      estimates.push(await estimateNextCharge(this.metered, this.uow.stores, s, parts[parts.length - 1]!.components, split));
    }
    return { customerId: customer.id, estimates };
  }

  listOfCustomer(orgId: string, customerId: string): Promise<Subscription[]> {
    return this.uow.stores.subscriptions.list(orgId, { customerId }, { offset: 0, limit: 100 }).then((page) => page.records);
  }

  pause(id: string, owner?: SubscriptionOwner): Promise<Subscription> {
    return this.change(owner, id, async (s, now, stores) => {
      if (s.status === 'PAUSED') return s;
      if (s.status !== 'ACTIVE') throw conflict(`A ${s.status} subscription cannot be paused`);
      if (s.processorSubscriptionId) return this.viaProcessor(stores, s, 'pause', now);
      const paused: Subscription = { ...s, status: 'PAUSED', pausedAt: now, updatedAt: now };
      assertWritten(await stores.subscriptions.update(paused, s.status), 'subscription');
      await stores.emit({ orgId: s.orgId, type: 'subscription.updated', data: { subscription: presentWebhookSubscription(paused) } }, now);
      return paused;
    });
  }

  /** Resumes; when the paid period lapsed during the pause, the next period starts (and is charged) now. */
  resume(id: string, owner?: SubscriptionOwner): Promise<Subscription> {
    return this.change(owner, id, async (s, now, stores) => {
      if (s.status === 'ACTIVE') return s;
      if (s.status !== 'PAUSED') throw conflict(`A ${s.status} subscription cannot be resumed`);
      // On Stripe, billing continues on Stripe's cycle (invoices during the pause were voided).
      if (s.processorSubscriptionId) return this.viaProcessor(stores, s, 'resume', now);
      const lapsed = s.currentPeriodEnd.getTime() <= now.getTime();
      const resumed: Subscription = lapsed
        ? { ...s, status: 'ACTIVE', pausedAt: null, currentPeriodEnd: now, billingAnchor: now, anchorPeriod: s.periodNumber + 1, nextActionAt: now, failedAttempts: 0, updatedAt: now }
        : { ...s, status: 'ACTIVE', pausedAt: null, updatedAt: now };
      assertWritten(await stores.subscriptions.update(resumed, s.status), 'subscription');
      await stores.emit({ orgId: s.orgId, type: 'subscription.updated', data: { subscription: presentWebhookSubscription(resumed) } }, now);
      return resumed;
    });
  }

  async get(orgId: string, id: string): Promise<Subscription> {
    const found = await this.uow.stores.subscriptions.find(orgId, id);
    if (!found) throw notFound('Subscription');
    return found;
  }

  findBySession(checkoutSessionId: string): Promise<Subscription | undefined> {
    return this.uow.stores.subscriptions.findBySession(checkoutSessionId);
  }

  findByManageToken(token: string): Promise<Subscription | undefined> {
    return this.uow.stores.subscriptions.findByManageToken(token);
  }

  async list(orgId: string, filter: { status?: SubscriptionStatus; customerId?: string }, request: ListRequest) {
    const subscriptions = this.uow.stores.subscriptions;
    return subscriptions.list(orgId, filter, await resolveWindow(request, (id) => subscriptions.keyset(orgId, id), 'subscription'));
  }
}

/**
 * On Stripe a scheduled downgrade is already Stripe's item (unprorated), so an immediate change
 * on top of it would be prorated by Stripe from the scheduled plan, not from the plan paid for:
 * refused (409) until the scheduled change is dropped (a change back to the current plan).
 */
function refuseOverScheduledOnProcessor(s: Subscription, quote: PlanChangeQuote): void {
  if (s.scheduledChange && quote.mode === 'immediate') {
    throw conflict('A change is scheduled for the period end of this Stripe-billed subscription; drop it first (change back to the current plan), then change again');
  }
}

/**
 * Stripe bills a price Kassa does not know (made in the Dashboard, issue 39): Kassa cannot quote a
 * proration from it (Stripe would prorate from its own price), so only a change at the period's end
 * is taken (`effective: PERIOD_END`, nothing prorated): it sets Stripe's item back to a Kassa price,
 * which clears the mismatch; the current period stays billed as Stripe billed it.
 */
function refuseProcessorMismatch(s: Subscription, quote: PlanChangeQuote): void {
  if (s.processorMismatch && quote.mode !== 'scheduled') {
    throw conflict(`Stripe bills this subscription at a price Kassa does not know (${s.processorMismatch.processorPriceId}, set outside Kassa), so no proration can be quoted: change it with effective PERIOD_END (Stripe's item then has Kassa's price again) or set it in the Stripe Dashboard`);
  }
}

/** A job's lease of a pending plan change (longer than an attempt's Stripe calls with their retries). */
const PENDING_LEASE_MS = 10 * 60_000;
/** From this attempt on, a plan change still not applied is logged as an error. */
const PENDING_ERROR_AFTER = 24;

/** The wait after `attempts` failed attempts of a pending plan change: 1 minute, doubling, at most 6 hours. */
export function pendingBackoffMs(attempts: number): number {
  return Math.min(60_000 * 2 ** Math.max(0, attempts - 1), 6 * 3600_000);
}

/** The request a pending change was made by, again: the same price and seats, the same proration second when given, not scheduled. */
function sameRequest(waiting: PendingPlanChange, request: PlanChangeRequest): boolean {
  return (
    (request.priceId ?? null) === waiting.request.priceId &&
    (request.quantity ?? null) === waiting.request.quantity &&
    (request.prorationDate === undefined || Math.floor(request.prorationDate.getTime() / 1000) * 1000 === Date.parse(waiting.request.prorationDate)) &&
    (request.effective === undefined || request.effective === 'IMMEDIATE')
  );
}

function pendingConflict(waiting: PendingPlanChange): AppError {
  const to = (waiting.quote as { to?: { productName?: string; quantity?: number } }).to;
  return conflict(
    `A plan change of this subscription${to?.productName ? ` (to ${to.quantity ?? 1} × ${to.productName})` : ''} is paid and still being applied in Stripe; it completes on its own. Retry that same change to see it applied, or make another change once it is applied`,
  );
}

/** A stored quote (JSON) as the service's quote: its dates back as dates. */
function reviveQuote(q: Record<string, unknown>): PlanChangeQuote {
  const o = q as unknown as PlanChangeQuote & { prorationDate: string; periodStart: string; periodEnd: string };
  return { ...o, prorationDate: new Date(o.prorationDate), periodStart: new Date(o.periodStart), periodEnd: new Date(o.periodEnd) };
}

function reviveProcessorChange(c: Record<string, unknown>): ProcessorPlanChange {
  const o = c as unknown as ProcessorPlanChange & { prorationDate: string; periodEnd?: string };
  return { ...o, prorationDate: new Date(o.prorationDate), ...(o.periodEnd !== undefined && { periodEnd: new Date(o.periodEnd) }) };
}

/** The subscription with the processor price its item now has mapped to the plan (processorPrices), and no mismatch. */
function withProcessorPrice(changed: Subscription, target: { priceId: string | null; productId: string | null; productName: string }, state: ProcessorSubscriptionState): Subscription {
  const stripePrice = state.item?.processorPriceId;
  return stripePrice
    ? { ...changed, processorPrices: { ...(changed.processorPrices ?? {}), [stripePrice]: { priceId: target.priceId, productId: target.productId, productName: target.productName } }, processorMismatch: null }
    : changed;
}

export { APPLIED_BALANCE_DESCRIPTION };

/**
 * A renewal order with the customer's credit balance applied (issue 39; Stripe applies its customer
 * balance to the next invoice): min(balance, total) drawn for this order under the balance row's
 * lock, as one CREDIT line after the others (lines are priced charges → DISCOUNT → TAX → CREDIT, so
 * the tax is on the whole fee, and the total never goes below 0). Unchanged without a balance.
 */
async function withAppliedBalance(stores: CommerceStores, s: Subscription, order: Order, now: Date): Promise<{ order: Order; drawn: number }> {
  if (order.amountCents <= 0) return { order, drawn: 0 };
  const drawn = await stores.balances.apply({ orgId: s.orgId, customerId: s.customerId, currency: s.currency, wanted: order.amountCents, orderId: order.id, subscriptionId: s.id, at: now });
  if (drawn <= 0) return { order, drawn: 0 };
  const line = amountLine('CREDIT', APPLIED_BALANCE_DESCRIPTION, -drawn);
  return { order: { ...order, lines: [...order.lines, line], amountCents: order.amountCents - drawn }, drawn };
}
