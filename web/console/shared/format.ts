/**
 * Pure formatting of money, time and list filters (no DOM, no state): tested by
 * test/console/format.test.ts.
 */

/**
 * Money reads the same on every surface: the console shows it with the server's one formatter
 * (src/kernel/money.ts, pure, bundled in), and counts a currency's decimals as the server stores them.
 */
export { decimalsOf as currencyDecimals, formatMoney, formatUnitAmount } from '../../../src/kernel/money.js';
import { decimalsOf as currencyDecimals } from '../../../src/kernel/money.js';

const LLM_COST = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 6, maximumFractionDigits: 6 });

/**
 * An LLM cost (a float of US dollars, priced per token) always to six decimals — millionths of a
 * dollar, where single calls are priced — so costs line up and compare at a glance:
 * `$0.000013`, `$0.003800`, `$1,234.500000`. One rule on every telemetry page (docs/architecture.md, "Money as people read it").
 */
export function formatLlmCost(usd: number | null | undefined): string {
  if (usd === null || usd === undefined || !Number.isFinite(usd)) return '—';
  return LLM_COST.format(usd).replace('-', '−');
}

/** An axis label: compact, in major units, with the currency on every money tick (`$1.5K`, `€200`, `25 USDC`). */
export function formatAxisValue(value: number, currency?: string): string {
  if (!currency) return new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 2 }).format(value);
  const major = value / 10 ** currencyDecimals(currency);
  const code = currency.toUpperCase();
  try {
    if (code !== 'USDC' && code !== 'USDT') return new Intl.NumberFormat('en-US', { style: 'currency', currency: code, notation: 'compact', minimumFractionDigits: 0, maximumFractionDigits: 2 }).format(major);
  } catch {
    // An unknown code: written after the number, as for the stablecoins.
  }
  return `${new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 2 }).format(major)} ${code}`;
}

