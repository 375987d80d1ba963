/**
 * Commerce metrics (getCommerceMetrics): the organization's volume, payments, subscriptions and
 * checkout conversion per currency and local-date bucket. Definitions live in the operation's
 * OpenAPI description; this service turns the read model's grouped rows into whole series.
 */
import { validationError } from '../kernel/errors.js';
import type { LagTolerantReads } from '../kernel/lag-tolerant-reads.js';
import type { BucketRow, BucketUnit, CommerceMetricsRepository, MetricsRange } from './commerce-metrics.repository.js';
import { canonicalTimeZone } from '../kernel/time-zone.js';

/** At most this many buckets in one answer (13 months of days, 7 years of weeks, 33 years of months). */
export const MAX_BUCKETS = 400;

export interface CurrencyFigures {
  successfulPayments: number;
  grossVolume: number;
  refundedVolume: number;
  netVolume: number;
  /** The tax held in grossVolume (exclusive tax added, inclusive tax included; reverse charge 0). */
  taxVolume: number;
  /** The tax share of refundedVolume: per order, tax × refunded ÷ amount, rounded once, half up. */
  refundedTaxVolume: number;
  /** taxVolume − refundedTaxVolume: the tax of netVolume. */
  netTaxVolume: number;
  /** netVolume − netTaxVolume: what the payments brought after refunds, without tax. */
  netRevenue: number;
  /** The discounts given on those payments (not in grossVolume; not reduced by refunds). */
  discountVolume: number;
  failedPayments: number;
  newSubscriptions: number;
  churnedSubscriptions: number;
  activeSubscriptions: number;
  mrr: number;
  checkoutSessionsCreated: number;
  checkoutSessionsCompleted: number;
}

export interface CommerceMetrics {
  startDate: string;
  endDate: string;
  interval: BucketUnit;
  timeZone: string;
  buckets: BucketRow[];
  customers: { totals: { newCustomers: number }; series: { newCustomers: number }[] };
  currencies: { currency: string; totals: CurrencyFigures; series: CurrencyFigures[] }[];
}

export interface CommerceMetricsQuery {
  startDate: string;
  endDate: string;
  interval: BucketUnit;
  timeZone: string;
  currency?: string;
}

const DAY_MS = 86_400_000;
const utcDay = (date: string) => Date.parse(`${date}T00:00:00Z`) / DAY_MS;

/** How many buckets the range spans, from its dates alone (calendar arithmetic needs no time zone). */
export function bucketCount(startDate: string, endDate: string, unit: BucketUnit): number {
  const start = utcDay(startDate);
  const end = utcDay(endDate);
  if (unit === 'day') return end - start + 1;
  if (unit === 'week') {
    // 1970-01-01 was a Thursday: days since the Monday before it, divided by 7, number the weeks.
    const week = (day: number) => Math.floor((day + 3) / 7);
    return week(end) - week(start) + 1;
  }
  const month = (date: string) => Number(date.slice(0, 4)) * 12 + Number(date.slice(5, 7));
  return month(endDate) - month(startDate) + 1;
}

/** The format check lets 2026-02-30 through; a date is real when it survives a round trip. */
const isCalendarDate = (date: string) => {
  const t = Date.parse(`${date}T00:00:00Z`);
  return Number.isFinite(t) && new Date(t).toISOString().slice(0, 10) === date;
};


const zero = (): CurrencyFigures => ({
  successfulPayments: 0,
  grossVolume: 0,
  refundedVolume: 0,
  netVolume: 0,
  taxVolume: 0,
  refundedTaxVolume: 0,
  netTaxVolume: 0,
  netRevenue: 0,
  discountVolume: 0,
  failedPayments: 0,
  newSubscriptions: 0,
  churnedSubscriptions: 0,
  activeSubscriptions: 0,
  mrr: 0,
  checkoutSessionsCreated: 0,
  checkoutSessionsCompleted: 0,
});

/** Figures that add up across buckets (the others are states at a bucket's end). */
const FLOWS = [
  'successfulPayments',
  'grossVolume',
  'refundedVolume',
  'netVolume',
  'taxVolume',
  'refundedTaxVolume',
  'netTaxVolume',
  'netRevenue',
  'discountVolume',
  'failedPayments',
  'newSubscriptions',
  'churnedSubscriptions',
  'checkoutSessionsCreated',
  'checkoutSessionsCompleted',
] as const satisfies readonly (keyof CurrencyFigures)[];

export class CommerceMetricsService {
  constructor(private readonly repositories: LagTolerantReads<CommerceMetricsRepository>) {}

  /** The figures are read in one go, on a replica when one is fresh enough for the organization. */
  metrics(orgId: string, query: CommerceMetricsQuery): Promise<CommerceMetrics> {
    return this.repositories.read(orgId, (repository) => this.metricsOn(repository, orgId, query));
  }

