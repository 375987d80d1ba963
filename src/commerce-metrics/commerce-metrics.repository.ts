/**
 * The commerce metrics read model: grouped counts and sums over orders, subscriptions, checkout
 * sessions and customers, bucketed by local date in a time zone. Reads only; each query is one
 * range scan of the table's (org_id, created_at) index (or ended_at for churn), an index-only one:
 * the indexes of migration 0196 carry the columns summed here (issue 30's console home page within
 * 100 ms at 100,000 orders; fetching each order from the table cost a page read per order).
 */
import type { Knex } from 'knex';
import { validationError } from '../kernel/errors.js';
import { systemClock, type Clock } from '../kernel/clock.js';

export type BucketUnit = 'day' | 'week' | 'month';

/** A bucket's first local date and its bounds as instants. */
export interface BucketRow {
  date: string;
  start: Date;
  end: Date;
  /** Whether start and end are each the first instant of their local date (not so where a fall-back repeats a local midnight). */
  wholeLocalDates?: boolean;
}

/** The figures the rollups carry (migration 0260), in its order. */
export const FIGURES = [
  'successful_payments',
  'gross_volume',
  'refunded_volume',
  'failed_payments',
  'new_subscriptions',
  'new_mrr',
  'churned_subscriptions',
  'churned_mrr',
  'closed_subscriptions',
  'closed_mrr',
  'sessions_created',
  'sessions_completed',
  'new_customers',
  // Migration 0372: the tax held in gross_volume, its share of refunded_volume, and the discounts given.
  'tax_volume',
  'refunded_tax_volume',
  'discount_volume',
] as const;
export type Figure = (typeof FIGURES)[number];

/**
 * One currency's figures in one local bucket. Customers have no currency: their row is currency ''.
 * `closed_*` (subscriptions that both started and ended) only serve "active at the start".
 */
export type FiguresRow = { currency: string; bucket: string } & Record<Figure, number>;

export interface SubscriptionBaseRow {
  currency: string;
  count: number;
  mrr: number;
}

export interface MetricsRange {
  orgId: string;
  unit: BucketUnit;
  timeZone: string;
  /** Instants bounding the buckets: [start, end). */
  start: Date;
  end: Date;
  /** Every bucket's start, then the last bucket's end (start and end among them). */
  boundaries: Date[];
  /** Whether every boundary is the first instant of its local date (from the buckets; worked out with Intl when absent). */
  wholeLocalDates?: boolean;
  currency?: string;
}

export interface CommerceMetricsRepository {
  buckets(unit: BucketUnit, timeZone: string, startDate: string, endDate: string): Promise<BucketRow[]>;
  /** Each currency's figures per bucket (rows with no figure may be left out). */
  figures(range: MetricsRange): Promise<FiguresRow[]>;
  /** Subscriptions active at the range's start (created before it, not ended before it) and their MRR, per currency. */
  subscriptionsActiveAtStart(range: MetricsRange): Promise<SubscriptionBaseRow[]>;
}

const num = (v: number | string | null | undefined): number => (v == null ? 0 : Number(v));

/** A subscription's monthly recurring revenue in minor units, rounded half up (see getCommerceMetrics). */
const MRR_SQL = `round(CASE billing_interval
    WHEN 'MONTH' THEN amount_cents::numeric / billing_interval_count
    WHEN 'YEAR' THEN amount_cents::numeric / (12 * billing_interval_count)
    ELSE amount_cents::numeric * 365 / (12 * billing_interval_count) END)`;

/**
 * The row's local date bucket: grouped on as a timestamp (`date_trunc(unit, column AT TIME ZONE
 * zone)`, bound as unit then zone), then named by its first date as text (`BUCKET_TEXT`, so no
 * driver reads it in its own zone) once per group rather than once per row.
 */
const bucketOf = (column: string) => `date_trunc(?, ${column} AT TIME ZONE ?)`;
const BUCKET_TEXT = "to_char(b, 'YYYY-MM-DD')";

const emptyFigures = (currency: string, bucket: string): FiguresRow =>
  ({ currency, bucket, ...Object.fromEntries(FIGURES.map((f) => [f, 0])) }) as FiguresRow;

/**
 * The definition: the figures recomputed from the orders, checkout sessions, subscriptions and
 * customers over the range (linear in the range's rows). The rollup reader below equals it
 * (test/commerce-metrics/rollups.test.ts) and falls back to it where rollups cannot serve.
 */
export class RecomputedCommerceMetricsRepository implements CommerceMetricsRepository {
  constructor(protected readonly db: Knex) {}

