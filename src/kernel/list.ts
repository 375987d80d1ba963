import { validationError } from './errors.js';

/**
 * A window onto a merchant list (orders, customers, subscriptions) and the page it yields: the
 * shapes repositories, services and handlers share (src/db/list-page.ts reads them; issue 32).
 */

/** Lists with at most this many matching rows report an exact `total`; larger ones an estimate. */
export const EXACT_TOTAL_BOUND = 1_000;

/**
 * Lists filtered by a creation date range (orders' `date_from` / `date_to`) count exactly up to
 * this many rows (issue 40). The planner's estimate of a range is weakest exactly where people look,
 * at the newest end (the histogram's last bucket is extrapolated: −27.6 % for a 7-day range of the
 * 1M-order organization); the range's count is an index-only scan of the list's own
 * `(org_id, …, created_at, id)` index, whose cost was measured per entry (docs/benchmarks.md,
 * "Honest totals"), so this bound keeps the count within a small share of a page's cost.
 */
export const DATE_RANGE_EXACT_TOTAL_BOUND = 5_000;

/** The position of a list's row: its sort key (`created_at DESC, id DESC`). */
export interface Keyset {
  createdAt: Date;
  id: string;
}

export interface ListWindow {
  offset: number;
  limit: number;
  /** Only rows strictly after this one in the list's order (older). */
  startingAfter?: Keyset;
  /** Only rows strictly before this one (newer), the nearest taken first; answered newest first. */
  endingBefore?: Keyset;
}

export interface ListPage<R> {
  records: R[];
  total: number;
  totalExact: boolean;
  /** More rows follow in the direction of paging (older; newer with endingBefore). */
  hasMore: boolean;
  /** Rows of the list lie after the last record (older) / before the first (newer). */
  hasOlder: boolean;
  hasNewer: boolean;
}

/** What a list request asks for, before its cursor's id is resolved to a Keyset. */
export interface ListRequest {
  page: number;
  size: number;
  startingAfter?: string;
  endingBefore?: string;
}

/**
 * The window a request asks for, its cursor's id resolved by `keyset` (which finds only the
 * organization's own rows): an unknown id, or both cursors at once, is a validation error.
 */
export async function resolveWindow(request: ListRequest, keyset: (id: string) => Promise<Keyset | undefined>, noun: string): Promise<ListWindow> {
  const window: ListWindow = { offset: (request.page - 1) * request.size, limit: request.size };
  if (request.startingAfter !== undefined && request.endingBefore !== undefined) throw validationError('Give at most one of starting_after and ending_before');
  const [param, id] = request.startingAfter !== undefined ? ['starting_after', request.startingAfter] : ['ending_before', request.endingBefore];
  if (id === undefined) return window;
  const found = await keyset(id);
  if (!found) throw validationError(`${param} names no ${noun} of this organization`);
  if (param === 'starting_after') window.startingAfter = found;
  else window.endingBefore = found;
  return window;
}