  private async metricsOn(repository: CommerceMetricsRepository, orgId: string, query: CommerceMetricsQuery): Promise<CommerceMetrics> {
    const { startDate, endDate, interval } = query;
    for (const [name, date] of [['start_date', startDate], ['end_date', endDate]] as const)
      if (!isCalendarDate(date)) throw validationError(`${name} must be a calendar date (YYYY-MM-DD): ${date} does not exist`);
    if (startDate < '1970-01-01') throw validationError('start_date must be 1970-01-01 or later');
    if (endDate < startDate) throw validationError('end_date must not be before start_date');
    const count = bucketCount(startDate, endDate, interval);
    if (count > MAX_BUCKETS) throw validationError(`The range spans ${count} buckets of a ${interval}; at most ${MAX_BUCKETS} are allowed`);
    // One spelling per zone, the one the organization's own zone is stored under (aliases such as
    // Asia/Kolkata and Asia/Calcutta name the same days and the same kept zone).
    const timeZone = canonicalTimeZone(query.timeZone);
    if (timeZone === undefined) throw validationError(`Unknown time zone "${query.timeZone}": use an IANA name such as Europe/Paris`);

    const buckets = await repository.buckets(interval, timeZone, startDate, endDate);
    const first = buckets[0];
    const last = buckets[buckets.length - 1];
    if (!first || !last) throw new Error('a range of dates has at least one bucket');
    const range: MetricsRange = {
      orgId,
      unit: interval,
      timeZone,
      start: first.start,
      end: last.end,
      boundaries: [...buckets.map((b) => b.start), last.end],
      wholeLocalDates: buckets.every((b) => b.wholeLocalDates === true) ? true : buckets.some((b) => b.wholeLocalDates === false) ? false : undefined,
      currency: query.currency?.toUpperCase(),
    };
    const rows = await repository.figures(range);
    const base = await repository.subscriptionsActiveAtStart(range);

    const index = new Map(buckets.map((b, i) => [b.date, i]));
    const series = new Map<string, CurrencyFigures[]>();
    /** The bucket's figures of a currency; undefined for a row outside every bucket (a local midnight a zone skipped). */
    const at = (currency: string, bucket: string): CurrencyFigures | undefined => {
      const i = index.get(bucket);
      if (i === undefined) return undefined;
      let list = series.get(currency);
      if (!list) series.set(currency, (list = buckets.map(zero)));
      return list[i];
    };
    // Active subscriptions and MRR at each bucket's end: those active at the range's start, plus
    // the starts and minus the ends of every bucket up to it.
    const delta = new Map<string, { count: number[]; mrr: number[] }>();
    const deltaOf = (currency: string) => {
      let d = delta.get(currency);
      if (!d) delta.set(currency, (d = { count: buckets.map(() => 0), mrr: buckets.map(() => 0) }));
      return d;
    };
    const newCustomers = buckets.map(() => 0);
    for (const r of rows) {
      const i = index.get(r.bucket);
      if (i === undefined) continue;
      if (r.currency === '') {
        newCustomers[i] = (newCustomers[i] ?? 0) + r.new_customers;
        continue;
      }
      const flows =
        r.successful_payments || r.gross_volume || r.refunded_volume || r.failed_payments || r.new_subscriptions || r.churned_subscriptions ||
        r.sessions_created || r.sessions_completed || r.new_mrr || r.churned_mrr || r.tax_volume || r.refunded_tax_volume || r.discount_volume;
      if (!flows) continue;
      const f = at(r.currency, r.bucket)!;
      f.successfulPayments += r.successful_payments;
      f.grossVolume += r.gross_volume;
      f.refundedVolume += r.refunded_volume;
      f.netVolume += r.gross_volume - r.refunded_volume;
      f.taxVolume += r.tax_volume;
      f.refundedTaxVolume += r.refunded_tax_volume;
      f.netTaxVolume += r.tax_volume - r.refunded_tax_volume;
      f.netRevenue += r.gross_volume - r.refunded_volume - (r.tax_volume - r.refunded_tax_volume);
      f.discountVolume += r.discount_volume;
      f.failedPayments += r.failed_payments;
      f.checkoutSessionsCreated += r.sessions_created;
      f.checkoutSessionsCompleted += r.sessions_completed;
      f.newSubscriptions += r.new_subscriptions;
      f.churnedSubscriptions += r.churned_subscriptions;
      const d = deltaOf(r.currency);
      d.count[i] = (d.count[i] ?? 0) + r.new_subscriptions - r.churned_subscriptions;
      d.mrr[i] = (d.mrr[i] ?? 0) + r.new_mrr - r.churned_mrr;
    }
    const baseOf = new Map(base.map((b) => [b.currency, b]));
    for (const currency of new Set([...delta.keys(), ...baseOf.keys()])) {
      let count = baseOf.get(currency)?.count ?? 0;
      let mrr = baseOf.get(currency)?.mrr ?? 0;
      const d = delta.get(currency);
      buckets.forEach((b, i) => {
        count += d?.count[i] ?? 0;
        mrr += d?.mrr[i] ?? 0;
        const f = at(currency, b.date)!;
        f.activeSubscriptions = count;
        f.mrr = mrr;
      });
    }

    const currencies = [...series.entries()]
      .filter(([, list]) => list.some((f) => Object.values(f).some((v) => v !== 0)))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([currency, list]) => {
        const totals = zero();
        for (const f of list) for (const k of FLOWS) totals[k] += f[k];
        const end = list[list.length - 1];
        totals.activeSubscriptions = end?.activeSubscriptions ?? 0;
        totals.mrr = end?.mrr ?? 0;
        return { currency, totals, series: list };
      });

    return {
      startDate: first.date,
      endDate: lastDateOf(last, interval),
      interval,
      timeZone,
      buckets,
      customers: { totals: { newCustomers: newCustomers.reduce((a, b) => a + b, 0) }, series: newCustomers.map((n) => ({ newCustomers: n })) },
      currencies,
    };
  }
}

/** The last local date of a bucket (its first date plus the unit, less a day). */
function lastDateOf(bucket: BucketRow, unit: BucketUnit): string {
  const first = new Date(`${bucket.date}T00:00:00Z`);
  if (unit === 'day') return bucket.date;
  if (unit === 'week') return new Date(first.getTime() + 6 * DAY_MS).toISOString().slice(0, 10);
  return new Date(Date.UTC(first.getUTCFullYear(), first.getUTCMonth() + 1, 0)).toISOString().slice(0, 10);
}