  async figures(range: MetricsRange): Promise<FiguresRow[]> {
    const rows = new Map<string, FiguresRow>();
    const row = (currency: string, bucket: string) => {
      const key = `${currency}\u0000${bucket}`;
      let r = rows.get(key);
      if (!r) rows.set(key, (r = emptyFigures(currency, bucket)));
      return r;
    };
    for (const o of await this.orderFigures(range)) {
      const r = row(o.currency, o.bucket);
      r.successful_payments += o.successful;
      r.gross_volume += o.gross;
      r.refunded_volume += o.refunded;
      r.failed_payments += o.failed;
      r.tax_volume += o.tax;
      r.refunded_tax_volume += o.refunded_tax;
      r.discount_volume += o.discount;
    }
    for (const d of await this.subscriptionDeltas(range, 'created_at')) {
      const r = row(d.currency, d.bucket);
      r.new_subscriptions += d.count;
      r.new_mrr += d.mrr;
    }
    for (const d of await this.subscriptionDeltas(range, 'ended_at')) {
      const r = row(d.currency, d.bucket);
      r.churned_subscriptions += d.count;
      r.churned_mrr += d.mrr;
    }
    for (const x of await this.sessionFigures(range)) {
      const r = row(x.currency, x.bucket);
      r.sessions_created += x.created;
      r.sessions_completed += x.completed;
    }
    for (const c of await this.customerFigures(range)) row('', c.bucket).new_customers += c.count;
    return [...rows.values()];
  }

  async buckets(unit: BucketUnit, timeZone: string, startDate: string, endDate: string): Promise<BucketRow[]> {
    // One date past the last bucket gives every bucket's end; local midnights become instants in the zone.
    const { rows } = await this.db
      .raw<{ rows: { date: string; start: Date; end: Date; whole: boolean }[] }>(
      `SELECT to_char(d, 'YYYY-MM-DD') AS date, s AS start, e AS "end",
              ((s - interval '1 millisecond') AT TIME ZONE z)::date < d::date AND ((e - interval '1 millisecond') AT TIME ZONE z)::date < (d + u)::date AS whole
         FROM (SELECT d, d AT TIME ZONE ?::text AS s, (d + ('1 ' || ?)::interval) AT TIME ZONE ?::text AS e, ?::text AS z, ('1 ' || ?)::interval AS u
                 FROM generate_series(date_trunc(?, ?::timestamp), date_trunc(?, ?::timestamp), ('1 ' || ?)::interval) AS d) b
        ORDER BY d`,
      [timeZone, unit, timeZone, timeZone, unit, unit, startDate, unit, endDate, unit],
      )
      .catch((error: { code?: string }) => {
        // A name the runtime knows but this database's time zone table does not.
        if (error.code === '22023') throw validationError(`Unknown time zone "${timeZone}": use an IANA name such as Europe/Paris`);
        throw error;
      });
    return rows.map((r) => ({ date: r.date, start: new Date(r.start), end: new Date(r.end), wholeLocalDates: r.whole }));
  }

  private currencyFilter(range: MetricsRange): { sql: string; values: string[] } {
    return range.currency ? { sql: ' AND currency = ?', values: [range.currency] } : { sql: '', values: [] };
  }

  /**
   * Tax and discounts from the orders' lines themselves (not orders.tax_cents, which the rollups
   * use): a TAX line's tax (`tax.taxAmount`: exclusive, inclusive or 0 for reverse charge), minus the
   * DISCOUNT lines; a refund's tax share is proportional, rounded once half up per order.
   */
  private async orderFigures(range: MetricsRange) {
    const c = this.currencyFilter(range);
    const ok = "o.status IN ('PAID', 'REFUNDED')";
    const { rows } = await this.db.raw<{ rows: Record<string, string | number>[] }>(
      `SELECT currency, ${BUCKET_TEXT} AS bucket, successful, gross, refunded, failed, tax, refunded_tax, discount FROM (
       SELECT o.currency, ${bucketOf('o.created_at')} AS b,
              count(*) FILTER (WHERE ${ok}) AS successful,
              coalesce(sum(o.amount_cents) FILTER (WHERE ${ok}), 0) AS gross,
              coalesce(sum(o.amount_refunded_cents) FILTER (WHERE ${ok}), 0) AS refunded,
              count(*) FILTER (WHERE o.status = 'FAILED') AS failed,
              coalesce(sum(t.tax) FILTER (WHERE ${ok}), 0) AS tax,
              coalesce(sum(round(t.tax::numeric * o.amount_refunded_cents / o.amount_cents)) FILTER (WHERE ${ok} AND o.amount_cents > 0), 0) AS refunded_tax,
              coalesce(sum(t.discount) FILTER (WHERE ${ok}), 0) AS discount
         FROM orders o
         CROSS JOIN LATERAL (
           SELECT coalesce(sum(CASE WHEN l.kind = 'TAX' THEN coalesce((l.tax->>'taxAmount')::bigint, l.amount_cents) ELSE 0 END), 0) AS tax,
                  coalesce(sum(CASE WHEN l.kind = 'DISCOUNT' THEN -l.amount_cents ELSE 0 END), 0) AS discount
             FROM order_lines l WHERE l.order_id = o.id AND l.kind IN ('TAX', 'DISCOUNT')) t
        WHERE o.org_id = ? AND o.created_at >= ? AND o.created_at < ?${c.sql.replace('currency', 'o.currency')}
        GROUP BY 1, 2) g`,
      [range.unit, range.timeZone, range.orgId, range.start, range.end, ...c.values],
    );
    return rows.map((r) => ({
      currency: String(r.currency),
      bucket: String(r.bucket),
      successful: num(r.successful),
      gross: num(r.gross),
      refunded: num(r.refunded),
      failed: num(r.failed),
      tax: num(r.tax),
      refunded_tax: num(r.refunded_tax),
      discount: num(r.discount),
    }));
  }

