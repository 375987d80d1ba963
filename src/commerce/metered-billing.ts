/**
 * Metered components of a subscription price, billed in arrears at renewal (issue 38 §5, §7).
 *
 * Commerce reads what it needs of meters through two narrow ports, implemented by the usage module
 * and wired in src/services.ts, so nothing here depends on how usage stores or aggregates events:
 * - `MeterDirectory`: does a meter exist in the organization, its name, archived or not;
 * - `UsageQuantities`: a customer's quantity of a meter over [start, end).
 *
 * The close of a period: the renewal order of period p + 1 carries the fixed fee of p + 1 and one
 * USAGE line per component for period p (its consumption over [currentPeriodStart,
 * currentPeriodEnd)), priced by pricePeriod, in one order and one charge. A subscription with
 * metered components renews `USAGE_CLOSE_DELAY_MS` after its period ends: the grace window during
 * which usage events of the closing period are still accepted (src/usage's PERIOD_GRACE_MS, the
 * same value, held equal by test/commerce/metered-billing.test.ts), so every accepted event of the
 * period is counted, and after it the quantities of the period no longer change.
 */
import { validationError } from '../kernel/errors.js';
import type { components } from '../../generated/merchant.js';
import type { components as AdminComponents } from '../../generated/admin.js';
import { parseDecimal, pricePeriod, type LineInput, type UsagePricing } from './pricing.js';
import type { CommerceStores } from './stores.js';

/** One metered component of a price: a meter, how its billable units are priced, the units each period includes. */
export interface MeteredComponent {
  meterId: string;
  pricing: UsagePricing;
  includedUnits: number;
  /**
   * Usage alerts in percent of includedUnits, ascending (`meter.threshold_crossed`, see
   * meter-balances.ts ThresholdAlerts). Absent on components stored before they existed: none.
   */
  thresholds?: number[];
}

/** A credit pack's grant (a ONE_TIME price's `grantsUnits`): each unit bought grants `units` of `meterId`. */
export interface CreditGrant {
  meterId: string;
  units: number;
}

/** At most this many units per pack: × a checkout's quantity (≤ 999,999) it stays a safe integer. */
export const MAX_GRANT_UNITS = 1_000_000_000;

export interface MeterDirectory {
  find(orgId: string, meterId: string): Promise<{ id: string; name: string; archived: boolean } | undefined>;
}

export interface UsageQuantities {
  /** The customer's quantity of the meter over [start, end) (the meter's aggregation). */
  quantity(orgId: string, meterId: string, customerId: string, start: Date, end: Date): Promise<number>;
}

/** What the renewal job asks: the metered components of a price and the meters' names and quantities. */
export interface MeteredBilling {
  componentsOf(orgId: string, priceId: string): Promise<MeteredComponent[]>;
  meters: MeterDirectory;
  quantities: UsageQuantities;
}

/** How long after a period's end its usage is closed: the usage-event grace window (1 hour). */
export const USAGE_CLOSE_DELAY_MS = 60 * 60_000;

/** At most this many metered components per price. */
export const MAX_METERED_COMPONENTS = 10;

/** Usage thresholds per component: at most this many, each a whole percent of the included units from 1 to MAX_THRESHOLD_PERCENT. */
export const MAX_THRESHOLDS = 10;
export const MAX_THRESHOLD_PERCENT = 1000;

/**
 * Checks a component's thresholds (percents of its included units): whole numbers 1 to
 * MAX_THRESHOLD_PERCENT, each once, at most MAX_THRESHOLDS, and only with included units to take a
 * percentage of. Returned ascending (the order events of one jump are sent in).
 */
export function checkThresholds(input: readonly number[] | undefined, includedUnits: number, field: string): number[] {
  if (input === undefined || input.length === 0) return [];
  if (input.length > MAX_THRESHOLDS) throw validationError(`${field}: at most ${MAX_THRESHOLDS} thresholds`, { field });
  if (includedUnits < 1) throw validationError(`${field}: thresholds are percents of includedUnits, which must then be at least 1`, { field });
  const seen = new Set<number>();
  for (const [i, t] of input.entries()) {
    if (!Number.isInteger(t) || t < 1 || t > MAX_THRESHOLD_PERCENT) throw validationError(`${field}[${i}] must be a whole percent from 1 to ${MAX_THRESHOLD_PERCENT}`, { field: `${field}[${i}]` });
    if (seen.has(t)) throw validationError(`${field}[${i}]: ${t} is given twice`, { field: `${field}[${i}]` });
    seen.add(t);
  }
  return [...seen].sort((a, b) => a - b);
}

/**
 * Is consumption `quantity` (a decimal, e.g. a sum of `llm.cost`) at or past `percent` % of
 * `includedUnits`? Exact: quantity × 100 ≥ includedUnits × percent over integers (no float error
 * at the boundary: 0.07 × 100 is 7.000000000000001 in floating point).
 */
