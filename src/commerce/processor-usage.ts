/**
 * Metered usage of subscriptions a processor's billing renews (Stripe Billing; issue 38 §7).
 *
 * Kassa computes the usage lines and the processor collects them: at `invoice.created` of a
 * renewal, Stripe's draft invoice is held (`auto_advance: false`) until Kassa's grace window for
 * the closing period has passed (the period's end + USAGE_CLOSE_DELAY_MS, the ingest's 1-hour
 * grace); then the period is closed for usage (the same `usage_closed_period` mark, under the
 * subscription's row lock, as the sandbox renewal), the quantities are read, priced by pricePeriod
 * (Kassa's tiers, included units and its one rounding rule), and each USAGE line becomes one
 * invoice item of its rounded amount on that draft, which Kassa then finalizes; Stripe charges it.
 * `invoice.paid` writes the renewal order from the same stored line inputs, so the order's lines
 * add up to what Stripe collected. Why invoice items and not Stripe's meters: docs/usage-billing.md.
 *
 * Exactly once: one row per (subscription, kind, period) (migration 0320), the line inputs stored
 * once (every retry adds the same items), each item added with an idempotency key and skipped
 * when the invoice already carries it (its metadata), the finalization with its own key.
 *
 * A renewal draft Stripe finalized without Kassa's items (Kassa down past Stripe's finalization
 * grace, or its `invoice.created` missed) is MISSED; its period's usage then goes on a MAKEUP
 * invoice of its own (migration 0415), opened and billed as a cancel-now's FINAL one is.
 */
import type { Clock } from '../kernel/clock.js';
import type { Logger } from '../kernel/logger.js';
import type { Subscription } from './model.js';
import { lineDetail } from './order-line-text.js';
import { pricePeriod, type LineInput } from './pricing.js';
import { USAGE_CLOSE_DELAY_MS, drawCredits, usageLineInputs, type MeteredBilling, type MeteredComponent } from './metered-billing.js';
import type { CommerceUnitOfWork, CreditLedger } from './stores.js';
import { hasMeteredPart, paidForPlan, partsWithin, periodUsageLineInputs, usageParts, type UsagePart } from './metered-plan-change.js';

/** A processor invoice that carries a metered subscription's usage. */
export interface UsageInvoice {
  processorInvoiceId: string;
  orgId: string;
  subscriptionId: string;
  /**
   * RENEWAL: the cycle's draft (`invoice.created`); FINAL: opened by Kassa at a cancel-now; MAKEUP:
   * opened by Kassa for the usage of a RENEWAL the processor finalized without it (MISSED).
   */
  kind: 'RENEWAL' | 'FINAL' | 'MAKEUP';
  /** Kassa's period number whose usage it bills. */
  usagePeriod: number;
  usageStart: Date;
  usageEnd: Date;
  /** When its usage may be closed and billed (RENEWAL: the period's end + the grace window). */
  dueAt: Date;
  /** HELD: waiting for `dueAt`; FINALIZED: items added, finalized; MISSED: the processor finalized it without them. */
  state: 'HELD' | 'FINALIZED' | 'MISSED';
  /** The USAGE line inputs, written once. */
  lines: LineInput[] | null;
  createdAt: Date;
  updatedAt: Date;
  /** A MISSED RENEWAL's make-up attempts by the retry job so far (read back; 0 when none). */
  makeupAttempts?: number;
  /**
   * The plan in force when its usage range's draft was recorded, whose metered components bill the
   * part after the range's last plan change once the subscription has moved past that period
   * (migration 0446): a RENEWAL's is recorded with the draft (at the period's end: a change after
   * it is refused until the renewal is recorded), a MAKEUP copies its RENEWAL's. Read only when
   * the close comes after the renewal's `invoice.paid` moved the subscription on (a MISSED draft's
   * make-up opened late) — it applied a `PERIOD_END` change, or a change of the next period was
   * made: the subscription's plan then is not the one the range was used under. While the
   * subscription is still in the period, its locked row's plan decides (a change whose commit
   * follows the draft's record, clocks apart, is in it). Absent (rows from before 0446, FINAL
   * rows whose lines are read at once): the subscription's plan at the close.
   */
  plan?: { priceId: string | null; productName: string } | null;
}