  private async subscriptionDeltas(range: MetricsRange, column: 'created_at' | 'ended_at') {
    const c = this.currencyFilter(range);
    const { rows } = await this.db.raw<{ rows: Record<string, string | number>[] }>(
      `SELECT currency, ${BUCKET_TEXT} AS bucket, count, mrr FROM (
       SELECT currency, ${bucketOf(column)} AS b, count(*) AS count, coalesce(sum(${MRR_SQL}), 0) AS mrr
         FROM subscriptions
        WHERE org_id = ? AND ${column} >= ? AND ${column} < ?${c.sql}
        GROUP BY 1, 2) g`,
      [range.unit, range.timeZone, range.orgId, range.start, range.end, ...c.values],
    );
    return rows.map((r) => ({ currency: String(r.currency), bucket: String(r.bucket), count: num(r.count), mrr: num(r.mrr) }));
  }

  async subscriptionsActiveAtStart(range: MetricsRange): Promise<SubscriptionBaseRow[]> {
    const c = this.currencyFilter(range);
    const { rows } = await this.db.raw<{ rows: Record<string, string | number>[] }>(
      `SELECT currency, count(*) AS count, coalesce(sum(${MRR_SQL}), 0) AS mrr
         FROM subscriptions
        WHERE org_id = ? AND created_at < ? AND (ended_at IS NULL OR ended_at >= ?)${c.sql}
        GROUP BY 1`,
      [range.orgId, range.start, range.start, ...c.values],
    );
    return rows.map((r) => ({ currency: String(r.currency), count: num(r.count), mrr: num(r.mrr) }));
  }

  private async sessionFigures(range: MetricsRange) {
    const c = this.currencyFilter(range);
    const { rows } = await this.db.raw<{ rows: Record<string, string | number>[] }>(
      `SELECT currency, ${BUCKET_TEXT} AS bucket, created, completed FROM (
       SELECT currency, ${bucketOf('created_at')} AS b, count(*) AS created, count(*) FILTER (WHERE status = 'COMPLETE') AS completed
         FROM checkout_sessions
        WHERE org_id = ? AND created_at >= ? AND created_at < ?${c.sql}
        GROUP BY 1, 2) g`,
      [range.unit, range.timeZone, range.orgId, range.start, range.end, ...c.values],
    );
    return rows.map((r) => ({ currency: String(r.currency), bucket: String(r.bucket), created: num(r.created), completed: num(r.completed) }));
  }

  private async customerFigures(range: MetricsRange) {
    const { rows } = await this.db.raw<{ rows: Record<string, string | number>[] }>(
      `SELECT ${BUCKET_TEXT} AS bucket, count FROM (
       SELECT ${bucketOf('created_at')} AS b, count(*) AS count
         FROM customers
        WHERE org_id = ? AND created_at >= ? AND created_at < ?
        GROUP BY 1) g`,
      [range.unit, range.timeZone, range.orgId, range.start, range.end],
    );
    return rows.map((r) => ({ bucket: String(r.bucket), count: num(r.count) }));
  }
}

const QUARTER_MS = 15 * 60_000;
/** Zones besides its own whose local days are kept per organization (migration 0440). */
export const KEPT_ZONES = 3;
/** Zones asked while KEPT_ZONES are kept, waiting for one to fall idle (migration 0460). */
export const WAITING_ZONES = 3;
/**
 * A kept zone is replaced by a waiting one only when no request read it for more than this many
 * days (a zone read weekly stays; four zones read in turn do not rebuild each other every day).
 */
export const KEPT_ZONE_IDLE_DAYS = 7;
/** The UTC date of an instant, as YYYY-MM-DD: the day a kept zone was last asked. */
export const utcDate = (at: Date) => at.toISOString().slice(0, 10);
const DAY_MS = 24 * 60 * 60_000;
/** Local days serve ranges from here on: every zone's offset is a whole number of quarter hours since 1972. */
const LOCAL_DAYS_FROM = Date.parse('1973-01-01T00:00:00Z');
/** The local date of an instant in a zone, as YYYY-MM-DD (comparable as text). */
const localDate = (timeZone: string) => {
  const format = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
  return (at: Date) => format.format(at);
};
const HOUR_MS = 60 * 60_000;
const floorTo = (at: Date, ms: number) => new Date(Math.floor(at.getTime() / ms) * ms);
const timestamps = (list: Date[]) => `{${list.map((d) => d.toISOString()).join(',')}}`;
/** Instants (ms) as an array of whole seconds since 1970 (quarter hours here: exact), cheaper to write and read than ISO text. */
const seconds = (list: number[]) => `{${list.map((t) => t / 1000).join(',')}}`;
const ROLLUP_COLUMNS = FIGURES.join(', ');
/** An instant's time of day in UTC, written as migration 0404's index of the hour and quarter rollups is (or the index is not used). */
const timeOfDay = (column: string) => `(${column} - date_bin('1 day', ${column}, timestamptz '2000-01-01 00:00:00+00'))`;
const ROLLUP_SUMS = FIGURES.map((f) => `sum(${f}) AS ${f}`).join(', ');

