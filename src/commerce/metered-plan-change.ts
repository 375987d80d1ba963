/**
 * Plan changes of metered subscriptions (issue 39 item 3 × issue 38 §5; docs/plan-changes.md
 * "Metered prices"). The fixed fee prorates as any change does (proration.ts); the usage stays
 * billed in arrears at the renewal, split where the price changed, as Stripe bills a metered item
 * whose price changes mid-period:
 *  - an immediate change to another price, when either price has metered components, records the
 *    part of the period it leaves as a usage segment, [the previous change or the period's start,
 *    the change's `prorationDate`) at the old price (migration 0450);
 *  - the renewal that closes the period bills each segment's usage at its price's components, then
 *    [the last segment's end, the period's end) at the current price: one USAGE line per component
 *    and part, the tiers applied over that part's own usage (Stripe: per price item);
 *  - included units of a split period are prorated by time, the fee's rule: a part's share is
 *    includedUnits × (part's seconds / period's seconds), rounded once, half up, to whole units (the
 *    last part counts to the period's end, even when a cancel-now reads it to the cancel);
 *  - a period without a change bills as before (one line per component, the full included units).
 * A change at the period's end (`PERIOD_END`) needs none of this: the closing period is billed on
 * the old price, the next one on the new.
 */
import { conflict } from '../kernel/errors.js';
import { longDateUtc } from '../kernel/time-zone.js';
import { roundHalfUp, type LineInput } from './pricing.js';
import { usageLineInputs, type MeteredBilling, type MeteredComponent } from './metered-billing.js';
import type { Subscription } from './model.js';
import type { PlanChangeQuote } from './plan-change.js';
import type { PendingPlanChange, UsageSegment } from './stores.js';

/** One part of a period and the price whose metered components bill its usage. */
export interface UsagePart {
  priceId: string | null;
  productName: string;
  /** Usage is read over [start, end). */
  start: Date;
  end: Date;
  /** The part's share of the period's included units is [start, shareEnd) over the period. */
  shareEnd: Date;
  components: readonly MeteredComponent[];
}

const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

/**
 * A part's included units: includedUnits × seconds of [start, shareEnd) / seconds of the period,
 * counted in whole seconds as the proration counts them, rounded once, half up.
 */
export function includedUnitsShare(includedUnits: number, start: Date, shareEnd: Date, periodStart: Date, periodEnd: Date): number {
  const length = seconds(periodEnd) - seconds(periodStart);
  const from = Math.max(seconds(start), seconds(periodStart));
  const to = Math.min(seconds(shareEnd), seconds(periodEnd));
  if (length <= 0 || includedUnits === 0) return includedUnits;
  if (to <= from) return 0;
  return roundHalfUp({ n: BigInt(includedUnits) * BigInt(to - from), d: BigInt(length) });
}

/**
 * The parts of the current period up to `end`: each recorded segment at its price, then the rest
 * at the subscription's current price (`components`). No segments: one part, the whole period.
 */
export async function usageParts(
  billing: MeteredBilling,
  s: Pick<Subscription, 'orgId' | 'priceId' | 'productName' | 'currentPeriodStart' | 'currentPeriodEnd'>,
  components: readonly MeteredComponent[],
  segments: readonly UsageSegment[],
  end: Date,
): Promise<UsagePart[]> {
  const parts: UsagePart[] = [];
  for (const seg of segments) {
    parts.push({ priceId: seg.priceId, productName: seg.productName, start: seg.start, end: seg.end, shareEnd: seg.end, components: seg.priceId === null ? [] : await billing.componentsOf(s.orgId, seg.priceId) });
  }
  const start = segments.length > 0 ? segments[segments.length - 1]!.end : s.currentPeriodStart;
  parts.push({ priceId: s.priceId, productName: s.productName, start, end, shareEnd: s.currentPeriodEnd, components });
  return parts;
}

/** Whether any part of the period is billed for usage (a price with metered components). */
export function hasMeteredPart(parts: readonly UsagePart[]): boolean {
  return parts.some((p) => p.components.length > 0);
}

/**
 * The USAGE line inputs of a period up to `end` (the period's end at renewal, the cancel at a
 * cancel-now). Without segments exactly usageLineInputs (the unchanged rule). With segments, per
 * part in order and per component of its price: the part's quantity, its share of the included
 * units, described by the part's product and its bound ("Tokens on Basic until 6 December 2026",
 * "Tokens on Pro from 6 December 2026").
 */