export function thresholdReached(quantity: string | number, includedUnits: number, percent: number): boolean {
  const q = parseDecimal(quantity, 'quantity');
  return q.n * 100n >= BigInt(includedUnits) * BigInt(percent) * q.d;
}

type ApiComponent = AdminComponents['schemas']['MeteredComponent'];
type ApiPricing = components['schemas']['MeteredPricing'];

/** The API's metered pricing as pricing.ts takes it; a field its model needs and lacks is 400 naming it. */
export function usagePricingFrom(p: ApiPricing, field: string): UsagePricing {
  const need = <T>(value: T | undefined, name: string): T => {
    if (value === undefined) throw validationError(`${field}.${name} is required for model ${p.model}`, { field: `${field}.${name}` });
    return value;
  };
  const extra = (names: Array<keyof ApiPricing>) => {
    const given = names.find((n) => p[n] !== undefined);
    if (given) throw validationError(`${field}.${given} does not apply to model ${p.model}`, { field: `${field}.${given}` });
  };
  switch (p.model) {
    case 'PER_UNIT':
      extra(['packageSize', 'packageAmountDecimal', 'tiers']);
      return { model: 'PER_UNIT', unitAmount: need(p.unitAmountDecimal, 'unitAmountDecimal') };
    case 'PACKAGE':
      extra(['unitAmountDecimal', 'tiers']);
      return { model: 'PACKAGE', packageSize: need(p.packageSize, 'packageSize'), packageAmount: need(p.packageAmountDecimal, 'packageAmountDecimal') };
    case 'GRADUATED':
    case 'VOLUME':
      extra(['unitAmountDecimal', 'packageSize', 'packageAmountDecimal']);
      return {
        model: p.model,
        tiers: need(p.tiers, 'tiers').map((t) => ({ upTo: t.upTo, unitAmount: t.unitAmountDecimal, ...(t.flatAmountCents !== undefined ? { flatAmount: t.flatAmountCents } : {}) })),
      };
  }
}

/**
 * Checks a price's metered components against the rules the schema cannot state: each names a
 * meter of the price's organization that is not archived, once; its pricing is complete and
 * prices (tiers increasing, only the last unbounded, decimals of ≤ 12 fraction digits).
 */
export async function checkMeteredComponents(orgId: string, input: readonly ApiComponent[], meters: MeterDirectory | undefined): Promise<MeteredComponent[]> {
  if (input.length === 0) return [];
  if (!meters) throw validationError('meteredComponents: metering is not available here', { field: 'meteredComponents' });
  if (input.length > MAX_METERED_COMPONENTS) throw validationError(`meteredComponents: at most ${MAX_METERED_COMPONENTS}`, { field: 'meteredComponents' });
  const seen = new Set<string>();
  const out: MeteredComponent[] = [];
  for (const [i, c] of input.entries()) {
    const field = `meteredComponents[${i}]`;
    if (seen.has(c.meterId)) throw validationError(`${field}.meterId: meter ${c.meterId} is already a component of this price`, { field: `${field}.meterId` });
    seen.add(c.meterId);
    const meter = await meters.find(orgId, c.meterId);
    // Another organization's meter reads as no meter at all (never confirm it exists).
    if (!meter) throw validationError(`${field}.meterId: no meter ${c.meterId} in this organization`, { field: `${field}.meterId` });
    if (meter.archived) throw validationError(`${field}.meterId: meter ${c.meterId} is archived; a new price cannot bill it`, { field: `${field}.meterId` });
    const includedUnits = c.includedUnits ?? 0;
    if (!Number.isSafeInteger(includedUnits) || includedUnits < 0) throw validationError(`${field}.includedUnits must be a non-negative integer`, { field: `${field}.includedUnits` });
    const thresholds = checkThresholds(c.thresholds, includedUnits, `${field}.thresholds`);
    const component: MeteredComponent = { meterId: c.meterId, pricing: usagePricingFrom(c.pricing, `${field}.pricing`), includedUnits, ...(thresholds.length > 0 && { thresholds }) };
    // The tiers and decimals are pricing.ts's to judge: price a sample quantity now, not at the first renewal.
    pricePeriod([{ kind: 'USAGE', description: meter.name, meterId: c.meterId, quantity: includedUnits + 1, includedUnits, pricing: component.pricing }]);
    out.push(component);
  }
  return out;
}

/** Checks a credit pack's grant: a meter of the organization, not archived; whole units, 1 to MAX_GRANT_UNITS. */
export async function checkCreditGrant(orgId: string, input: { meterId: string; units: number }, meters: MeterDirectory | undefined): Promise<CreditGrant> {
  if (!meters) throw validationError('grantsUnits: metering is not available here', { field: 'grantsUnits' });
  if (!Number.isSafeInteger(input.units) || input.units < 1 || input.units > MAX_GRANT_UNITS) {
    throw validationError(`grantsUnits.units must be an integer from 1 to ${MAX_GRANT_UNITS}`, { field: 'grantsUnits.units' });
  }
  const meter = await meters.find(orgId, input.meterId);
  if (!meter) throw validationError(`grantsUnits.meterId: no meter ${input.meterId} in this organization`, { field: 'grantsUnits.meterId' });
  if (meter.archived) throw validationError(`grantsUnits.meterId: meter ${input.meterId} is archived; a new price cannot grant it`, { field: 'grantsUnits.meterId' });
  return { meterId: meter.id, units: input.units };
}