/**
 * The figures from the rollups of migrations 0260 and 0370 plus the changes not yet folded into
 * them (one statement, one snapshot: exact at any moment). A local bucket's boundaries are local
 * midnights, so a range is read, in the first way that serves it:
 * - in UTC, from the UTC day rollup: one row per day and currency;
 * - in the organization's own time zone once its local days are built (commerce_rollup_zone
 *   'ready', checked in the same statement), from the local day rollup: one row per local date and
 *   currency (12 months: 365 rows per currency at any size);
 * - in another zone kept for the organization (migration 0440: up to KEPT_ZONES its callers asked
 *   for, built by the job the first time each is asked; 0460: an idle one replaced by one waiting),
 *   from that zone's local days, the same way;
 * - in any other zone by whole local dates (an API key asking in another zone than the
 *   organization's), UTC days, each counted in one bucket, and the hours and quarters a boundary
 *   cuts off it moved to their own (`otherZone`): one statement, each rollup read once;
 * - otherwise (a fall-back repeating local midnight, ranges before 1973) every hour that lies
 *   inside one bucket from the hourly rollup, and the hours a boundary cuts (zones whose offset is
 *   not a whole hour: India, Nepal, Newfoundland…) from the quarter-hour rollup, four rows each.
 * A range whose boundaries are not quarter hours (offsets of seconds, before 1972) is recomputed
 * from the tables. Day rows are used only where the range's instants and its local dates agree
 * (every boundary is the first instant of its local date; not so where a fall-back repeats a local
 * midnight, as in America/Havana) and from 1973 on (a quarter hour then never straddles a local
 * midnight).
 */
export class KnexCommerceMetricsRepository extends RecomputedCommerceMetricsRepository {
  /**
   * `primary`: where a first ask for another zone's local days, and the day a kept zone was last
   * asked, are recorded (the reads may be a replica's); `clock`: that day.
   */
  constructor(db: Knex, private readonly primary: Knex = db, private readonly clock: Clock = systemClock) {
    super(db);
  }

  private servable(range: MetricsRange): boolean {
    return range.boundaries.every((b) => b.getTime() % QUARTER_MS === 0);
  }

  /** Whether the range's local dates are its instants: each boundary starts its local date and the instant before it is on an earlier date. */
  private byWholeDays(range: MetricsRange): boolean {
    if (range.start.getTime() < LOCAL_DAYS_FROM) return false;
    if (range.timeZone === 'UTC') return range.boundaries.every((b) => b.getTime() % DAY_MS === 0);
    if (range.wholeLocalDates !== undefined) return range.wholeLocalDates;
    const date = localDate(range.timeZone);
    return range.boundaries.every((b) => date(new Date(b.getTime() - 1)) < date(b));
  }

  private rows(rows: Array<Record<string, string | number>>): FiguresRow[] {
    return rows.map((r) => {
      const row = { currency: String(r.currency), bucket: String(r.bucket) } as FiguresRow;
      for (const f of FIGURES) row[f] = num(r[f]);
      return row;
    });
  }

  /** UTC: the day rollup (migration 0260), days keyed by their UTC start. */
  private async utcDays(range: MetricsRange): Promise<FiguresRow[]> {
    const currency = range.currency ? " AND currency IN (?, '')" : '';
    const c = range.currency ? [range.currency] : [];
    const { rows } = await this.db.raw<{ rows: Array<Record<string, string | number>> }>(
      `WITH src AS (
         SELECT bucket, currency, ${ROLLUP_COLUMNS} FROM commerce_rollup_day
          WHERE org_id = ? AND bucket >= ? AND bucket < ?${currency}
         UNION ALL
         SELECT bucket, currency, ${ROLLUP_COLUMNS} FROM commerce_metric_changes
          WHERE org_id = ? AND bucket >= ? AND bucket < ?${currency})
       SELECT currency, to_char(b, 'YYYY-MM-DD') AS bucket, ${FIGURES.join(', ')} FROM (
         SELECT currency, date_trunc(?, bucket AT TIME ZONE 'UTC') AS b, ${ROLLUP_SUMS} FROM src GROUP BY 1, 2) g`,
      [range.orgId, range.start, range.end, ...c, range.orgId, range.start, range.end, ...c, range.unit],
    );
    return this.rows(rows);
  }