/** A timestamp in a time zone, e.g. `Nov 22, 2026, 09:31`; `—` for nothing. */
export function formatDateTime(iso: string | null | undefined, timeZone = 'UTC', locale = 'en-US'): string {
  if (!iso) return '—';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return '—';
  return new Intl.DateTimeFormat(locale, { timeZone, year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(date);
}

/** The local calendar date (`YYYY-MM-DD`) of an instant in a time zone. */
export function localDate(instant: Date, timeZone: string): string {
  const parts = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).formatToParts(instant);
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? '';
  return `${get('year')}-${get('month')}-${get('day')}`;
}

/** `YYYY-MM-DD` plus `days` (negative: back), on the calendar (no time zone involved). */
export function addDays(date: string, days: number): string {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  const moved = new Date(Date.UTC(y, m - 1, d + days));
  return moved.toISOString().slice(0, 10);
}

/** `YYYY-MM-DD` plus `months`, clamped to the month's last day (Jan 31 + 1 month → Feb 28/29). */
export function addMonths(date: string, months: number): string {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  const first = new Date(Date.UTC(y, m - 1 + months, 1));
  const last = new Date(Date.UTC(first.getUTCFullYear(), first.getUTCMonth() + 1, 0)).getUTCDate();
  first.setUTCDate(Math.min(d, last));
  return first.toISOString().slice(0, 10);
}

export type RangeKey = '7d' | '30d' | '90d' | '12m';
export interface DateRange {
  start: string;
  end: string;
  interval: 'day' | 'week' | 'month';
}

/** The home page's ranges, ending today (local date), with the bucket size that keeps a chart readable. */
export function rangeFor(key: RangeKey, today: string): DateRange {
  switch (key) {
    case '7d':
      return { start: addDays(today, -6), end: today, interval: 'day' };
    case '30d':
      return { start: addDays(today, -29), end: today, interval: 'day' };
    case '90d':
      return { start: addDays(today, -89), end: today, interval: 'week' };
    case '12m':
      return { start: addMonths(addDays(today, 1 - Number(today.slice(8, 10))), -11), end: today, interval: 'month' };
  }
}

/** Relative change as text: `+12.5%`, `−3%`, `new` (from zero), `—` (both zero). */
export function formatChange(current: number, previous: number): string {
  if (previous === 0) return current === 0 ? '—' : 'new';
  const change = ((current - previous) / Math.abs(previous)) * 100;
  const rounded = Math.round(change * 10) / 10;
  if (rounded === 0) return '0%';
  return `${rounded > 0 ? '+' : '−'}${Math.abs(rounded)}%`;
}

/**
 * A list's filters as the page URL's query and back: empty values are left out and keys keep a
 * stable order, so the same filters always make the same URL (a deep link, a bookmark).
 */
export function filtersToQuery(filters: Record<string, string | number | undefined | null>): string {
  const params = new URLSearchParams();
  for (const key of Object.keys(filters).sort()) {
    const value = filters[key];
    if (value === undefined || value === null || value === '') continue;
    params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

/** Only the known keys of a URL query, trimmed; anything else (a typo, an old link) is ignored. */
export function queryToFilters<K extends string>(query: Record<string, string | undefined>, keys: readonly K[]): Partial<Record<K, string>> {
  const filters: Partial<Record<K, string>> = {};
  for (const key of keys) {
    const value = query[key]?.trim();
    if (value) filters[key] = value;
  }
  return filters;
}

/** A local date (`YYYY-MM-DD`) at midnight in a time zone, as Unix seconds (the orders list's `date_from`/`date_to`). */
export function localMidnightUnix(date: string, timeZone: string): number {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  const utcGuess = Date.UTC(y, m - 1, d);
  // The zone's offset at that instant, applied twice to land on the local midnight across a DST change.
  const offsetAt = (ms: number) => {
    const parts = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' }).formatToParts(new Date(ms));
    const get = (type: string) => Number(parts.find((p) => p.type === type)?.value);
    return Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second')) - ms;
  };
  let ms = utcGuess - offsetAt(utcGuess);
  ms = utcGuess - offsetAt(ms);
  return Math.floor(ms / 1000);
}

/** What a search box's text is: an object id goes to its page, an e-mail or anything else filters. */
export function classifySearch(text: string): { kind: 'order' | 'customer' | 'subscription' | 'email' | 'tx' | 'reference'; value: string } {
  const value = text.trim();
  if (/^ORD_/i.test(value)) return { kind: 'order', value };
  if (/^CUS_/i.test(value)) return { kind: 'customer', value };
  if (/^SUB_/i.test(value)) return { kind: 'subscription', value };
  // A transaction hash (0x and 64 hex digits, any case): the orders list's `tx_hash` filter, whose pattern wants `0x`.
  if (/^0x[0-9a-f]{64}$/i.test(value)) return { kind: 'tx', value: `0x${value.slice(2)}` };
  if (/^[^@\s]+@[^@\s]+$/.test(value)) return { kind: 'email', value };
  return { kind: 'reference', value };
}

/**
 * What a person typed as an amount (`12.5`, `1,234.56`, `25`) in minor units of the currency, or
 * undefined when it is not an amount (too many decimals, letters, negative, zero).
 */
export function parseMoney(text: string, currency: string): number | undefined {
  const cleaned = text.trim().replace(/[\s,_]/g, '');
  const decimals = currencyDecimals(currency);
  const match = /^(\d+)(?:\.(\d*))?$/.exec(cleaned);
  if (!match) return undefined;
  const fraction = match[2] ?? '';
  if (fraction.length > decimals) return undefined;
  const minor = Number(match[1]! + fraction.padEnd(decimals, '0'));
  return Number.isSafeInteger(minor) && minor > 0 ? minor : undefined;
}

/**
 * A usage price as a person types it (`0.04` USD per 1,000 units) as the exact decimal of the
 * minor unit per unit that `MeteredPricing.unitAmountDecimal` takes (`"0.004"`: 0.004 cents a
 * unit), or undefined when it is not a positive amount or needs more than 12 fraction digits.
 * `per` is a power of ten, so the division is exact.
 */
export function usageUnitAmountDecimal(text: string, currency: string, per: 1 | 100 | 1000 | 1_000_000): string | undefined {
  const match = /^(\d+)(?:\.(\d*))?$/.exec(text.trim().replace(/[\s,_]/g, ''));
  if (!match) return undefined;
  const digits = `${match[1]!}${match[2] ?? ''}`.replace(/^0+(?=\d)/, '');
  if (!/[1-9]/.test(digits)) return undefined;
  // The value is digits × 10^-scale in minor units: the typed fraction, less the currency's decimals, plus per's zeros.
  const scale = (match[2] ?? '').length - currencyDecimals(currency) + String(per).length - 1;
  if (scale <= 0) return `${digits}${'0'.repeat(-scale)}`.replace(/^0+(?=\d)/, '');
  const padded = digits.padStart(scale + 1, '0');
  const whole = padded.slice(0, padded.length - scale).replace(/^0+(?=\d)/, '');
  const fraction = padded.slice(padded.length - scale).replace(/0+$/, '');
  if (fraction.length > 12) return undefined;
  return fraction ? `${whole}.${fraction}` : whole;
}

/** Minor units as the plain number a form field shows (`1050`, USD → `10.50`). */
export function minorToInput(minor: number, currency: string): string {
  const decimals = currencyDecimals(currency);
  if (decimals === 0) return String(minor);
  const digits = String(minor).padStart(decimals + 1, '0');
  return `${digits.slice(0, -decimals)}.${digits.slice(-decimals)}`;
}

/** USDC has 6 decimals: base units shown as USDC (exact, as a decimal string); other assets as base units. */
export function formatAmount(amount: string, asset: string | null): string {
  if (asset !== 'USDC' || !/^\d+$/.test(amount)) return `${amount} base units${asset ? ` of ${asset}` : ''}`;
  const padded = amount.padStart(7, '0');
  const whole = padded.slice(0, -6).replace(/^0+(?=\d)/, '');
  const fraction = padded.slice(-6).replace(/0+$/, '');
  return `${whole}${fraction ? `.${fraction}` : ''} USDC`;
}

/** An exact decimal quantity with grouped thousands: `'1234567.5'` → `1,234,567.5`. */
export function formatQuantity(decimal: string, locale = 'en-US'): string {
  const [whole = '0', fraction] = decimal.split('.');
  const grouped = new Intl.NumberFormat(locale, { useGrouping: true }).format(BigInt(whole));
  return fraction ? `${grouped}.${fraction}` : grouped;
}
