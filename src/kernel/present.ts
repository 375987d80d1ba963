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
/**
 * `new Date(ms).toISOString()`, byte for byte, for many instants close together (a trace's 5,000
 * spans print 10,000): the "YYYY-MM-DDTHH:MM:" prefix of the last minute seen is reused, so most
 * calls only print seconds and milliseconds. Non-integers and instants outside years 1000–9999 go
 * to toISOString (test/kernel/present.test.ts compares them on random and edge instants).
 */
let minuteKey = NaN;
let minutePrefix = '';
const MIN_MS = -30610224000000; // 1000-01-01T00:00:00.000Z
const MAX_MS = 253402300799999; // 9999-12-31T23:59:59.999Z
export const isoFromMs = (ms: number): string => {
  if (!Number.isInteger(ms) || ms < MIN_MS || ms > MAX_MS) return new Date(ms).toISOString();
  const minute = Math.floor(ms / 60_000);
  if (minute !== minuteKey) {
    minutePrefix = iso(new Date(minute * 60_000)).slice(0, 17);
    minuteKey = minute;
  }
  const inMinute = ms - minute * 60_000;
  const seconds = Math.floor(inMinute / 1000);
  return `${minutePrefix}${twoDigits(seconds)}.${threeDigits(inMinute - seconds * 1000)}Z`;
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
