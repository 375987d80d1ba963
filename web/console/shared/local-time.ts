/**
 * Date and time fields of the console's forms (pure, no DOM): a member types a moment in their own
 * time zone (an `<input type="datetime-local">`, `YYYY-MM-DDTHH:mm`), the API takes ISO 8601 in
 * UTC. Tested by test/console/local-time.test.ts.
 *
 * Clock changes: a local time that does not exist (the hour skipped when summer time starts) is
 * read as the same wall-clock time before the jump, shifted forward as the clocks were (02:30 in
 * Paris on the day they jump from 02:00 to 03:00 is 03:30 local, 01:30Z), as JavaScript's `Date`
 * reads it; a local time that happens twice (the hour repeated in autumn) is its first occurrence.
 */

const LOCAL = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/;

/** How far the zone's wall clock is ahead of UTC at an instant, in milliseconds. */
function offsetAt(ms: number, timeZone: string): number {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' }).formatToParts(new Date(ms));
  const get = (type: string) => Number(parts.find((p) => p.type === type)?.value);
  return Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second')) - (ms - (ms % 1000 + 1000) % 1000);
}

/**
 * A local date and time (`2026-12-31T23:59`, seconds optional) in `timeZone` as an ISO instant in
 * UTC (`2026-12-31T22:59:00.000Z` for Europe/Paris), or undefined when it is no calendar date and
 * time (empty, `2026-02-30T10:00`, `24:00`, another format).
 */
export function localInputToIso(value: string, timeZone: string): string | undefined {
  const match = LOCAL.exec(value.trim());
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1).map((p) => Number(p ?? 0)) as [number, number, number, number, number, number];
  const wall = Date.UTC(year, month - 1, day, hour, minute, second);
  const check = new Date(wall);
  if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) return undefined;
  // The offsets just before and after: the earlier reading first (the first of a repeated hour).
  const before = offsetAt(wall - 86_400_000, timeZone);
  const after = offsetAt(wall + 86_400_000, timeZone);
  const candidates = [wall - Math.max(before, after), wall - Math.min(before, after)].filter((ms) => offsetAt(ms, timeZone) === wall - ms);
  // None: the time was skipped; read with the offset before the jump (the clocks moved it forward).
  const ms = candidates.length > 0 ? candidates[0]! : wall - before;
  return new Date(ms).toISOString();
}

/** An instant as the value of a datetime-local field in `timeZone` (`YYYY-MM-DDTHH:mm`); '' for nothing or no date. */
export function isoToLocalInput(iso: string | null | undefined, timeZone: string): string {
  if (!iso) return '';
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return '';
  const local = new Date(ms + offsetAt(ms, timeZone));
  return local.toISOString().slice(0, 16);
}

/**
 * What is wrong with an optional expiry a member typed, as a sentence the form shows under the
 * field, or undefined when it is fine (empty: no expiry). `now` is the browser's clock: the server
 * checks again with its own and answers a 400 with its message.
 */
export function expiryProblem(value: string, now: Date, timeZone: string): string | undefined {
  if (value.trim() === '') return undefined;
  const iso = localInputToIso(value, timeZone);
  if (iso === undefined) return 'Enter a date and a time, e.g. 2026-12-31 23:59.';
  if (Date.parse(iso) <= now.getTime()) return 'The expiry is in the past: choose a later date and time, or leave it empty for no expiry.';
  return undefined;
}
