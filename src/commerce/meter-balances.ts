/**
 * Balances of metered usage per customer and meter (issue 38 §6): what the customer may still
 * consume, read by `GET /v1/customers/{id}/meter-balances`, the metered access check and the
 * balance webhooks. Pure arithmetic in `balanceOf` (property-tested against an independent
 * recomputation), the reads in `MeterBalances`.
 *
 * A meter is in a customer's balances when the customer's ACTIVE subscription bills it (a metered
 * component of its price: basis SUBSCRIPTION) or when the customer holds credits of it (a credit
 * pack bought: a balance row). Order of consumption: the period's included units first, then the
 * prepaid credits; beyond both a SUBSCRIPTION meter bills the rest (overage) at the period close,
 * a PREPAID meter (no subscription bills it) is exhausted.
 *
 * - SUBSCRIPTION: the current period [currentPeriodStart, currentPeriodEnd) of the subscription
 *   (the one whose period started first, when several bill the meter). Credits are drawn at its
 *   close (metered-billing.ts `drawCredits`); until then the credits it will draw are shown as
 *   pending, so `creditsRemaining` is what the close will leave.
 * - PREPAID: consumption counted from the customer's first grant of the meter (`since`) until now;
 *   credits are never drawn by a close, the consumption is subtracted as it happens.
 */
import type { Clock } from '../kernel/clock.js';
import { iso, isoOrNull } from '../kernel/present.js';
import { creditUnitsWanted, thresholdReached, type MeteredBilling, type MeteredComponent } from './metered-billing.js';
import { includedUnitsShare } from './metered-plan-change.js';
import type { Subscription } from './model.js';
import type { CommerceUnitOfWork, MeterBalanceBasis } from './stores.js';

/** Events up to this far ahead of the clock are accepted by ingest (src/usage), so a prepaid range reaches that far. */
const FUTURE_TOLERANCE_MS = 5 * 60_000;

export type BalanceBasis = 'SUBSCRIPTION' | 'PREPAID';

export interface MeterBalance {
  meterId: string;
  meterName: string;
  basis: BalanceBasis;
  subscriptionId: string | null;
  /** The range consumption is counted over: a subscription's current period; for PREPAID the first grant until now (periodEnd null). */
  periodStart: Date;
  periodEnd: Date | null;
  /** The meter's quantity over the range (may be a decimal, e.g. a sum of `llm.cost`). */
  consumedUnits: number;
  includedUnits: number;
  includedRemaining: number;
  /** Credit units in the ledger, not yet drawn by a period close. */
  creditBalance: number;
  /** Credits this range's consumption takes (drawn at the close for SUBSCRIPTION). */
  creditsPending: number;
  creditsRemaining: number;
  /** includedRemaining + creditsRemaining: what may still be consumed before overage (or exhaustion). */
  remainingUnits: number;
  /** Consumption beyond included units and credits (SUBSCRIPTION: billed at the close; PREPAID: unpaid). */
  overageUnits: number;
  /** PREPAID only: no credit left. */
  exhausted: boolean;
}

/**
 * The arithmetic of one balance: included units first, then credits (a started unit draws a
 * whole credit), the rest overage. All results are whole units except `overageUnits`, which
 * keeps the consumption's fraction.
 */
export function balanceOf(input: { consumed: number; included: number; credits: number; basis: BalanceBasis }): Pick<
  MeterBalance,
  'includedRemaining' | 'creditsPending' | 'creditsRemaining' | 'remainingUnits' | 'overageUnits' | 'exhausted'
> {
  const { consumed, included, credits } = input;
  const includedRemaining = Math.max(0, included - Math.ceil(consumed));
  const wanted = creditUnitsWanted(consumed, included);
  const creditsPending = Math.min(credits, wanted);
  const creditsRemaining = credits - creditsPending;
  const overage = consumed - included - creditsPending;
  return {
    includedRemaining,
    creditsPending,
    creditsRemaining,
    remainingUnits: includedRemaining + creditsRemaining,
    overageUnits: overage > 0 ? Number(overage.toFixed(12)) : 0,
    exhausted: input.basis === 'PREPAID' && creditsRemaining === 0,
  };
}