  /**
   * Local days kept for the zone asked (migration 0370: the organization's own zone; 0440: another
   * zone its callers asked for): `rows` when ready, else the kept zone's state (`absent` when not
   * asked for yet) and how many other zones the organization keeps and has waiting; `stale` when
   * the kept zone was last asked before today (migration 0460). The zone's state is read in the
   * same statement as the days (marker rows with a null currency), so a zone changed or built
   * meanwhile is never read half-built.
   */
  private async localDays(range: MetricsRange, kept: boolean): Promise<{ rows?: FiguresRow[]; state: string; kept: number; waiting: number; stale: boolean }> {
    const currency = range.currency ? " AND currency IN (?, '')" : '';
    const c = range.currency ? [range.currency] : [];
    const zone = range.timeZone;
    const today = utcDate(this.clock.now());
    const ready = kept
      ? "SELECT last_asked_on FROM commerce_rollup_kept_zone WHERE org_id = ? AND time_zone = ? AND state = 'ready'"
      : "SELECT 1 FROM commerce_rollup_zone WHERE org_id = ? AND time_zone = ? AND state = 'ready'";
    const days = kept ? 'commerce_rollup_zone_day' : 'commerce_rollup_local_day';
    const keptZone = kept ? ' AND time_zone = ?' : '';
    const zeros = (n: number) => FIGURES.slice(n).map(() => '0').join(', ');
    // Not ready: the kept zone's state, the organization's kept and waiting zones (to ask for it),
    // and whether it was last asked before today (to record today).
    const marker = kept
      ? `coalesce((SELECT state FROM commerce_rollup_kept_zone WHERE org_id = ? AND time_zone = ?), 'absent'),
         (SELECT count(*) FROM commerce_rollup_kept_zone WHERE org_id = ? AND state <> 'waiting'),
         (SELECT count(*) FROM commerce_rollup_kept_zone WHERE org_id = ? AND state = 'waiting'),
         coalesce((SELECT (last_asked_on < ?::date)::int FROM commerce_rollup_kept_zone WHERE org_id = ? AND time_zone = ?), 0), ${zeros(3)}`
      : `'absent', ${zeros(0)}`;
    // Ready and last asked before today: one more marker row, 'ready'.
    const asked = kept ? `\n       UNION ALL\n       SELECT NULL, 'ready', 0, 0, 1, ${zeros(3)} WHERE EXISTS (SELECT 1 FROM z WHERE z.last_asked_on < ?::date)` : '';
    const { rows } = await this.db.raw<{ rows: Array<Record<string, string | number | null>> }>(
      `WITH z AS (${ready}),
       src AS (
         SELECT day, currency, ${ROLLUP_COLUMNS} FROM ${days}
          WHERE org_id = ?${keptZone} AND day >= (?::timestamptz AT TIME ZONE ?)::date AND day < (?::timestamptz AT TIME ZONE ?)::date${currency}
         UNION ALL
         SELECT (bucket AT TIME ZONE ?)::date, currency, ${ROLLUP_COLUMNS} FROM commerce_metric_changes
          WHERE org_id = ? AND bucket >= ? AND bucket < ?${currency})
       SELECT currency, to_char(b, 'YYYY-MM-DD') AS bucket, ${FIGURES.join(', ')} FROM (
         SELECT currency, date_trunc(?, day::timestamp) AS b, ${ROLLUP_SUMS} FROM src GROUP BY 1, 2) g
        WHERE EXISTS (SELECT 1 FROM z)
       UNION ALL
       SELECT NULL, ${marker} WHERE NOT EXISTS (SELECT 1 FROM z)${asked}`,
      [
        range.orgId, zone,
        range.orgId, ...(kept ? [zone] : []), range.start, zone, range.end, zone, ...c,
        zone, range.orgId, range.start, range.end, ...c,
        range.unit,
        ...(kept ? [range.orgId, zone, range.orgId, range.orgId, today, range.orgId, zone, today] : []),
      ],
    );
    const markers = rows.filter((r) => r.currency === null);
    const stale = markers.some((r) => Number(r[FIGURES[2]]) === 1);
    const notReady = markers.find((r) => r.bucket !== 'ready');
    if (notReady) return { state: String(notReady.bucket), kept: Number(notReady[FIGURES[0]]), waiting: Number(notReady[FIGURES[1]]), stale };
    return { rows: this.rows(rows.filter((r) => r.currency !== null) as Array<Record<string, string | number>>), state: 'ready', kept: 0, waiting: 0, stale };
  }