/** How long a retry job's worker holds a MISSED renewal while it tries its make-up (then another may). */
export const MAKEUP_LEASE_MS = 10 * 60_000;
/** Make-up attempts of one MISSED renewal before the job gives up (logged as an error; about 4 days with the backoff). */
export const MAKEUP_MAX_ATTEMPTS = 24;
/** The wait after the n-th failed attempt (n ≥ 1): 1 minute, doubling, at most 6 hours. */
export function makeupBackoffMs(attempts: number): number {
  return Math.min(60_000 * 2 ** Math.max(0, attempts - 1), 6 * 3600_000);
}

export interface UsageInvoiceRepository {
  /** Inserts unless the invoice, or the (subscription, kind, period), has one already. */
  insert(invoice: UsageInvoice): Promise<void>;
  /**
   * Inserts a RENEWAL as `insert` does, under its subscription's row lock (the lock under which a
   * cancel-now closes usage): when a cancel-now in the grace hour has already closed the period
   * after the draft's (it then bills the draft's period itself, billFinal), with an empty range.
   */
  insertRenewal(invoice: UsageInvoice): Promise<void>;
  find(processorInvoiceId: string): Promise<UsageInvoice | undefined>;
  findFor(subscriptionId: string, kind: UsageInvoice['kind'], usagePeriod: number): Promise<UsageInvoice | undefined>;
  /** HELD invoices whose `dueAt` has passed, oldest first. */
  listDue(now: Date, limit: number): Promise<string[]>;
  /**
   * Writes the line inputs unless some are stored already; returns the stored ones (the first
   * writer's). `lines` makes them in the same transaction, under the row's lock, with the ledger
   * bound to it: the credits it draws commit with the lines that carry them, or not at all.
   */
  setLines(processorInvoiceId: string, lines: (credits: CreditLedger) => Promise<LineInput[]>, now: Date): Promise<LineInput[]>;
  /**
   * HELD → `state`; nothing when it is not HELD any more. A RENEWAL settled MISSED is due for its
   * make-up at `now` (the retry job finds it there until `makeupDone`).
   */
  settle(processorInvoiceId: string, state: 'FINALIZED' | 'MISSED', now: Date): Promise<void>;
  /**
   * Up to `limit` MISSED renewals whose make-up is due at `now`, oldest first, each leased: its next
   * attempt moved to `leaseUntil` and its attempts counted, in one statement that skips rows another
   * worker is leasing (so two workers never try one row at once).
   */
  leaseMakeups(now: Date, leaseUntil: Date, limit: number): Promise<UsageInvoice[]>;
  /** No make-up attempt pending any more for this MISSED renewal (opened, or nothing to open). */
  makeupDone(processorInvoiceId: string): Promise<void>;
  /** The next make-up attempt of this MISSED renewal at `at`; null: given up. */
  makeupRetryAt(processorInvoiceId: string, at: Date | null): Promise<void>;
}

/** One USAGE line as an invoice item: its rounded amount, once (the key). */
export interface UsageInvoiceItem {
  /** Idempotency key and the item's metadata `kassa_usage_item`: one item per key on the invoice. */
  key: string;
  description: string;
  amountCents: number;
  currency: string;
  periodStart: Date;
  periodEnd: Date;
  meterId: string;
  /**
   * Whether the subscription's processor-side coupon may take something off it (Stripe's
   * `discountable`): false when Kassa's coupon is limited to products, since a USAGE line names no
   * product and such a coupon takes nothing off it (src/commerce/discounts.ts).
   */
  discountable: boolean;
}