/** One part of a period for one meter: [start, end) and its share of the meter's included units. */
export interface MeterPart {
  start: Date;
  end: Date;
  included: number;
}

/**
 * The parts of the current period that bill `meterId` (a period a metered plan change split:
 * metered-plan-change.ts), each with its share of its price's included units by the renewal's rule
 * (includedUnitsShare: time share, rounded once, half up; the last part's share runs to the
 * period's end). A part whose price does not bill the meter is left out (its usage of the meter is
 * billed by nobody). One part (no change): the whole period and the full included units.
 */
export function meterParts(parts: ReadonlyArray<{ start: Date; end: Date; components: ReadonlyArray<Pick<MeteredComponent, 'meterId' | 'includedUnits'>> }>, meterId: string, periodStart: Date, periodEnd: Date): MeterPart[] {
  const out: MeterPart[] = [];
  for (const [i, p] of parts.entries()) {
    const c = p.components.find((k) => k.meterId === meterId);
    if (!c) continue;
    const shareEnd = i === parts.length - 1 ? periodEnd : p.end;
    out.push({ start: p.start, end: p.end, included: parts.length === 1 ? c.includedUnits : includedUnitsShare(c.includedUnits, p.start, shareEnd, periodStart, periodEnd) });
  }
  return out;
}

/**
 * The balance of a period split into parts (meterParts), as the renewal bills it: each part's
 * consumption against its own share of the included units, the credits drawn once for what the
 * parts ask together (drawCredits). What may still be consumed is the last part's included units
 * left (an earlier part's leftover is not carried: the renewal bills each part on its own) plus
 * the credits left. `consumed` and `included` sum the parts. One part: exactly balanceOf.
 */
export function balanceOfParts(input: { parts: ReadonlyArray<{ consumed: number; included: number }>; credits: number; basis: BalanceBasis }): ReturnType<typeof balanceOf> & { consumed: number; included: number } {
  const { parts, credits } = input;
  if (parts.length === 1) return { consumed: parts[0]!.consumed, included: parts[0]!.included, ...balanceOf({ ...parts[0]!, credits, basis: input.basis }) };
  let wanted = 0;
  let over = 0;
  let consumed = 0;
  let included = 0;
  for (const p of parts) {
    wanted += creditUnitsWanted(p.consumed, p.included);
    if (p.consumed > p.included) over += p.consumed - p.included;
    consumed += p.consumed;
    included += p.included;
  }
  const last = parts[parts.length - 1];
  const includedRemaining = last ? Math.max(0, last.included - Math.ceil(last.consumed)) : 0;
  const creditsPending = Math.min(credits, wanted);
  const creditsRemaining = credits - creditsPending;
  const overage = over - creditsPending;
  return {
    consumed: Number(consumed.toFixed(12)),
    included,
    includedRemaining,
    creditsPending,
    creditsRemaining,
    remainingUnits: includedRemaining + creditsRemaining,
    overageUnits: overage > 0 ? Number(overage.toFixed(12)) : 0,
    exhausted: input.basis === 'PREPAID' && creditsRemaining === 0,
  };
}

export class MeterBalances {
  constructor(
    private readonly uow: CommerceUnitOfWork,
    /** The components, meters and quantities balances read (the threshold alerts read them too). */
    readonly metered: MeteredBilling,
    private readonly clock: Clock,
  ) {}


  /** The customer's balances, by meter id (see forCustomerRef). */
  async forCustomer(orgId: string, customerId: string): Promise<MeterBalance[]> {
    return (await this.forCustomerRef(orgId, customerId))?.balances ?? [];
  }

