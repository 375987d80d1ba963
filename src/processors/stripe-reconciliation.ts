/**
 * Reconciliation from Stripe's event list (docs/card-processors.md): a missed or failed webhook
 * is caught up by the worker. Each pass leases the cursor (one worker at a time, however many
 * run), lists the events of the types Kassa handles created since the cursor (minus an overlap,
 * for events Stripe lists a little late), and feeds each through the same path as the webhook
 * endpoint (StripeEventService.process: once per event id, object read back from Stripe). The
 * cursor only moves past events that were applied; a failure stops the pass there.
 */
import type Stripe from 'stripe';
import type { Clock } from '../kernel/clock.js';
import { randomToken } from '../kernel/ids.js';
import type { Logger } from '../kernel/logger.js';
import type { StripeEventRepository } from './stripe-event.repository.js';
import type { StripeEventService } from './stripe-processor.js';
import { BACKGROUND, type StripeRetryPolicy, withStripeRetries } from './stripe-retry.js';

const CURSOR = 'events';
/** Stripe keeps events for 30 days: a cursor older than that has lost events. */
export const STRIPE_EVENT_RETENTION_S = 30 * 24 * 3600;

export interface ReconcilerOptions {
  /** Event types to read (those StripeEventService handles). */
  types: readonly Stripe.Event.Type[];
  /** Each pass re-reads this much before the cursor (events Stripe lists late); re-reads are skipped by id. */
  overlapS?: number;
  /** A pass reads at most this span of event creation times, so a long backlog is caught up in bounded steps. */
  windowS?: number;
  /** Where a first pass starts, before its first run. */
  initialLookbackS?: number;
  /** How long a pass may hold the cursor before another worker may take it over. */
  leaseMs?: number;
  /** Events per page of Stripe's list (at most 100). */
  pageSize?: number;
  /** Retries of the list call (BACKGROUND by default). */
  listRetries?: StripeRetryPolicy;
}

export class StripeEventReconciler {
  /** This worker's name on the cursor's lease. */
  private readonly owner = `reconciler_${randomToken(8)}`;
  private readonly overlapS: number;
  private readonly windowS: number;
  private readonly initialLookbackS: number;
  private readonly leaseMs: number;

  constructor(
    private readonly stripe: Stripe,
    private readonly events: StripeEventService,
    private readonly repo: StripeEventRepository,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly options: ReconcilerOptions,
  ) {
    this.overlapS = options.overlapS ?? 300;
    this.windowS = options.windowS ?? 6 * 3600;
    this.initialLookbackS = options.initialLookbackS ?? 3600;
    this.leaseMs = options.leaseMs ?? 5 * 60_000;
  }

  /** One pass; true when it applied events or a backlog remains (the worker then runs again at once). */
  async run(): Promise<boolean> {
    const now = this.clock.now();
    const nowS = Math.floor(now.getTime() / 1000);
    await this.repo.ensureCursor(CURSOR, nowS - this.initialLookbackS, now);
    const cursor = await this.repo.leaseCursor(CURSOR, this.owner, now, new Date(now.getTime() + this.leaseMs));
    if (!cursor) return false; // another worker is reconciling
    try {
      if (cursor.createdThrough < nowS - STRIPE_EVENT_RETENTION_S) {
        this.logger.error({ createdThrough: cursor.createdThrough }, "Stripe reconciliation is more than 30 days behind: Stripe no longer lists the oldest events it missed");
      }
      const from = cursor.createdThrough - this.overlapS;
      const until = Math.min(from + this.windowS, nowS + 1);
      const listed = await this.list(from, until);
      let through = until;
      let applied = 0;
      for (const [index, event] of listed.entries()) {
        // A long pass saves its progress and renews its lease as it goes; having lost the lease, it stops.
        if (index > 0 && index % 50 === 0 && !(await this.save(event.created))) return false;
        try {
          if ((await this.events.process(event)) === 'applied') applied++;
        } catch (err) {
          // Stripe or the database failed on this event: the cursor stays before it, the next pass retries it.
          this.logger.warn({ err, eventId: event.id, type: event.type }, 'Stripe reconciliation: an event could not be applied; retried on the next pass');
          through = event.created;
          break;
        }
      }
      const saved = await this.save(through);
      if (!saved) this.logger.warn('Stripe reconciliation: the cursor lease was taken over during a pass; its events were de-duplicated by id');
      if (applied > 0) this.logger.info({ applied, through }, 'Stripe reconciliation applied events whose webhooks had not arrived');
      return applied > 0 || (saved && through === until && until <= nowS);
    } finally {
      await this.repo.releaseCursor(CURSOR, this.owner);
    }
  }

  /** Every event created before `through` was applied: the cursor moves there (never back), the lease is renewed. */
  private save(through: number): Promise<boolean> {
    const now = this.clock.now();
    return this.repo.saveCursor(CURSOR, this.owner, through, new Date(now.getTime() + this.leaseMs), now);
  }

  /** Events created in [from, until), oldest first (Stripe lists newest first; pages through `starting_after`). */
  private async list(from: number, until: number): Promise<Stripe.Event[]> {
    const events: Stripe.Event[] = [];
    let startingAfter: string | undefined;
    for (;;) {
      const page = await withStripeRetries(
        () =>
          this.stripe.events.list({ types: [...this.options.types], created: { gte: from, lt: until }, limit: this.options.pageSize ?? 100, ...(startingAfter && { starting_after: startingAfter }) }),
        this.options.listRetries ?? BACKGROUND,
      );
      events.push(...page.data);
      if (!page.has_more || page.data.length === 0) break;
      startingAfter = page.data[page.data.length - 1]!.id;
    }
    return events.reverse();
  }
}