/**
 * The USAGE line inputs of a closing period: one per component, in the price's order, a period
 * without usage included (quantity 0, amount 0) so the order says what was measured.
 *
 * A free trial is free (issue 39 item 1 × issue 38 §5; Stripe: "During the trial period, any usage
 * accrued doesn't count toward the total charged to the customer"): usage before the
 * subscription's `trialEnd` is never billed. A range wholly inside the trial (the trial's own
 * period, closed by the order that ends it; a cancel during it) has no USAGE line at all, so that
 * order carries only the fee (with its discount and tax); a range that starts before the trial's
 * end is read from it. Every rail and the estimate read usage through here (docs/trials.md).
 */
export async function usageLineInputs(
  billing: MeteredBilling,
  s: { orgId: string; customerId: string | null; currentPeriodStart: Date; currentPeriodEnd: Date; trialEnd?: Date | null },
  components: readonly MeteredComponent[],
): Promise<LineInput[]> {
  const trialEnd = s.trialEnd?.getTime();
  if (trialEnd !== undefined && s.currentPeriodEnd.getTime() <= trialEnd) return [];
  const start = trialEnd !== undefined && trialEnd > s.currentPeriodStart.getTime() ? new Date(trialEnd) : s.currentPeriodStart;
  const lines: LineInput[] = [];
  for (const c of components) {
    const meter = await billing.meters.find(s.orgId, c.meterId);
    // An empty range (a renewal draft whose period a cancel-now's invoice billed already) holds nothing.
    const empty = s.currentPeriodEnd.getTime() <= start.getTime();
    const quantity = s.customerId === null || empty ? 0 : await billing.quantities.quantity(s.orgId, c.meterId, s.customerId, start, s.currentPeriodEnd);
    lines.push({ kind: 'USAGE', description: meter?.name ?? c.meterId, meterId: c.meterId, quantity, includedUnits: c.includedUnits, pricing: c.pricing });
  }
  return lines;
}

/**
 * The credit units a period's consumption asks for, once the included units are used: the
 * consumption beyond them, a started unit counted whole (credits are whole units), e.g. 10.2 units
 * over the included ones draw 11. Exact (the quantity may be a decimal, a sum of `llm.cost`).
 */
export function creditUnitsWanted(quantity: string | number, includedUnits: number): number {
  const q = parseDecimal(quantity, 'quantity');
  const over = q.n - BigInt(includedUnits) * q.d;
  if (over <= 0n) return 0;
  const whole = (over + q.d - 1n) / q.d;
  return Number(whole);
}

/**
 * Draws the closing period's prepaid credits into its USAGE lines (`creditedUnits`), in the
 * renewal's transaction, before the order is priced: included units first, then credits, each
 * line min(balance, what the period asks for). Once per (subscription, period, meter): a pass that
 * rolls back draws nothing, a rerun of a committed one finds its draw. A period split by a plan
 * change may bill one meter on several lines (one per part, metered-plan-change.ts): the meter is
 * drawn once for what its lines ask together, and the draw is given to its lines in order.
 */
export async function drawCredits(
  stores: Pick<CommerceStores, 'credits'>,
  s: { id: string; orgId: string; customerId: string | null; periodNumber: number },
  usage: readonly LineInput[],
  now: Date,
): Promise<LineInput[]> {
  const wantedOf = (line: LineInput) => (line.kind === 'USAGE' ? creditUnitsWanted(line.quantity, line.includedUnits ?? 0) : 0);
  const left = new Map<string, number>();
  if (s.customerId !== null) {
    const wanted = new Map<string, number>();
    for (const line of usage) if (line.kind === 'USAGE') wanted.set(line.meterId, (wanted.get(line.meterId) ?? 0) + wantedOf(line));
    for (const [meterId, units] of wanted) {
      left.set(meterId, units === 0 ? 0 : await stores.credits.draw({ orgId: s.orgId, customerId: s.customerId, meterId, subscriptionId: s.id, period: s.periodNumber, wanted: units, at: now }));
    }
  }
  return usage.map((line) => {
    if (line.kind !== 'USAGE' || s.customerId === null) return line;
    const available = left.get(line.meterId) ?? 0;
    const drawn = Math.min(available, wantedOf(line));
    left.set(line.meterId, available - drawn);
    return drawn > 0 ? { ...line, creditedUnits: drawn } : line;
  });
}