  /**
   * The customer named by `customerRef` (its CUS_… id first, else its externalId) and its
   * balances, by meter id; undefined when no such customer. One statement reads the customer, its
   * credits, its metered subscriptions with their period's segments and the meters' names
   * (CreditLedger.balanceBasis), then one quantity statement per meter and period part (one part
   * unless a metered plan change split the period): two statements for a customer of one meter,
   * where it was ~8.
   */
  async forCustomerRef(orgId: string, customerRef: string): Promise<{ customer: { id: string; externalId: string | null }; balances: MeterBalance[] } | undefined> {
    const basis = await this.uow.stores.credits.balanceBasis(orgId, customerRef);
    if (!basis.customer) return undefined;
    const customerId = basis.customer.id;
    // A meter billed by several subscriptions counts the one whose period started first (as ingest does): the basis comes in that order.
    const billing = new Map<string, { subscription: MeterBalanceBasis['subscriptions'][number] }>();
    for (const s of basis.subscriptions) {
      for (const component of s.components) if (!billing.has(component.meterId)) billing.set(component.meterId, { subscription: s });
    }
    const creditOf = new Map(basis.credits.map((c) => [c.meterId, c]));
    const meterIds = new Set<string>(billing.keys());
    for (const c of basis.credits) meterIds.add(c.meterId);
    const now = this.clock.now();
    const out: MeterBalance[] = [];
    for (const meterId of [...meterIds].sort()) {
      const credit = creditOf.get(meterId);
      const billed = billing.get(meterId);
      const basisKind: BalanceBasis = billed ? 'SUBSCRIPTION' : 'PREPAID';
      const periodStart = billed ? billed.subscription.currentPeriodStart : credit!.since;
      const periodEnd = billed ? billed.subscription.currentPeriodEnd : null;
      const end = periodEnd ?? new Date(now.getTime() + FUTURE_TOLERANCE_MS);
      const creditBalance = credit?.units ?? 0;
      // A period a metered plan change split: each part against its share of the included units.
      const parts = billed ? meterParts(basisParts(billed.subscription), meterId, billed.subscription.currentPeriodStart, billed.subscription.currentPeriodEnd) : [{ start: periodStart, end, included: 0 }];
      const read: Array<{ consumed: number; included: number }> = [];
      for (const p of parts) read.push({ consumed: p.end > p.start ? await this.metered.quantities.quantity(orgId, meterId, customerId, p.start, p.end) : 0, included: p.included });
      const { consumed, included, ...b } = balanceOfParts({ parts: read, credits: creditBalance, basis: basisKind });
      out.push({
        meterId,
        meterName: basis.meterNames.get(meterId) ?? meterId,
        basis: basisKind,
        subscriptionId: billed?.subscription.id ?? null,
        periodStart,
        periodEnd,
        consumedUnits: consumed,
        includedUnits: included,
        creditBalance,
        ...b,
      });
    }
    return { customer: basis.customer, balances: out };
  }
}

/** A basis subscription's current period in parts: its usage segments at their prices, then the current price (one part without a change). */
function basisParts(s: MeterBalanceBasis['subscriptions'][number]): Parameters<typeof meterParts>[0] {
  const parts: Array<Parameters<typeof meterParts>[0][number]> = s.segments.map((g) => ({ start: g.start, end: g.end, components: g.components }));
  parts.push({ start: s.segments.length > 0 ? s.segments[s.segments.length - 1]!.end : s.currentPeriodStart, end: s.currentPeriodEnd, components: s.components });
  return parts;
}

type PeriodParts = Array<{ start: Date; end: Date; components: readonly MeteredComponent[] }>;

/** A subscription's current period in parts: its usage segments at their prices, then the current price (one part without a change). */
async function subscriptionPeriodParts(uow: CommerceUnitOfWork, metered: MeteredBilling, s: Subscription): Promise<PeriodParts> {
  const segments = await uow.stores.usageSegments.list(s.id, s.periodNumber);
  const current = s.priceId === null ? [] : await metered.componentsOf(s.orgId, s.priceId);
  const parts: PeriodParts = [];
  for (const seg of segments) parts.push({ start: seg.start, end: seg.end, components: seg.priceId === null ? [] : await metered.componentsOf(s.orgId, seg.priceId) });
  parts.push({ start: segments.length > 0 ? segments[segments.length - 1]!.end : s.currentPeriodStart, end: s.currentPeriodEnd, components: current });
  return parts;
}

