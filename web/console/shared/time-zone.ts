/**
 * Time zones of the console. The home page's figures are in the organization's time zone (its
 * settings' `timeZone`, 'UTC' until an owner or admin changes it), and the page says which. The
 * other pages show instants in the browser's zone (the member's own), as `consoleTimeZone()` says.
 */
import { consoleApi } from './api';
import { useApi } from './use-api';

export function consoleTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/** The organization's time zone, from `GET /v1/console/organization`. */
export function useOrganizationTimeZone() {
  return useApi(() => consoleApi.GET('/v1/console/organization').then((r) => ({ ...r, data: r.data?.data.timeZone })), []);
}

/** The zones a select offers: UTC first, then every IANA name this browser knows (Intl). */
export function timeZoneChoices(current: string): string[] {
  const supported = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
  const all = ['UTC', ...supported.filter((z) => z !== 'UTC')];
  // A zone stored under a name this browser does not list (an alias, an older ICU) stays selectable.
  return all.includes(current) ? all : [current, ...all];
}
