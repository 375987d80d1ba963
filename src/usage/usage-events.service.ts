/**
 * Usage event ingest (`POST /v1/usage-events`): each event of a batch is accepted, a duplicate of
 * one stored before (same id in the organization: exactly once, whatever the retries), or rejected
 * with a reason; nothing is dropped without saying so. One read of the batch's customers, one of
 * their subscriptions, one insert.
 */
import { periodEnd } from '../commerce/billing-period.js';
import type { Subscription } from '../commerce/model.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Clock } from '../kernel/clock.js';
import type { EventPeriod, FoldPass, UsageEventRepository } from './usage.repository.js';
import type { Scalar, UsageEvent } from './usage.model.js';

/**
 * Queued rollup delta rows one fold pass merges per queue (one transaction; a batch of 1,000 events
 * queues up to ~1,000 per meter). The more rows of one (meter, customer, hour) a pass merges, the
 * fewer rollup upserts per event: 50,000 (was 20,000) with the job's wait (foldRound) cut the fold's
 * PostgreSQL CPU per ingested event (docs/benchmarks.md, issue 38, round 26).
 */
export const FOLD_ROWS = 50_000;
/**
 * Rows a fold worker deletes from the queues between two VACUUMs of them (UsageEventService.foldRollups):
 * ~1.7 s of a 30,000 events/s ingest naming each customer once per batch, two meters.
 */
export const QUEUE_VACUUM_ROWS = 100_000;
/** How far ahead of Kassa's clock an event may be stamped (client clocks drift). */
export const FUTURE_SKEW_MS = 5 * 60_000;
/** How long after a billing period's end its late events are still accepted. */
export const PERIOD_GRACE_MS = 60 * 60_000;
/** The smallest USAGE_EVENT_RETENTION_DAYS (src/config.ts): a monthly period and the one before it, with the grace hour. */
export const MIN_USAGE_RETENTION_DAYS = 63;

/**
 * With USAGE_EVENT_RETENTION_DAYS (migration 0380): 00:00 UTC of the day `days` before now.
 * Events stamped before it are refused (PERIOD_CLOSED), older weeks are dropped, and the
 * deduplication ids before it are pruned (src/usage/event-storage.job.ts).
 */
export const usageRetentionCutoff = (now: Date, days: number): Date => {
  const d = new Date(now.getTime() - days * 86_400_000);
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));
};

export type CustomerRef = { customerId: string } | { externalId: string };

export interface IncomingUsageEvent {
  id: string;
  customer: CustomerRef;
  name: string;
  timestamp: string;
  properties?: Record<string, Scalar>;
}

export interface IncomingCloudEvent {
  specversion: '1.0';
  id: string;
  source: string;
  type: string;
  time: string;
  subject: string;
  datacontenttype?: string;
  data?: Record<string, Scalar>;
}

export type RejectionCode = 'UNKNOWN_CUSTOMER' | 'FUTURE_TIMESTAMP' | 'PERIOD_CLOSED';

export interface UsageEventResult {
  id: string;
  status: 'ACCEPTED' | 'DUPLICATE' | 'REJECTED';
  reason: { code: RejectionCode; message: string } | null;
}

export interface IngestResult {
  accepted: number;
  duplicates: number;
  rejected: number;
  results: UsageEventResult[];
}

/** A CloudEvent is read as a usage event: type → name, time → timestamp, subject → externalId, data → properties. */
export function fromCloudEvent(e: IncomingCloudEvent): IncomingUsageEvent {
  return { id: e.id, customer: { externalId: e.subject }, name: e.type, timestamp: e.time, properties: e.data ?? {} };
}

const isCloudEvent = (e: IncomingUsageEvent | IncomingCloudEvent): e is IncomingCloudEvent => 'specversion' in e;

/** Where a customer's current billing period starts, and the one before it. */
export interface PeriodBounds {
  currentStart: number;
  previousStart: number;
  /** The subscription whose periods these are (none: UTC calendar months). */
  subscription?: { id: string; periodNumber: number; currentEnd: number };
}

