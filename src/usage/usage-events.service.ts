/**
 * Usage event ingest (`POST /v1/usage-events`): each event of a batch is accepted, a duplicate of
 * one stored before (same id in the organization: exactly once, whatever the retries), or rejected
 * with a reason; nothing is dropped without saying so. One read of the batch's customers, one of
 * their subscriptions, one insert.
 */
import { periodEnd } from '../commerce/billing-period.js';
import type { Customer, Subscription } from '../commerce/model.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Clock } from '../kernel/clock.js';
import type { EventPeriod, UsageEventRepository } from './usage.repository.js';
import type { Scalar, UsageEvent } from './usage.model.js';

/** Queued rollup delta rows one fold pass merges (one transaction; a batch of 1,000 events queues up to ~1,000 per meter). */
export const FOLD_ROWS = 20_000;
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
  ) {}

  async ingest(orgId: string, batch: ReadonlyArray<IncomingUsageEvent | IncomingCloudEvent>): Promise<IngestResult> {
    const now = this.clock.now();
    const incoming = batch.map((e) => (isCloudEvent(e) ? fromCloudEvent(e) : e));
    const customers = await this.customersOf(orgId, incoming);
    const subscriptions = await this.commerce.stores.subscriptions.listActiveForCustomers(orgId, [...new Set([...customers.values()].map((c) => c.id))]);
    const boundsOf = new Map<string, PeriodBounds>();
    const bounds = (customerId: string) => {
      let b = boundsOf.get(customerId);
      if (!b) boundsOf.set(customerId, (b = periodBounds(subscriptions.filter((s) => s.customerId === customerId), now)));
      return b;
    };

    const cutoff = this.retentionDays === undefined ? undefined : usageRetentionCutoff(now, this.retentionDays).getTime();
    const results: UsageEventResult[] = [];
    const toStore: UsageEvent[] = [];
    const periods = new Map<string, EventPeriod>();
    const firstOfId = new Map<string, number>();
    for (const e of incoming) {
      const reject = (code: RejectionCode, message: string) => results.push({ id: e.id, status: 'REJECTED', reason: { code, message } });
      const customer = customers.get(refKey(e.customer));
      if (!customer) {
        reject('UNKNOWN_CUSTOMER', 'customerId' in e.customer ? `No customer ${e.customer.customerId} in this organization` : `No customer with externalId ${e.customer.externalId}`);
        continue;
      }
      const at = Date.parse(e.timestamp);
      if (at > now.getTime() + FUTURE_SKEW_MS) {
        reject('FUTURE_TIMESTAMP', `The timestamp ${e.timestamp} is more than 5 minutes ahead of the server's clock`);
        continue;
      }
      if (cutoff !== undefined && at < cutoff) {
        // Its week may be dropped and its id pruned already: accepting it could store it twice.
        reject('PERIOD_CLOSED', `The timestamp ${e.timestamp} is before ${new Date(cutoff).toISOString()}: this installation keeps usage events for ${this.retentionDays} days`);
        continue;
      }
      const closed = periodRejection(at, bounds(customer.id), now.getTime());
      if (closed) {
        reject('PERIOD_CLOSED', closed);
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
      const b = bounds(customer.id);
      const period = eventPeriod(at, b);
      if (period !== undefined) periods.set(e.id, { subscriptionId: b.subscription!.id, period });
    }
    const { inserted, closed } = await this.events.insertNew(toStore, periods);
    for (const [id, index] of firstOfId) if (!inserted.has(id) && !closed.has(id)) results[index] = { id, status: 'DUPLICATE', reason: null };
    // The renewal job closed the event's period (to bill its usage) after this batch read the
    // subscription: refused, as every copy of it in the batch.
    results.forEach((r, i) => {
      if (closed.has(r.id)) results[i] = { id: r.id, status: 'REJECTED', reason: { code: 'PERIOD_CLOSED', message: 'The billing period of this event has been closed for billing; late events are accepted until 1 hour after a period\'s end, while it is open' } };
    });
    // An id already stored (before this batch, or by an earlier event of it) is a duplicate whatever
    // else is wrong with the event: a retry after its period closed is not refused.
    const rejectedIds = results.filter((r) => r.status === 'REJECTED').map((r) => r.id);
    if (rejectedIds.length > 0) {
      const stored = await this.events.storedIds(orgId, rejectedIds);
      results.forEach((r, i) => {
        if (r.status !== 'REJECTED' || !stored.has(r.id)) return;
        const storedBefore = !inserted.has(r.id) || (firstOfId.get(r.id) ?? Infinity) < i;
        if (storedBefore) results[i] = { id: r.id, status: 'DUPLICATE', reason: null };
      });
    }

    let accepted = 0;
    let duplicates = 0;
    for (const r of results) if (r.status === 'ACCEPTED') accepted++;
    else if (r.status === 'DUPLICATE') duplicates++;
    // After the events are stored: a retried batch (DUPLICATE) checks again, so no crossing is lost.
    // The subscriptions read above serve the usage thresholds (one read per batch, not two).
    if (this.alerts && accepted + duplicates > 0) await this.alerts.afterIngest(orgId, [...new Set([...customers.values()].map((c) => c.id))], { subscriptions });
    return { accepted, duplicates, rejected: results.length - accepted - duplicates, results };
  }

  /**
   * One pass of the `usage-meter-fold` job: up to FOLD_ROWS queued rollup deltas merged into the
   * meters' rollups (migration 0395); true when it folded anything (the next pass starts at once). Reads are exact
   * whether or not it ran (rollup + queued deltas); it keeps the queue, and so each read's tail, short.
   */
  async foldRollups(): Promise<boolean> {
    return (await this.events.foldRollupDeltas(FOLD_ROWS)) > 0;
  }

  private async customersOf(orgId: string, events: readonly IncomingUsageEvent[]): Promise<Map<string, Customer>> {
    const ids = new Set<string>();
    const externalIds = new Set<string>();
    for (const e of events) {
      if ('customerId' in e.customer) ids.add(e.customer.customerId);
      else externalIds.add(e.customer.externalId);
    }
    const found = await this.commerce.stores.customers.findByRefs(orgId, { ids: [...ids], externalIds: [...externalIds] });
    const byRef = new Map<string, Customer>();
    for (const c of found) {
      if (ids.has(c.id)) byRef.set(refKey({ customerId: c.id }), c);
      if (c.externalId !== null && externalIds.has(c.externalId)) byRef.set(refKey({ externalId: c.externalId }), c);
    }
    return byRef;
  }
}

const refKey = (ref: CustomerRef) => ('customerId' in ref ? `id:${ref.customerId}` : `ext:${ref.externalId}`);