/** What Kassa asks of the processor's invoices (Stripe: src/processors/stripe-usage-invoices.ts). */
export interface ProcessorUsageInvoicing {
  /** Keeps a draft from being finalized without Kassa (`auto_advance: false`); `finalized` when it is no draft any more. */
  hold(invoiceId: string): Promise<'held' | 'finalized'>;
  /** Opens a draft invoice of the subscription for usage of its own (cancel now, make-up), once per key. */
  openFinal(processorSubscriptionId: string, idempotencyKey: string, kind: 'FINAL' | 'MAKEUP'): Promise<string>;
  /**
   * Adds each item the invoice does not carry yet and finalizes it (the processor then charges it).
   * `missed`: it was finalized without them (nothing added).
   */
  bill(invoiceId: string, items: readonly UsageInvoiceItem[]): Promise<'finalized' | 'missed'>;
}

export class ProcessorUsageFlow {
  constructor(
    private readonly uow: CommerceUnitOfWork,
    private readonly invoices: UsageInvoiceRepository,
    private readonly processor: ProcessorUsageInvoicing,
    private readonly metered: MeteredBilling,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  private async components(s: Subscription): Promise<MeteredComponent[]> {
    return s.priceId === null ? [] : this.metered.componentsOf(s.orgId, s.priceId);
  }

  /**
   * The parts of a period a plan change split (metered-plan-change.ts), up to `end`: each recorded
   * segment at its price, the rest at the subscription's price. Without segments, one part.
   */
  private async parts(s: Subscription, period: number, periodStart: Date, end: Date): Promise<UsagePart[]> {
    const segments = await this.uow.stores.usageSegments.list(s.id, period);
    const start = segments[0]?.start ?? periodStart;
    return usageParts(this.metered, { ...s, currentPeriodStart: start, currentPeriodEnd: end }, await this.components(s), segments, end);
  }

  /**
   * `invoice.created` of a renewal draft (billing_reason `subscription_cycle`), read back from the
   * processor: for a metered subscription, the draft is recorded and held until the grace window
   * of the period it follows has passed (billed at once when it already has). `unknown`: no Kassa
   * subscription has this processor id (yet); `ignored`: no metered component, or a draft that does
   * not follow Kassa's current period (logged).
   */
  async renewalDraft(draft: { processorSubscriptionId: string; invoiceId: string; periodStart: Date }): Promise<'applied' | 'ignored' | 'unknown'> {
    const found = await this.uow.stores.subscriptions.findByProcessorSubscription(draft.processorSubscriptionId);
    if (!found) return 'unknown';
    // The plan the buyer paid for: a change paid and still waiting for its item update is the plan after its segment.
    const s = paidForPlan(found, await this.uow.stores.planChanges.find(found.id));
    // A period whose part before a plan change was metered is billed for it, whatever the price now.
    if (!hasMeteredPart(await this.parts(s, s.periodNumber, s.currentPeriodStart, s.currentPeriodEnd))) return 'ignored';
    const now = this.clock.now();
    let row = await this.invoices.find(draft.invoiceId);
    if (!row) {
      // The draft bills the period after Kassa's current one: the usage it carries is the current period's.
      if (draft.periodStart.getTime() !== s.currentPeriodEnd.getTime()) {
        this.logger.warn({ subscriptionId: s.id, invoiceId: draft.invoiceId, periodStart: draft.periodStart, currentPeriodEnd: s.currentPeriodEnd }, 'Stripe: a renewal draft that does not follow the current period carries no usage');
        return 'ignored';
      }
      // A cancel-now whose invoice went out but whose cancel Stripe then refused billed the period
      // up to then; a cancel-now in the grace hour that closed usage before this draft is recorded
      // bills the whole period (and the hour after it), whether or not its invoice is recorded yet
      // (insertRenewal decides under the row lock): the draft then carries no usage (an empty range).
      const final = await this.invoices.findFor(s.id, 'FINAL', s.periodNumber);
      await this.invoices.insertRenewal({
        processorInvoiceId: draft.invoiceId,
        orgId: s.orgId,
        subscriptionId: s.id,
        kind: 'RENEWAL',
        usagePeriod: s.periodNumber,
        usageStart: final ? new Date(Math.min(final.usageEnd.getTime(), s.currentPeriodEnd.getTime())) : s.currentPeriodStart,
        usageEnd: s.currentPeriodEnd,
        dueAt: new Date(s.currentPeriodEnd.getTime() + USAGE_CLOSE_DELAY_MS),
        state: 'HELD',
        lines: null,
        createdAt: now,
        updatedAt: now,
        plan: { priceId: s.priceId, productName: s.productName },
      });
      row = await this.invoices.find(draft.invoiceId);
      if (!row) {
        this.logger.warn({ subscriptionId: s.id, invoiceId: draft.invoiceId, period: s.periodNumber }, 'Stripe: another renewal draft already carries this period\'s usage');
        return 'ignored';
      }
    }
    if (row.state === 'MISSED' && row.kind === 'RENEWAL' && !(await this.invoices.findFor(s.id, 'MAKEUP', row.usagePeriod))) {
      // Its make-up was never opened (Stripe failed then): a redelivered or late event tries again,
      // as the retry job does (retryMakeups); the idempotency key and the period's row keep it one.
      await this.makeUp(row);
      return 'applied';
    }
    if (row.state !== 'HELD') return 'applied';
    if ((await this.processor.hold(row.processorInvoiceId)) === 'finalized') {
      // Kassa finalized it itself and has not recorded it yet (a concurrent or interrupted bill): bill() sees its items.
      if (row.lines) {
        await this.bill(row);
        return 'applied';
      }
      await this.invoices.settle(row.processorInvoiceId, 'MISSED', now);
      this.logger.warn({ subscriptionId: s.id, invoiceId: row.processorInvoiceId }, 'Stripe finalized a renewal draft before Kassa could hold it: its usage goes on an invoice of its own');
      await this.makeUp({ ...row, state: 'MISSED' });
      return 'applied';
    }
    if (row.dueAt <= now) await this.bill(row);
    return 'applied';
  }

  /** The worker's pass: HELD usage invoices whose grace window has passed are closed, itemized and finalized. */
  async closeDue(limit = 100): Promise<number> {
    const ids = await this.invoices.listDue(this.clock.now(), limit);
    let billed = 0;
    for (const id of ids) {
      try {
        const row = await this.invoices.find(id);
        if (row?.state === 'HELD') {
          await this.bill(row);
          billed++;
        }
      } catch (err) {
        this.logger.error({ err, invoiceId: id }, 'usage invoice could not be billed; it stays due');
      }
    }
    return billed;
  }

  /**
   * The retry job's pass (`stripe-usage-makeups`): MISSED renewals whose make-up could not be
   * opened (the processor failing, or refusing while the renewal's `invoice.paid` was applied) are
   * leased and tried again — the same make-up (idempotency key `kassa_usage_makeup_{sub}_{period}`,
   * one MAKEUP row per period), so a retry racing a late event opens one invoice. A failed attempt
   * waits makeupBackoffMs; after MAKEUP_MAX_ATTEMPTS the job gives up (logged as an error; that
   * period's usage is then unbilled, docs/usage-billing.md). Returns the make-ups opened.
   */
  async retryMakeups(limit = 50): Promise<number> {
    const now = this.clock.now();
    const leased = await this.invoices.leaseMakeups(now, new Date(now.getTime() + MAKEUP_LEASE_MS), limit);
    let opened = 0;
    for (const row of leased) {
      try {
        await this.makeUp(row);
        opened++;
      } catch (err) {
        const attempts = row.makeupAttempts ?? 1;
        if (attempts >= MAKEUP_MAX_ATTEMPTS) {
          await this.invoices.makeupRetryAt(row.processorInvoiceId, null);
          this.logger.error({ err, invoiceId: row.processorInvoiceId, subscriptionId: row.subscriptionId, period: row.usagePeriod, attempts }, 'usage make-up invoice could not be opened; given up: that period\'s usage is not billed');
        } else {
          await this.invoices.makeupRetryAt(row.processorInvoiceId, new Date(this.clock.now().getTime() + makeupBackoffMs(attempts)));
          this.logger.warn({ err, invoiceId: row.processorInvoiceId, subscriptionId: row.subscriptionId, period: row.usagePeriod, attempts }, 'usage make-up invoice could not be opened; retried later');
        }
      }
    }
    return opened;
  }

  /**
   * Cancel now of a metered subscription the processor bills: the usage up to the cancel (`read`
   * gives the line inputs of a range, read by the caller after it closed the range) on an invoice of
   * its own, opened and finalized before the cancel (the processor charges the saved card), once: a
   * retry finds that invoice and adds nothing. Nothing is invoiced when that usage costs nothing.
   *
   * Which range (every accepted event in exactly one invoice):
   * - no renewal draft recorded for the current period (the usual case: a cancel inside the
   *   period): [currentPeriodStart, the cancel), FINAL of the current period;
   * - a cancel in the grace hour after the period's end, the period's renewal draft recorded
   *   (`invoice.created`): the draft bills the period, [currentPeriodStart, currentPeriodEnd), after
   *   the grace window as always; this invoice bills the rest, [currentPeriodEnd, the cancel) — the
   *   usage of the period the processor started at the period's end — as FINAL of the next period
   *   (its own idempotency key, credits drawn for that period, that period's included units).
   *   Before, nothing was invoiced then, and the events of that hour were billed nowhere.
   * - a FINAL of the current period opened by an earlier attempt (a retry) is that invoice, whatever
   *   was recorded since; a draft recorded after it carries no usage (renewalDraft);
   * - the draft recorded after this cancel closed usage (the cancel's Stripe calls straddling the end
   *   of the grace window, the draft recorded and billed meanwhile): it carries an empty range
   *   (insertRenewal, under the row lock the close took), and this invoice bills the whole range.
   */
  async billFinal(s: Subscription, range: { start: Date; end: Date }, read: (range: { start: Date; end: Date }) => Promise<LineInput[]>): Promise<void> {
    if (!s.processorSubscriptionId) return;
    let period = s.periodNumber;
    let usage = range;
    let row = await this.invoices.findFor(s.id, 'FINAL', period);
    if (!row) {
      // A draft recorded after this cancel closed usage has an empty range (insertRenewal): this
      // invoice bills the period then, even when that draft is billed before this invoice is recorded.
      const renewal = await this.invoices.findFor(s.id, 'RENEWAL', s.periodNumber);
      if (renewal && renewal.usageStart.getTime() < renewal.usageEnd.getTime()) {
        // The draft bills up to the period's end: only a cancel after it has usage left to bill.
        if (range.end.getTime() <= renewal.usageEnd.getTime()) return;
        period = s.periodNumber + 1;
        usage = { start: renewal.usageEnd, end: range.end };
        row = await this.invoices.findFor(s.id, 'FINAL', period);
      }
    }
    if (!row) {
      const now = this.clock.now();
      const lines = await read(usage);
      // Prepaid credits first, as the sandbox's cancel draws them (chargeFinalUsage): even when they
      // cover it all (no invoice then). Once per (subscription, period, meter) in the ledger, so a
      // retried cancel (a 503 before the invoice was recorded) finds its draw and draws nothing more.
      const credited = await this.uow.transaction((stores) => drawCredits(stores, { ...s, periodNumber: period }, lines, now));
      if (pricePeriod(credited).total === 0) return;
      const invoiceId = await this.processor.openFinal(s.processorSubscriptionId, `kassa_usage_final_${s.id}_${period}`, 'FINAL');
      await this.invoices.insert({
        processorInvoiceId: invoiceId,
        orgId: s.orgId,
        subscriptionId: s.id,
        kind: 'FINAL',
        usagePeriod: period,
        usageStart: usage.start,
        usageEnd: usage.end,
        dueAt: now,
        state: 'HELD',
        lines: credited,
        createdAt: now,
        updatedAt: now,
      });
      row = await this.invoices.findFor(s.id, 'FINAL', period);
    }
    if (row?.state === 'HELD') await this.bill(row);
  }

  /**
   * The line inputs a usage invoice carries (for its `invoice.paid` order), else undefined. Read
   * once stored, not only once FINALIZED: Stripe may send `invoice.paid` before Kassa has recorded
   * the finalization, and the items added are always the stored lines.
   */
  async linesOf(processorInvoiceId: string): Promise<{ kind: UsageInvoice['kind']; lines: LineInput[] } | undefined> {
    const row = await this.invoices.find(processorInvoiceId);
    return row && row.state !== 'MISSED' && row.lines ? { kind: row.kind, lines: row.lines } : undefined;
  }

  /**
   * Whether the checkout's coupon (the Stripe coupon on the subscription) may discount the usage
   * items: not when it is limited to products (USAGE lines name none, so Kassa's rule takes nothing
   * off them); otherwise Stripe discounts them as it discounts the fee, and the order's DISCOUNT is
   * what Stripe took (docs/discounts.md, "Usage renewals on Stripe").
   */
  private async usageDiscountable(s: Subscription): Promise<boolean> {
    const initial = await this.uow.stores.orders.find(s.orgId, s.initialOrderId);
    const sessionId = initial?.checkoutSessionId ?? s.checkoutSessionId;
    const session = sessionId ? await this.uow.stores.sessions.find(s.orgId, sessionId) : undefined;
    return (session?.pricing.discount?.productIds ?? null) === null;
  }

  /**
   * Closes the invoice's range for usage (a RENEWAL's period, under the subscription's row lock,
   * as the sandbox renewal does; a FINAL's was closed by the cancel), reads and stores its line
   * inputs once, and adds them as invoice items before finalizing.
   */
  private async bill(row: UsageInvoice): Promise<void> {
    const s = await this.uow.stores.subscriptions.findById(row.subscriptionId);
    if (!s) return;
    // A renewal draft (or its make-up) of a period that a cancel-now's FINAL invoice billed up to
    // some point carries only what follows it. renewalDraft sets that range when the FINAL came
    // first; this covers a draft recorded while the cancel was opening its invoice (between its
    // check for a draft and its FINAL row): the FINAL row, once written, decides.
    const final = row.kind === 'FINAL' ? undefined : await this.invoices.findFor(s.id, 'FINAL', row.usagePeriod);
    const usageStart = final ? new Date(Math.min(Math.max(final.usageEnd.getTime(), row.usageStart.getTime()), row.usageEnd.getTime())) : row.usageStart;
    let lines = row.lines;
    if (!lines) {
      // The plan as the close found it: a change committed before the close is in it and in its segments.
      let atClose = s;
      await this.uow.transaction(async (stores) => {
        // Waits for ingests holding the row FOR KEY SHARE; from its commit on, the period's late events are PERIOD_CLOSED.
        atClose = (await stores.subscriptions.lock(row.subscriptionId)) ?? s;
        await stores.subscriptions.closeUsagePeriod(row.subscriptionId, row.usagePeriod);
      });
      // The plan the range was used under. Still in its period: the locked row's (a change committed
      // before the close is in it, even one committed after the draft was recorded), or the plan of
      // a change paid in Stripe still waiting for its item update (paidForPlan). Moved on since (a
      // make-up billed after the renewal applied a PERIOD_END change, or after a change of the next
      // period): the plan recorded with the draft (UsageInvoice.plan). Before, the part after the
      // range's last change was priced at the subscription's plan at the close in both cases.
      const movedOn = atClose.periodNumber > row.usagePeriod && row.plan;
      const plan = movedOn ? row.plan! : paidForPlan(atClose, await this.uow.stores.planChanges.find(atClose.id));
      atClose = { ...atClose, priceId: plan.priceId, productName: plan.productName };
      // The parts are read after the close's commit: a plan change committed before it (under the
      // same row lock) is in them; none can follow (a change past the period's end is refused).
      const parts = await this.parts(atClose, row.usagePeriod, row.usageStart, row.usageEnd);
      const read =
        parts.length === 1
          ? await usageLineInputs(this.metered, { orgId: s.orgId, customerId: s.customerId, currentPeriodStart: usageStart, currentPeriodEnd: row.usageEnd, trialEnd: s.trialEnd ?? null }, parts[0]!.components)
          : await periodUsageLineInputs(this.metered, { ...atClose, currentPeriodStart: parts[0]!.start, currentPeriodEnd: row.usageEnd }, partsWithin(parts, { start: usageStart, end: row.usageEnd }), true);
      // Prepaid credits are drawn as the sandbox renewal draws them (the same ledger, once per
      // subscription, period and meter), in the transaction that stores the lines. A renewal draft
      // that follows a cancel-now's FINAL invoice of the same period (Stripe refused the cancel)
      // draws nothing more: that period's draw is the FINAL's.
      const draws = row.kind === 'FINAL' || !final;
      const now = this.clock.now();
      lines = await this.invoices.setLines(row.processorInvoiceId, (credits) => (draws ? drawCredits({ credits }, { ...s, periodNumber: row.usagePeriod }, read, now) : Promise.resolve(read)), now);
    }
    const priced = pricePeriod(lines);
    const discountable = await this.usageDiscountable(s);
    const items: UsageInvoiceItem[] = priced.lines.map((line, i) => {
      const detail = lineDetail(line, s.currency);
      return {
        key: `kassa_usage_${row.processorInvoiceId}_${i}`,
        description: detail ? `${line.description}: ${detail}` : line.description,
        amountCents: line.amount,
        currency: s.currency,
        periodStart: usageStart,
        periodEnd: row.usageEnd,
        meterId: line.meterId ?? '',
        discountable,
      };
    });
    const result = await this.processor.bill(row.processorInvoiceId, items);
    await this.invoices.settle(row.processorInvoiceId, result === 'finalized' ? 'FINALIZED' : 'MISSED', this.clock.now());
    if (result === 'missed') {
      if (row.kind === 'RENEWAL') {
        this.logger.warn({ subscriptionId: s.id, invoiceId: row.processorInvoiceId }, 'Stripe finalized a renewal draft without Kassa\'s items: its usage goes on an invoice of its own');
        await this.makeUp({ ...row, lines, state: 'MISSED' });
      } else {
        // Kassa's own invoices are held (auto_advance: false) until billed: only an edit in Stripe's Dashboard gets here.
        this.logger.error({ subscriptionId: s.id, invoiceId: row.processorInvoiceId, kind: row.kind }, 'Stripe finalized a usage invoice without Kassa\'s items: its usage is not billed');
      }
    }
  }

  /**
   * The usage of a MISSED renewal draft on an invoice of its own (MAKEUP), once per (subscription,
   * period): the same range and grace window, and the line inputs the draft stored, if it stored
   * any (their credits are drawn already); otherwise the close computes them as for the draft.
   * Billed at once when the grace window has passed, else by the job's pass at `dueAt`.
   */
  private async makeUp(missed: UsageInvoice): Promise<void> {
    const s = await this.uow.stores.subscriptions.findById(missed.subscriptionId);
    if (!s?.processorSubscriptionId) {
      await this.invoices.makeupDone(missed.processorInvoiceId);
      return;
    }
    let row = await this.invoices.findFor(s.id, 'MAKEUP', missed.usagePeriod);
    if (!row) {
      const invoiceId = await this.processor.openFinal(s.processorSubscriptionId, `kassa_usage_makeup_${s.id}_${missed.usagePeriod}`, 'MAKEUP');
      const now = this.clock.now();
      await this.invoices.insert({
        processorInvoiceId: invoiceId,
        orgId: s.orgId,
        subscriptionId: s.id,
        kind: 'MAKEUP',
        usagePeriod: missed.usagePeriod,
        usageStart: missed.usageStart,
        usageEnd: missed.usageEnd,
        dueAt: missed.dueAt,
        state: 'HELD',
        lines: missed.lines,
        createdAt: now,
        updatedAt: now,
        plan: missed.plan ?? null,
      });
      row = await this.invoices.findFor(s.id, 'MAKEUP', missed.usagePeriod);
    }
    // Opened: no retry pending (billing it, if that fails now, is the HELD row's: closeDue retries it).
    await this.invoices.makeupDone(missed.processorInvoiceId);
    if (row?.state === 'HELD' && row.dueAt <= this.clock.now()) await this.bill(row);
  }
}