/**
 * The customer's billing periods: those of their ACTIVE subscription (the one whose current period
 * started first, when several), else UTC calendar months.
 */
export function periodBounds(subscriptions: readonly Subscription[], now: Date): PeriodBounds {
  let chosen: Subscription | undefined;
  for (const s of subscriptions) if (!chosen || s.currentPeriodStart < chosen.currentPeriodStart) chosen = s;
  if (chosen) {
    // Period p starts where period p - 1 ends (src/commerce/billing-period.ts).
    return {
      currentStart: chosen.currentPeriodStart.getTime(),
      previousStart: periodEnd(chosen, chosen.periodNumber - 2).getTime(),
      subscription: { id: chosen.id, periodNumber: chosen.periodNumber, currentEnd: chosen.currentPeriodEnd.getTime() },
    };
  }
  const currentStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  return { currentStart, previousStart: Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1) };
}

/**
 * The number of the subscription period an event stamped `at` (not refused by periodRejection)
 * falls in: the current one, the one before, or the next when the renewal has not run yet.
 */
export function eventPeriod(at: number, bounds: PeriodBounds): number | undefined {
  const s = bounds.subscription;
  if (!s) return undefined;
  if (at >= s.currentEnd) return s.periodNumber + 1;
  return at >= bounds.currentStart ? s.periodNumber : s.periodNumber - 1;
}

/** Why an event stamped `at` is refused for its period, or null when its period takes it. */
export function periodRejection(at: number, bounds: PeriodBounds, now: number): string | null {
  if (at >= bounds.currentStart) return null;
  const closedAt = new Date(bounds.currentStart).toISOString();
  if (at >= bounds.previousStart) {
    if (now < bounds.currentStart + PERIOD_GRACE_MS) return null;
    return `The billing period of this event closed at ${closedAt}; late events are accepted until 1 hour after a period's end`;
  }
  return `The billing period of this event closed before ${new Date(bounds.previousStart).toISOString()}`;
}

export class UsageEventService {
  constructor(
    private readonly events: UsageEventRepository,
    private readonly commerce: CommerceUnitOfWork,
    private readonly clock: Clock,
    /** Balance webhooks (src/commerce/meter-balances.ts BalanceAlerts), checked after each batch for its customers. */
    private readonly alerts?: { afterIngest(orgId: string, customerIds: readonly string[], known: { subscriptions: Subscription[] }): Promise<unknown> },
    /** USAGE_EVENT_RETENTION_DAYS; undefined: events are kept for ever. */
    private readonly retentionDays?: number,
    /** The fold's rows between two VACUUMs of the queues (tests set it lower). */
    private readonly queueVacuumRows = QUEUE_VACUUM_ROWS,
  ) {}

