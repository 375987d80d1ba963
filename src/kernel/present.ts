/** Response formatting shared by every API. */

const twoDigits = (n: number): string => (n < 10 ? `0${n}` : `${n}`);
const threeDigits = (n: number): string => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/**
 * `Date.prototype.toISOString()`, byte for byte (test/kernel/present.test.ts pins it on many
 * dates): from the UTC getters for years 1000–9999, about half its cost (a page of orders prints
 * 40); any other year (its `±YYYYYY` form) and an invalid date (its RangeError) go to it.
 */
export const iso = (d: Date): string => {
  const year = d.getUTCFullYear();
  if (!(year >= 1000 && year <= 9999)) return d.toISOString();
  return `${year}-${twoDigits(d.getUTCMonth() + 1)}-${twoDigits(d.getUTCDate())}T${twoDigits(d.getUTCHours())}:${twoDigits(d.getUTCMinutes())}:${twoDigits(d.getUTCSeconds())}.${threeDigits(d.getUTCMilliseconds())}Z`;
};
export const isoOrNull = (d: Date | null | undefined): string | null => (d ? iso(d) : null);

export function page<T>(records: T[], total: number, pageNumber: number, size: number) {
  return { records, total, page: pageNumber, size, pages: Math.ceil(total / size), current: pageNumber };
}

/**
 * A page of a cursor-capable list (orders, customers, subscriptions): the seed's fields, plus
 * whether the total is exact, whether more follow, and the ids to pass as `starting_after`
 * (nextCursor) and `ending_before` (previousCursor) for the neighbouring pages, null at either end.
 */
export function listPage<T extends { id: string }, P>(
  result: { records: T[]; total: number; totalExact: boolean; hasMore: boolean; hasOlder: boolean; hasNewer: boolean },
  present: (record: T, index: number) => P,
  pageNumber: number,
  size: number,
) {
  const { records } = result;
  return {
    ...page(records.map((r, i) => present(r, i)), result.total, pageNumber, size),
    totalExact: result.totalExact,
    hasMore: result.hasMore,
    nextCursor: result.hasOlder ? records.at(-1)!.id : null,
    previousCursor: result.hasNewer ? records[0]!.id : null,
  };
}