  /**
   * Asks the commerce-rollups job to keep local days for another zone (migration 0440), on the
   * primary (this reader may be a replica's): kept ('pending') while the organization keeps fewer
   * than KEPT_ZONES, else 'waiting' for one to fall idle (migration 0460, at most WAITING_ZONES);
   * never its own zone; counted under a lock per organization (the job's admission takes it too)
   * so two first askers cannot pass the bounds.
   */
  private async keepZone(orgId: string, timeZone: string): Promise<void> {
    const today = utcDate(this.clock.now());
    await this.primary.transaction(async (trx) => {
      await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`kassa:commerce-kept-zones:${orgId}`]);
      await trx.raw(
        `INSERT INTO commerce_rollup_kept_zone (org_id, time_zone, state, last_asked_on)
         SELECT o.id, ?, CASE WHEN k.kept < ? THEN 'pending' ELSE 'waiting' END, ?::date FROM organizations o
          CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE state <> 'waiting') AS kept, count(*) FILTER (WHERE state = 'waiting') AS waiting
                                FROM commerce_rollup_kept_zone WHERE org_id = o.id) k
          WHERE o.id = ? AND o.time_zone <> ? AND (k.kept < ? OR k.waiting < ?)
         ON CONFLICT (org_id, time_zone) DO NOTHING`,
        [timeZone, KEPT_ZONES, today, orgId, timeZone, KEPT_ZONES, WAITING_ZONES],
      );
    }).catch((error: { code?: string }) => {
      // The organization deleted meanwhile: nothing to keep (the answer is read all the same).
      if (error.code !== '23503') throw error;
    });
  }

  /**
   * Records that a kept or waiting zone was asked today (migration 0460), on the primary: one row
   * write per zone per day at most — conditional, so a replica that has not seen today's write yet
   * sends a statement that changes nothing.
   */
  private async askedToday(orgId: string, timeZone: string): Promise<void> {
    const today = utcDate(this.clock.now());
    await this.primary.raw('UPDATE commerce_rollup_kept_zone SET last_asked_on = ?::date WHERE org_id = ? AND time_zone = ? AND last_asked_on < ?::date', [
      today, orgId, timeZone, today,
    ]);
  }

  /**
   * Any zone whose boundaries are quarter hours, by whole local dates (issue 40: an API key asking
   * in another zone than the organization's). Each rollup row is counted in the bucket holding its
   * instants, where it lies inside one; a UTC day that a boundary cuts is counted whole in the
   * bucket of one of its ends (its anchor), and the hours and quarters on the other side of the
   * cuts are moved from that bucket to their own (− in the anchor's, + in theirs), the end with
   * fewer of them (Asia/Kathmandu, cut at 18:15 UTC: the day in the bucket of its start, and 3
   * quarters and 5 hours moved to the next; America/St_Johns, cut at 03:30: the day in the bucket
   * of its end, 3 hours and 2 quarters moved to the previous). Which bucket each row goes to is
   * worked out here from the boundaries (the bucket of an instant is the one whose bounds hold it,
   * which is its local date's because every boundary is the first instant of its local date:
   * `byWholeDays`); the statement then reads each rollup once — the UTC days over one key range,
   * the hours and quarters to move by their time of day (migration 0404's indexes, index-only: one
   * range per time of day, Kathmandu six hours and one quarter), hash-joined to the instants to
   * move and summed per (to, from) pair before counting them twice — and the queued changes by their
   * key range, each in the bucket of its quarter (`width_bucket` over the boundaries). 12 months by
   * day in Kathmandu: ~366 day rows and ~2,600 hour and quarter rows per currency.
   */
  private async otherZone(range: MetricsRange): Promise<FiguresRow[]> {
    const b = range.boundaries.map((d) => d.getTime());
    const n = b.length - 1;
    /** The bucket holding instant t: 1..n, or 0 outside the range. */
    const bucketAt = (t: number) => {
      if (t < b[0]! || t >= b[n]!) return 0;
      let lo = 0;
      let hi = n;
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (b[mid]! <= t) lo = mid;
        else hi = mid;
      }
      return lo + 1;
    };
    const ceil = (t: number, ms: number) => Math.ceil(t / ms) * ms;
    const floor = (t: number, ms: number) => Math.floor(t / ms) * ms;
    const days: number[] = [];
    const dayBucket: number[] = [];
    /** The hours and quarters to move, one entry each: its instant and the buckets it goes to (plus) and from (minus). */
    const moves = { h: { at: [] as number[], plus: [] as number[], minus: [] as number[] }, q: { at: [] as number[], plus: [] as number[], minus: [] as number[] } };
    /**
     * [lo, hi), inside one bucket, moved from bucket `minus` to its own: a run of quarters up to
     * the hour, one of hours, one of quarters after; three quarters before the hour (a start at
     * :15, Kathmandu's 18:15) are read as their hour less its first quarter (a run moved the
     * other way), two rows instead of three.
     */
    const move = (lo: number, hi: number, minus: number) => {
      const plus = bucketAt(lo);
      if (plus === minus || hi <= lo) return;
      const run = (kind: 'q' | 'h', from: number, to: number, sign = 1) => {
        const list = moves[kind];
        for (let t = from; t < to; t += kind === 'h' ? HOUR_MS : QUARTER_MS) {
          list.at.push(t);
          list.plus.push(sign > 0 ? plus : minus);
          list.minus.push(sign > 0 ? minus : plus);
        }
      };
      let lh = ceil(lo, HOUR_MS);
      const hh = floor(hi, HOUR_MS);
      if (lh > hh) return run('q', lo, hi);
      // (A segment ends at a local midnight; none falls at :45 UTC, so only its start can gain by this.)
      if (lh - lo === 3 * QUARTER_MS) {
        lh -= HOUR_MS;
        run('q', lh, lo, -1);
      } else run('q', lo, lh);
      run('h', lh, hh);
      run('q', hh, hi);
    };
    /** Rows of [lo, hi) split at `cuts` (each piece inside one bucket). */
    const rowsOf = (points: number[]) => {
      let rows = 0;
      for (let i = 0; i + 1 < points.length; i++) {
        const lo = points[i]!;
        const hi = points[i + 1]!;
        const lh = ceil(lo, HOUR_MS);
        const hh = floor(hi, HOUR_MS);
        rows += lh > hh ? (hi - lo) / QUARTER_MS : (lh - lo) / QUARTER_MS + (hh - lh) / HOUR_MS + (hi - hh) / QUARTER_MS;
      }
      return rows;
    };
    let next = 0;
    for (let day = floor(b[0]!, DAY_MS); day < b[n]!; day += DAY_MS) {
      while (next <= n && b[next]! <= day) next++;
      const cuts: number[] = [];
      for (let i = next; i <= n && b[i]! < day + DAY_MS; i++) cuts.push(b[i]!);
      if (cuts.length === 0) {
        const bucket = bucketAt(day);
        if (bucket) {
          days.push(day);
          dayBucket.push(bucket);
        }
        continue;
      }
      // Anchored at its start, the day moves [first cut, end); at its end, [start, last cut).
      const after = [...cuts, day + DAY_MS];
      const before = [day, ...cuts];
      const atStart = rowsOf(after) <= rowsOf(before);
      const anchor = bucketAt(atStart ? day : day + DAY_MS - 1);
      if (anchor) {
        days.push(day);
        dayBucket.push(anchor);
      }
      const points = atStart ? after : before;
      for (let i = 0; i + 1 < points.length; i++) move(points[i]!, points[i + 1]!, anchor);
    }
    const currency = range.currency ? " AND r.currency IN (?, '')" : '';
    const c = range.currency ? [range.currency] : [];
    const figures = FIGURES.map((f) => `r.${f}`).join(', ');
    // The moved rows by their time of day (migration 0404's index, index-only): one range of
    // instants per time of day, rows of other days (a zone's other offset) left by the join.
    const moved = (kind: 'h' | 'q', table: string) => {
      const list = moves[kind];
      const times = [...new Set(list.at.map((t) => t % DAY_MS))].map((ms) => `${ms / 1000} seconds`);
      const from = new Date(list.at.length ? Math.min(...list.at) : range.start.getTime());
      const to = new Date(list.at.length ? Math.max(...list.at) + 1 : range.start.getTime());
      // The rows in a subquery the planner cannot push the join into (OFFSET 0): read by the
      // ranges, then hashed against the instants — not one probe of the key per instant.
      return {
        sql: `SELECT m.plus, m.minus, r.currency, ${FIGURES.map((f) => `sum(r.${f})::bigint AS ${f}`).join(', ')}
           FROM unnest(?::bigint[], ?::int[], ?::int[]) AS m(at, plus, minus)
           JOIN (SELECT r.bucket, r.currency, ${figures} FROM ${table} r
                  WHERE r.org_id = ? AND ${timeOfDay('r.bucket')} = ANY(?::interval[]) AND r.bucket >= ? AND r.bucket < ?${currency} OFFSET 0) r ON r.bucket = to_timestamp(m.at)
          GROUP BY 1, 2, 3`,
        bindings: [seconds(list.at), `{${list.plus.join(',')}}`, `{${list.minus.join(',')}}`, range.orgId, `{${times.map((t) => `"${t}"`).join(',')}}`, from, to, ...c],
      };
    };
    const hours = moved('h', 'commerce_rollup_hour');
    const quarters = moved('q', 'commerce_rollup_quarter');
    const { rows } = await this.db.raw<{ rows: Array<Record<string, string | number>> }>(
      `WITH bk AS (
         SELECT i::int AS i, to_char(date_trunc(?, to_timestamp(t) AT TIME ZONE ?), 'YYYY-MM-DD') AS label FROM unnest(?::bigint[]) WITH ORDINALITY AS bk(t, i)),
       d AS (SELECT to_timestamp(day) AS day, i FROM unnest(?::bigint[], ?::int[]) AS d(day, i)),
       mv AS (${hours.sql} UNION ALL ${quarters.sql}),
       src AS (
         SELECT d.i, r.currency, ${figures} FROM commerce_rollup_day r JOIN d ON d.day = r.bucket
          WHERE r.org_id = ? AND r.bucket >= ? AND r.bucket < ?${currency}
         UNION ALL
         SELECT s.i, mv.currency, ${FIGURES.map((f) => `s.sign * mv.${f}`).join(', ')} FROM mv CROSS JOIN LATERAL (VALUES (mv.plus, 1::bigint), (mv.minus, -1::bigint)) AS s(i, sign)
         UNION ALL
         SELECT width_bucket(r.bucket, (SELECT array_agg(to_timestamp(t) ORDER BY t) FROM unnest(?::bigint[]) AS b(t))), r.currency, ${figures} FROM commerce_metric_changes r
          WHERE r.org_id = ? AND r.bucket >= ? AND r.bucket < ?${currency}),
       -- Summed per bucket number first, then named: one label per group, not one per row.
       g AS (SELECT src.i, src.currency, ${FIGURES.map((f) => `sum(src.${f}) AS ${f}`).join(', ')} FROM src GROUP BY 1, 2)
       SELECT g.currency, bk.label AS bucket, ${FIGURES.map((f) => `g.${f}`).join(', ')} FROM g JOIN bk ON bk.i = g.i`,
      [
        range.unit, range.timeZone, seconds(b.slice(0, n)),
        seconds(days), `{${dayBucket.join(',')}}`,
        ...hours.bindings, ...quarters.bindings,
        range.orgId, new Date(days[0] ?? range.start.getTime()), new Date((days[days.length - 1] ?? range.start.getTime()) + DAY_MS), ...c,
        seconds(b), range.orgId, range.start, range.end, ...c,
      ],
    );
    return this.rows(rows);
  }

  override async figures(range: MetricsRange): Promise<FiguresRow[]> {
    if (!this.servable(range)) return super.figures(range);
    if (this.byWholeDays(range)) {
      if (range.timeZone === 'UTC') return this.utcDays(range);
      const own = await this.localDays(range, false);
      if (own.rows) return own.rows;
      const kept = await this.localDays(range, true);
      if (kept.stale) await this.askedToday(range.orgId, range.timeZone);
      if (kept.rows) return kept.rows;
      // Asked for the first time (and room left): kept or waiting from now on; this answer from hours and quarters.
      if (kept.state === 'absent' && (kept.kept < KEPT_ZONES || kept.waiting < WAITING_ZONES)) await this.keepZone(range.orgId, range.timeZone);
      return this.otherZone(range);
    }
    const cut = [...new Set(range.boundaries.filter((b) => b.getTime() % HOUR_MS !== 0).map((b) => floorTo(b, HOUR_MS).getTime()))].map((t) => new Date(t));
    const currency = range.currency ? " AND currency IN (?, '')" : '';
    const c = range.currency ? [range.currency] : [];
    const { rows } = await this.db.raw<{ rows: Array<Record<string, string | number>> }>(
      `WITH src AS (
         SELECT bucket, currency, ${ROLLUP_COLUMNS} FROM commerce_rollup_hour
          WHERE org_id = ? AND bucket >= ? AND bucket < ? AND bucket <> ALL(?::timestamptz[])${currency}
         UNION ALL
         SELECT q.bucket, q.currency, ${FIGURES.map((f) => `q.${f}`).join(', ')}
           FROM unnest(?::timestamptz[]) AS cut(hour)
           JOIN commerce_rollup_quarter q ON q.org_id = ? AND q.bucket >= cut.hour AND q.bucket < cut.hour + interval '1 hour'
          WHERE q.bucket >= ? AND q.bucket < ?${currency.replace('currency', 'q.currency')}
         UNION ALL
         SELECT bucket, currency, ${ROLLUP_COLUMNS} FROM commerce_metric_changes
          WHERE org_id = ? AND bucket >= ? AND bucket < ?${currency})
       SELECT currency, to_char(b, 'YYYY-MM-DD') AS bucket, ${FIGURES.join(', ')} FROM (
         SELECT currency, date_trunc(?, bucket AT TIME ZONE ?) AS b, ${ROLLUP_SUMS} FROM src GROUP BY 1, 2) g`,
      [
        range.orgId, floorTo(range.start, HOUR_MS), range.end, timestamps(cut), ...c,
        timestamps(cut), range.orgId, range.start, range.end, ...c,
        range.orgId, range.start, range.end, ...c,
        range.unit, range.timeZone,
      ],
    );
    return this.rows(rows);
  }

  /**
   * Started minus closed (started and ended) before the start: UTC days before its day, hours
   * before its hour, quarters before it, and the queued changes — a few hundred rows a year of
   * history, whatever the number of subscriptions.
   */
  override async subscriptionsActiveAtStart(range: MetricsRange): Promise<SubscriptionBaseRow[]> {
    if (!this.servable(range)) return super.subscriptionsActiveAtStart(range);
    const at = range.start;
    const day = floorTo(at, 24 * HOUR_MS);
    const hour = floorTo(at, HOUR_MS);
    const currency = range.currency ? ' AND currency = ?' : " AND currency <> ''";
    const c = range.currency ? [range.currency] : [];
    const cols = 'currency, new_subscriptions, closed_subscriptions, new_mrr, closed_mrr';
    const { rows } = await this.db.raw<{ rows: Array<Record<string, string | number>> }>(
      `SELECT currency, sum(new_subscriptions - closed_subscriptions) AS count, sum(new_mrr - closed_mrr) AS mrr FROM (
         SELECT ${cols} FROM commerce_rollup_day WHERE org_id = ? AND bucket < ?${currency}
         UNION ALL SELECT ${cols} FROM commerce_rollup_hour WHERE org_id = ? AND bucket >= ? AND bucket < ?${currency}
         UNION ALL SELECT ${cols} FROM commerce_rollup_quarter WHERE org_id = ? AND bucket >= ? AND bucket < ?${currency}
         UNION ALL SELECT ${cols} FROM commerce_metric_changes WHERE org_id = ? AND bucket < ?${currency}) s
        GROUP BY currency HAVING sum(new_subscriptions - closed_subscriptions) <> 0 OR sum(new_mrr - closed_mrr) <> 0`,
      [range.orgId, day, ...c, range.orgId, day, hour, ...c, range.orgId, hour, at, ...c, range.orgId, at, ...c],
    );
    return rows.map((r) => ({ currency: String(r.currency), count: num(r.count), mrr: num(r.mrr) }));
  }
}
