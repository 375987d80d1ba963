/**
 * One page of a merchant list (orders, customers, subscriptions), newest first, at a cost that does
 * not grow with the organization (issue 32):
 *
 * - the rows: `ORDER BY created_at DESC, id DESC` (a total order: `id` breaks ties) with LIMIT
 *   size + 1, over an index `(org_id, filter…, created_at, id)`, so the scan stops after the page
 *   (the extra row says whether more follow);
 * - a cursor (`starting_after` / `ending_before`, an id of the list) is a keyset condition
 *   `(created_at, id) < (…)` on the same index: a page anywhere in the list costs what the first
 *   costs, where an OFFSET reads every row it skips;
 * - the total: counted exactly up to EXACT_TOTAL_BOUND matching rows (an index-only scan that stops
 *   there), beyond that the planner's estimate of the filtered count, never below the bound + 1.
 *   An exact count of a million orders reads a million index entries on every request; no page
 *   shown to a person needs to know whether there are 1,234,567 or 1,234,568. The bound (1,000:
 *   50 pages of the default size) keeps the count's cost at what a short list costs anyway, so
 *   a list costs the same for a merchant with ten thousand orders as for one with a million.
 */
import type { Knex } from 'knex';
import { EXACT_TOTAL_BOUND, type ListPage, type ListWindow } from '../kernel/list.js';

export interface ListQuery {
  /** A fresh query over the list's rows: its FROM and WHERE, no select, order or limit. */
  filtered: () => Knex.QueryBuilder;
  /** The sort key's columns as the query names them (`created_at`, `c.created_at`). */
  createdAt: string;
  id: string;
  /** What a row selects (`orders.*`, `c.*`). */
  select: string;
  /**
   * The rows whose planner estimate stands for the total beyond the bound, when the planner
   * misjudges `filtered` (a semi-join): same alias and columns. Default: `filtered`.
   */
  estimated?: () => Knex.QueryBuilder;
  /** Count exactly up to this many rows (default EXACT_TOTAL_BOUND; date ranges count further). */
  exactBound?: number;
}

function withCursor(q: Knex.QueryBuilder, query: ListQuery, window: ListWindow): Knex.QueryBuilder {
  if (window.startingAfter) q.whereRaw('(??, ??) < (?, ?)', [query.createdAt, query.id, window.startingAfter.createdAt, window.startingAfter.id]);
  if (window.endingBefore) q.whereRaw('(??, ??) > (?, ?)', [query.createdAt, query.id, window.endingBefore.createdAt, window.endingBefore.id]);
  return q;
}

/** The planner's row estimate for the filtered rows (statistics, no scan). */
export async function estimatedCount(db: Knex, q: Knex.QueryBuilder): Promise<number> {
  const { sql, bindings } = q.select(db.raw('1')).toSQL();
  const result = await db.raw(`EXPLAIN (FORMAT JSON) ${sql}`, bindings as Knex.RawBinding[]);
  const rows = (result as { rows: Array<Record<string, unknown>> }).rows;
  let plan = rows[0]?.['QUERY PLAN'];
  if (typeof plan === 'string') plan = JSON.parse(plan);
  const estimated = Number((plan as Array<{ Plan: { 'Plan Rows': number } }>)[0]?.Plan['Plan Rows']);
  return Number.isFinite(estimated) ? Math.round(estimated) : 0;
}

/**
 * Exact up to the bound, then estimated: `{ total, exact }`. The capped rows are taken in the
 * list's order, that of its index `(org_id, filter…, created_at, id)`: so the count is an index
 * (only) scan that stops after bound + 1 entries. Unordered, the planner took a LIMITed sequential
 * scan whenever the filter matched most of the table, reading every row stored before the bound's
 * worth of matching ones.
 */
export async function boundedCount(
  db: Knex,
  query: Pick<ListQuery, 'createdAt' | 'id'>,
  q: () => Knex.QueryBuilder,
  bound = EXACT_TOTAL_BOUND,
  estimated: () => Knex.QueryBuilder = q,
): Promise<{ total: number; exact: boolean }> {
  const capped = q().select(db.raw('1')).orderBy([{ column: query.createdAt, order: 'desc' }, { column: query.id, order: 'desc' }]).limit(bound + 1);
  const counted = await db.count<{ n: string | number }[]>({ n: '*' }).from(capped.as('capped'));
  const n = Number(counted[0]?.n ?? 0);
  if (n <= bound) return { total: n, exact: true };
  return { total: Math.max(bound + 1, await estimatedCount(db, estimated())), exact: false };
}

/** Whether the list holds a row newer (`>`) or older (`<`) than `row`: one index probe. */
async function exists(db: Knex, query: ListQuery, row: Record<string, unknown>, op: '<' | '>'): Promise<boolean> {
  const key = (column: string) => row[column.slice(column.indexOf('.') + 1)];
  const found = await query.filtered().whereRaw(`(??, ??) ${op} (?, ?)`, [query.createdAt, query.id, key(query.createdAt) as Date, key(query.id) as string]).select(db.raw('1')).limit(1);
  return found.length > 0;
}

export async function readListPage<R extends Record<string, unknown>>(db: Knex, query: ListQuery, window: ListWindow): Promise<ListPage<R>> {
  const backwards = window.endingBefore !== undefined;
  const order = backwards ? 'asc' : 'desc';
  const sort = [{ column: query.createdAt, order }, { column: query.id, order }];
  // A page by number past the first skips its offset over the index alone (an index-only scan of
  // the sort key) and reads only the page's rows: skipping whole rows read every skipped row's heap
  // page (figures in docs/benchmarks.md, "last page by number").
  const rowsQuery = (
    window.offset === 0
      ? withCursor(query.filtered(), query, window).select(db.raw(query.select)).orderBy(sort).limit(window.limit + 1)
      : withCursor(query.filtered(), query, window)
          .select(db.raw(query.select))
          .whereIn(query.id, withCursor(query.filtered(), query, window).select(query.id).orderBy(sort).offset(window.offset).limit(window.limit + 1))
          .orderBy(sort)
  ) as Promise<R[]>;
  const firstPage = window.offset === 0;
  const estimate = () => withCursor((query.estimated ?? query.filtered)(), query, window);
  const bound = query.exactBound ?? EXACT_TOTAL_BOUND;
  const [fetched, counted] = await Promise.all([
    rowsQuery,
    // The first page that holds every row is its own count.
    firstPage ? undefined : boundedCount(db, query, () => withCursor(query.filtered(), query, window), bound, estimate),
  ]);
  const hasMore = fetched.length > window.limit;
  const rows = hasMore ? fetched.slice(0, window.limit) : fetched;
  if (backwards) rows.reverse();
  const total = counted ?? (hasMore ? await boundedCount(db, query, () => withCursor(query.filtered(), query, window), bound, estimate) : { total: rows.length, exact: true });
  // The other direction: rows skipped by the offset are there; past a cursor, the cursor's own row
  // need not match the filters, so one probe asks.
  const cursor = backwards ? window.endingBefore : window.startingAfter;
  const edge = backwards ? rows.at(-1) : rows[0];
  const behind = edge !== undefined && (window.offset > 0 || (cursor !== undefined && (await exists(db, query, edge, backwards ? '<' : '>'))));
  return {
    records: rows,
    total: total.total,
    totalExact: total.exact,
    hasMore,
    hasOlder: backwards ? behind : hasMore,
    hasNewer: backwards ? hasMore : behind,
  };
}
