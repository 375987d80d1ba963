/**
 * The time zone the console shows dates and buckets in. The contract has no organization time
 * zone yet, so it is the browser's (the member's own), and the pages say which one.
 */
export function consoleTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}