export async function periodUsageLineInputs(
  billing: MeteredBilling,
  s: Pick<Subscription, 'orgId' | 'customerId' | 'priceId' | 'productName' | 'currentPeriodStart' | 'currentPeriodEnd' | 'trialEnd'>,
  parts: readonly UsagePart[],
  split = parts.length > 1,
): Promise<LineInput[]> {
  if (!split && parts.length === 1) return usageLineInputs(billing, { ...s, currentPeriodStart: parts[0]!.start, currentPeriodEnd: parts[0]!.end }, parts[0]!.components);
  const lines: LineInput[] = [];
  for (const [i, part] of parts.entries()) {
    const read = await usageLineInputs(billing, { ...s, currentPeriodStart: part.start, currentPeriodEnd: part.end }, part.components);
    const bound = i < parts.length - 1 ? `until ${longDateUtc(part.end)}` : `from ${longDateUtc(part.start)}`;
    for (const [j, line] of read.entries()) {
      if (line.kind !== 'USAGE') continue;
      const included = includedUnitsShare(part.components[j]!.includedUnits, part.start, part.shareEnd, s.currentPeriodStart, s.currentPeriodEnd);
      lines.push({ ...line, description: `${line.description} on ${part.productName} ${bound}`, includedUnits: included });
    }
  }
  return lines;
}

/**
 * The segment an applied change records (undefined when none is needed: same price, a change at
 * the period's end or dropped, or neither price metered): the part of the period the old price
 * billed, from the previous change (or the period's start) to the change's `prorationDate` — the
 * instant the fee is prorated from, so fee and usage split at the same second. A `prorationDate`
 * before the period's last change (a preview older than it) is refused: preview again.
 */
export function nextUsageSegment(s: Subscription, quote: PlanChangeQuote, segments: readonly UsageSegment[], now: Date): UsageSegment | undefined {
  if (quote.mode !== 'immediate' && quote.mode !== 'trial') return undefined;
  if (quote.to.priceId === quote.from.priceId) return undefined;
  if (!quote.metered?.from && !quote.metered?.to) return undefined;
  const last = segments[segments.length - 1];
  const start = last ? last.end : s.currentPeriodStart;
  if (quote.prorationDate.getTime() < (last ? last.end.getTime() : seconds(start) * 1000)) {
    throw conflict('The plan changed after this preview (a later change of this period is recorded); preview again');
  }
  const end = new Date(Math.max(quote.prorationDate.getTime(), start.getTime()));
  return { subscriptionId: s.id, orgId: s.orgId, periodNumber: s.periodNumber, seq: segments.length + 1, priceId: s.priceId, productName: s.productName, start, end, createdAt: now };
}

/**
 * The plan whose metered components bill the usage after the last recorded segment. Usually the
 * subscription's own; but a change paid in the processor whose item update is still pending
 * (`202`, docs/plan-changes.md "Paid, not yet applied") recorded its segment at once while the
 * subscription keeps the old price until it is applied: the usage from the change's second on is
 * the plan the buyer paid for, so a period closed (or cancelled now) meanwhile bills that part at
 * the new price, not the old one. Before, it was billed at the old price.
 */
export function paidForPlan<S extends Pick<Subscription, 'priceId' | 'productName'>>(s: S, pending: PendingPlanChange | undefined): S {
  if (!pending || pending.appliedAt) return s;
  const to = (pending.quote as { to?: { priceId?: string | null; productName?: string } }).to;
  if (!to || to.priceId === undefined) return s;
  return { ...s, priceId: to.priceId, productName: to.productName ?? s.productName };
}

/**
 * The parts cut to [range.start, range.end), the empty ones dropped (a processor's invoice may bill
 * only a piece of a split period: the rest of it after a cancel-now's invoice, or the cancel's own
 * range). Each keeps its share's end, so a part cut at a cancel keeps its share, as on the sandbox.
 */
export function partsWithin(parts: readonly UsagePart[], range: { start: Date; end: Date }): UsagePart[] {
  return parts
    .map((p) => ({ ...p, start: new Date(Math.max(p.start.getTime(), range.start.getTime())), end: new Date(Math.min(p.end.getTime(), range.end.getTime())) }))
    .filter((p) => p.start.getTime() < p.end.getTime());
}
