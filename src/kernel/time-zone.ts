/**
 * IANA time zone names, checked with Intl (the runtime's ICU data: what `Intl.supportedValuesOf`
 * lists and the aliases it accepts). An offset (`+01:00`) is not a name: PostgreSQL reads such a
 * string with the POSIX sign, the opposite of ISO 8601's, so it is refused rather than misread.
 */
const NAME = /^[A-Za-z][A-Za-z0-9_+\-/]{0,63}$/;

/**
 * The canonical spelling of a known zone, or undefined: the name the runtime's ICU resolves it to
 * (`europe/paris` → `Europe/Paris`, `Etc/UTC` → `UTC`, and aliases to one of them: on Node 20
 * `Asia/Kolkata` → `Asia/Calcutta`). Organizations' zones are stored under it and commerce metrics
 * look zones up by it, so an alias never counts as a zone of its own.
 */
export function canonicalTimeZone(name: string): string | undefined {
  if (!NAME.test(name)) return undefined;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

const LONG_DATE_UTC = new Intl.DateTimeFormat('en-GB', { dateStyle: 'long', timeZone: 'UTC' });

/**
 * A day as people read it, in UTC: "22 December 2026" (en-GB, long). The form of the dates that are
 * stored in text once and read on every page, receipt, e-mail and webhook (a proration line's
 * "… until 22 December 2026", a trial order's note): no organization's zone, no ambiguous 12/01,
 * and the same day the portal, the hosted pages and the buyer e-mails print for the same instant.
 */
export function longDateUtc(d: Date): string {
  return LONG_DATE_UTC.format(d);
}