/** A balance as the API shows it (`MeterBalance` in openapi/merchant.yaml). */
export const presentMeterBalance = (b: MeterBalance) => ({
  meterId: b.meterId,
  meterName: b.meterName,
  basis: b.basis,
  subscriptionId: b.subscriptionId,
  periodStart: iso(b.periodStart),
  periodEnd: isoOrNull(b.periodEnd),
  consumedUnits: b.consumedUnits,
  includedUnits: b.includedUnits,
  includedRemaining: b.includedRemaining,
  creditBalance: b.creditBalance,
  creditsPending: b.creditsPending,
  creditsRemaining: b.creditsRemaining,
  remainingUnits: b.remainingUnits,
  overageUnits: b.overageUnits,
  exhausted: b.exhausted,
});

/**
 * Balance webhooks (issue 38 §6): `meter.credits_exhausted` when a customer's consumption used up
 * their credits of a meter, checked after each usage-event batch for the batch's customers that
 * hold credits (one read of the credit rows; customers without credits cost nothing more). Once
 * per crossing: the event is queued in the transaction whose insert claims its row in
 * usage_balance_alerts (primary key customer, meter, period key, kind), so of concurrent batches
 * one claims and emits, the others insert nothing. A retried batch (its events DUPLICATE) checks
 * again, so an alert lost to a failure after the events were stored is sent by the retry.
 */
export class BalanceAlerts {
  constructor(
    private readonly uow: CommerceUnitOfWork,
    private readonly balances: MeterBalances,
    private readonly clock: Clock,
  ) {}

  /**
   * After a batch: credits exhausted, then usage thresholds. `subscriptions`: the batch's
   * customers' ACTIVE subscriptions, when ingest read them already (else read here).
   */
  async afterIngest(orgId: string, customerIds: readonly string[], known: { subscriptions?: Subscription[] } = {}): Promise<number> {
    if (customerIds.length === 0) return 0;
    const sent = await this.creditsExhausted(orgId, customerIds);
    return sent + (await this.thresholdsCrossed(orgId, known.subscriptions ?? (await this.uow.stores.subscriptions.listActiveForCustomers(orgId, [...customerIds]))));
  }

  private async creditsExhausted(orgId: string, customerIds: readonly string[]): Promise<number> {
    const credited = await this.uow.stores.credits.customersWithCredits(orgId, customerIds);
    let sent = 0;
    for (const customerId of credited) {
      for (const b of await this.balances.forCustomer(orgId, customerId)) {
        if (b.creditBalance === 0 || b.creditsRemaining > 0) continue;
        // SUBSCRIPTION: once per period; PREPAID: once per balance held (a new pack is a new one).
        const periodKey = b.basis === 'SUBSCRIPTION' ? `sub:${b.subscriptionId}:${b.periodStart.toISOString()}` : `prepaid:${b.periodStart.toISOString()}:${b.creditBalance}`;
        const now = this.clock.now();
        const emitted = await this.uow.transaction(async (stores) => {
          if (!(await stores.credits.claimAlert({ orgId, customerId, meterId: b.meterId, periodKey, kind: 'credits_exhausted', at: now }))) return false;
          const customer = await stores.customers.find(orgId, customerId);
          await stores.emit({ orgId, type: 'meter.credits_exhausted', data: { customer: { customerId, externalId: customer?.externalId ?? null }, balance: presentMeterBalance(b) } }, now);
          return true;
        });
        if (emitted) sent++;
      }
    }
    return sent;
  }