  async ingest(orgId: string, batch: ReadonlyArray<IncomingUsageEvent | IncomingCloudEvent>): Promise<IngestResult> {
    const now = this.clock.now();
    const nowMs = now.getTime();
    const incoming = batch.map((e) => (isCloudEvent(e) ? fromCloudEvent(e) : e));
    const customers = await this.customersOf(orgId, incoming);
    const customerIds = customers.ids;
    const subscriptions = await this.commerce.stores.subscriptions.listActiveForCustomers(orgId, customerIds);
    const subscriptionsOf = new Map<string, Subscription[]>();
    for (const s of subscriptions) {
      if (s.customerId === null) continue;
      const list = subscriptionsOf.get(s.customerId);
      if (list) list.push(s);
      else subscriptionsOf.set(s.customerId, [s]);
    }
    const bounds = (customer: BatchCustomer) => (customer.bounds ??= periodBounds(subscriptionsOf.get(customer.id) ?? [], now));

    const cutoff = this.retentionDays === undefined ? undefined : usageRetentionCutoff(now, this.retentionDays).getTime();
    const results: UsageEventResult[] = [];
    const toStore: UsageEvent[] = [];
    const periods = new Map<string, EventPeriod>();
    const firstOfId = new Map<string, number>();
    for (const e of incoming) {
      const ref = e.customer;
      const customer = 'customerId' in ref ? customers.byId.get(ref.customerId) : customers.byExternalId.get(ref.externalId);
      if (!customer) {
        results.push(rejected(e.id, 'UNKNOWN_CUSTOMER', 'customerId' in ref ? `No customer ${ref.customerId} in this organization` : `No customer with externalId ${ref.externalId}`));
        continue;
      }
      const at = Date.parse(e.timestamp);
      if (at > nowMs + FUTURE_SKEW_MS) {
        results.push(rejected(e.id, 'FUTURE_TIMESTAMP', `The timestamp ${e.timestamp} is more than 5 minutes ahead of the server's clock`));
        continue;
      }
      if (cutoff !== undefined && at < cutoff) {
        // Its week may be dropped and its id pruned already: accepting it could store it twice.
        results.push(rejected(e.id, 'PERIOD_CLOSED', `The timestamp ${e.timestamp} is before ${new Date(cutoff).toISOString()}: this installation keeps usage events for ${this.retentionDays} days`));
        continue;
      }
      const b = bounds(customer);
      const closed = periodRejection(at, b, nowMs);
      if (closed) {
        results.push(rejected(e.id, 'PERIOD_CLOSED', closed));
        continue;
      }
      if (firstOfId.has(e.id)) {
        // The same id twice in one batch: the first occurrence is the event.
        results.push({ id: e.id, status: 'DUPLICATE', reason: null });
        continue;
      }
      firstOfId.set(e.id, results.length);
      results.push({ id: e.id, status: 'ACCEPTED', reason: null });
      toStore.push({ orgId, id: e.id, customerId: customer.id, name: e.name, timestamp: new Date(at), properties: e.properties ?? {}, receivedAt: now });
      const period = eventPeriod(at, b);
      // One EventPeriod per (customer, period) of the batch, shared by its events.
      if (period !== undefined) periods.set(e.id, (customer.periods ??= new Map()).get(period) ?? setPeriod(customer.periods, period, b.subscription!.id));
    }
    const { stored, closed } = await this.events.insertNew(toStore, periods);
    for (const id of stored) {
      const index = firstOfId.get(id);
      if (index !== undefined) results[index] = { id, status: 'DUPLICATE', reason: null };
    }
    // The renewal job closed the event's period (to bill its usage) after this batch read the
    // subscription: refused, as every copy of it in the batch.
    if (closed.size > 0) {
      results.forEach((r, i) => {
        if (closed.has(r.id)) results[i] = rejected(r.id, 'PERIOD_CLOSED', 'The billing period of this event has been closed for billing; late events are accepted until 1 hour after a period\'s end, while it is open');
      });
    }
    const insertedHere = (id: string) => firstOfId.has(id) && !stored.has(id) && !closed.has(id);
    // An id already stored (before this batch, or by an earlier event of it) is a duplicate whatever
    // else is wrong with the event: a retry after its period closed is not refused.
    const rejectedIds = results.filter((r) => r.status === 'REJECTED').map((r) => r.id);
    if (rejectedIds.length > 0) {
      const stored = await this.events.storedIds(orgId, rejectedIds);
      results.forEach((r, i) => {
        if (r.status !== 'REJECTED' || !stored.has(r.id)) return;
        const storedBefore = !insertedHere(r.id) || (firstOfId.get(r.id) ?? Infinity) < i;
        if (storedBefore) results[i] = { id: r.id, status: 'DUPLICATE', reason: null };
      });
    }

    let accepted = 0;
    let duplicates = 0;
    for (const r of results) if (r.status === 'ACCEPTED') accepted++;
    else if (r.status === 'DUPLICATE') duplicates++;
    // After the events are stored: a retried batch (DUPLICATE) checks again, so no crossing is lost.
    // The subscriptions read above serve the usage thresholds (one read per batch, not two).
    if (this.alerts && accepted + duplicates > 0) await this.alerts.afterIngest(orgId, customerIds, { subscriptions });
    return { accepted, duplicates, rejected: results.length - accepted - duplicates, results };
  }