  /**
   * `meter.threshold_crossed` (issue 38 §6): for each ACTIVE subscription of the batch's customers
   * whose price has a metered component with thresholds (percents of its included units), each
   * threshold the consumption of the current period reached, once per (subscription, period,
   * meter, threshold). The claim is the same as for credits: a primary-key insert into
   * usage_balance_alerts (kind `threshold:<percent>`, period key the subscription and its period
   * start) in the transaction that queues the event; concurrent batches each read a quantity
   * that includes their own events, so the last to commit sees every crossing, and of those that
   * see it one claims it. Before reading any quantity, one read of the claims drops components
   * whose thresholds were all sent this period, so a customer past their last threshold costs no
   * quantity read per batch. Subscriptions without thresholds cost nothing beyond their price's
   * components (read through the catalog).
   */
  private async thresholdsCrossed(orgId: string, subscriptions: readonly Subscription[]): Promise<number> {
    const metered = this.balances.metered;
    const componentsOf = new Map<string, Promise<MeteredComponent[]>>();
    const candidates: Array<{ s: Subscription & { customerId: string }; component: MeteredComponent & { thresholds: number[] }; periodKey: string }> = [];
    for (const s of subscriptions) {
      if (s.priceId === null || s.customerId === null || s.orgId !== orgId) continue;
      let components = componentsOf.get(s.priceId);
      if (!components) componentsOf.set(s.priceId, (components = metered.componentsOf(orgId, s.priceId)));
      for (const component of await components) {
        if (!component.thresholds || component.thresholds.length === 0 || component.includedUnits < 1) continue;
        candidates.push({ s: s as Subscription & { customerId: string }, component: component as MeteredComponent & { thresholds: number[] }, periodKey: thresholdPeriodKey(s) });
      }
    }
    if (candidates.length === 0) return 0;
    const claimed = await this.uow.stores.credits.claimedAlerts(
      orgId,
      candidates.map((c) => ({ customerId: c.s.customerId, meterId: c.component.meterId, periodKey: c.periodKey })),
    );
    let sent = 0;
    for (const { s, component, periodKey } of candidates) {
      const key = `${s.customerId}|${component.meterId}|${periodKey}|`;
      const open = component.thresholds.filter((t) => !claimed.has(key + thresholdKind(t)));
      if (open.length === 0) continue;
      // A period a metered plan change split: the parts' consumption against the included units the
      // renewal grants them (meterParts), as the balances count them; one part otherwise.
      const parts = meterParts(await subscriptionPeriodParts(this.uow, metered, s), component.meterId, s.currentPeriodStart, s.currentPeriodEnd);
      let consumed = 0;
      let includedUnits = 0;
      for (const p of parts) {
        includedUnits += p.included;
        if (p.end > p.start) consumed += await metered.quantities.quantity(orgId, component.meterId, s.customerId, p.start, p.end);
      }
      if (includedUnits < 1) continue;
      const crossed = open.filter((t) => consumed > 0 && thresholdReached(consumed, includedUnits, t));
      if (crossed.length === 0) continue;
      // Read outside the transaction: the meter is the usage module's, on the pool (PGlite has one connection).
      const meter = await metered.meters.find(orgId, component.meterId);
      const now = this.clock.now();
      sent += await this.uow.transaction(async (stores) => {
        let emitted = 0;
        const customer = await stores.customers.find(orgId, s.customerId);
        for (const percent of crossed) {
          if (!(await stores.credits.claimAlert({ orgId, customerId: s.customerId, meterId: component.meterId, periodKey, kind: thresholdKind(percent), at: now }))) continue;
          await stores.emit(
            {
              orgId,
              type: 'meter.threshold_crossed',
              data: {
                customer: { customerId: s.customerId, externalId: customer?.externalId ?? null },
                subscriptionId: s.id,
                meter: { meterId: component.meterId, meterName: meter?.name ?? component.meterId },
                period: { start: iso(s.currentPeriodStart), end: iso(s.currentPeriodEnd) },
                threshold: { percent, units: (includedUnits * percent) / 100 },
                consumedUnits: consumed,
                includedUnits,
              },
            },
            now,
          );
          emitted++;
        }
        return emitted;
      });
    }
    return sent;
  }
}

/** A subscription period's key in usage_balance_alerts (the credits alert of a SUBSCRIPTION meter uses the same). */
const thresholdPeriodKey = (s: Subscription) => `sub:${s.id}:${s.currentPeriodStart.toISOString()}`;
const thresholdKind = (percent: number) => `threshold:${percent}`;