  /**
   * One fold pass: up to FOLD_ROWS queued rollup deltas of one organization merged into the
   * meters' rollups (migration 0395); true when it folded anything (the tests' and the bench's
   * drain loop; the job runs foldRound). Reads are exact whether or not it ran (rollup + queued
   * deltas); it keeps the queue, and so each read's tail, short.
   */
  async foldRollups(): Promise<boolean> {
    return (await this.foldPass()).rows > 0;
  }

  /**
   * The `usage-meter-fold` job's run: one pass for each organization with a queue (round-robin,
   * until a pass finds none or comes back to one it folded); true — run again at once — only when
   * a pass was full. Otherwise the job waits for its interval and the queues fill meanwhile: a
   * pass that starts again as soon as the last ended merges a few batches each, one rollup upsert
   * per (meter, customer, hour) for every few delta rows (figures in docs/benchmarks.md, issue
   * 38, round 26). Reads stay exact (rollup + queue);
   * a customer's queued tail is at most the interval's batches.
   */
  async foldRound(): Promise<boolean> {
    const folded = new Set<string>();
    let full = false;
    for (;;) {
      const pass = await this.foldPass();
      if (pass.orgId === undefined || pass.rows === 0) return full;
      full ||= pass.full;
      if (folded.has(pass.orgId)) return full;
      folded.add(pass.orgId);
    }
  }

  private async foldPass(): Promise<FoldPass> {
    const pass = await this.events.foldRollupPass(FOLD_ROWS);
    const rows = pass.rows;
    // The queues are append-and-delete tables, and a pass finds its rows by a scan from the
    // table's start: every row deleted since the last VACUUM lies in that scan's path (the
    // prune of a page keeps its dead items until a VACUUM), and the heap grows instead of
    // reusing their space. Autovacuum visits a database at most once per autovacuum_naptime
    // (1 min by default; not at all when it is off) — at 30,000 events/s a queue deletes ~3.6M rows
    // a minute, and each pass scanned more of them than the last (docs/benchmarks.md, round 22).
    // So the worker that deleted them vacuums the queues itself after every QUEUE_VACUUM_ROWS.
    this.foldedSinceVacuum += rows;
    if (this.foldedSinceVacuum >= this.queueVacuumRows) {
      this.foldedSinceVacuum = 0;
      await this.events.vacuumRollupQueues();
    }
    return pass;
  }

  /** Rows this instance's fold passes deleted since its last VACUUM of the queues. */
  private foldedSinceVacuum = 0;

  /** The batch's customers by the id or the externalId that names them (one read of both). */
  private async customersOf(orgId: string, events: readonly IncomingUsageEvent[]): Promise<{ ids: string[]; byId: Map<string, BatchCustomer>; byExternalId: Map<string, BatchCustomer> }> {
    const ids = new Set<string>();
    const externalIds = new Set<string>();
    for (const e of events) {
      if ('customerId' in e.customer) ids.add(e.customer.customerId);
      else externalIds.add(e.customer.externalId);
    }
    const found = await this.commerce.stores.customers.idsByRefs(orgId, { ids: [...ids], externalIds: [...externalIds] });
    const byId = new Map<string, BatchCustomer>();
    const byExternalId = new Map<string, BatchCustomer>();
    for (const c of found) {
      const customer: BatchCustomer = { id: c.id };
      if (ids.has(c.id)) byId.set(c.id, customer);
      if (c.externalId !== null && externalIds.has(c.externalId)) byExternalId.set(c.externalId, customer);
    }
    return { ids: found.map((c) => c.id), byId, byExternalId };
  }
}

/** A customer a batch names, with what its events share: its billing periods, found on first use. */
interface BatchCustomer {
  id: string;
  bounds?: PeriodBounds;
  periods?: Map<number, EventPeriod>;
}

const rejected = (id: string, code: RejectionCode, message: string): UsageEventResult => ({ id, status: 'REJECTED', reason: { code, message } });

function setPeriod(periods: Map<number, EventPeriod>, period: number, subscriptionId: string): EventPeriod {
  const p = { subscriptionId, period };
  periods.set(period, p);
  return p;
}
