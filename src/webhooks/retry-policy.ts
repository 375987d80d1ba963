/**
 * The delivery rules of the spec (merchant.yaml `webhooks`): which outcomes are retried and when.
 * Pure functions of the attempt, the response and the clock, so tests can check the schedule
 * without sending anything.
 */

/** Attempts per delivery, the first one included. */
export const MAX_ATTEMPTS = 12;
/** First retry after 30 s, doubling per attempt (30 s, 1 min, 2 min, … 32 min, then the cap). */
export const BACKOFF_BASE_MS = 30_000;
/** No retry waits longer than an hour, jitter and Retry-After included. */
export const BACKOFF_CAP_MS = 3_600_000;
/** ±20%: spreads retries of many deliveries that failed together (a receiver outage). */
export const JITTER = 0.2;

export type Verdict = 'succeeded' | 'retry' | 'fail';

/**
 * `null` status = no HTTP response (transport error, timeout, refused address): retried.
 * 2xx acknowledges. 408, 429 and 5xx are retried. 1xx/3xx (redirects are not followed) and other
 * 4xx are final.
 */
export function verdict(statusCode: number | null): Verdict {
  if (statusCode === null) return 'retry';
  if (statusCode >= 200 && statusCode < 300) return 'succeeded';
  if (statusCode === 408 || statusCode === 429 || (statusCode >= 500 && statusCode < 600)) return 'retry';
  return 'fail';
}

/** Delay after failed attempt number `attempt` (1-based): base·2^(attempt-1), ±jitter, capped. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const exponential = BACKOFF_BASE_MS * 2 ** Math.min(attempt - 1, 30);
  const jittered = exponential * (1 - JITTER + 2 * JITTER * random());
  return Math.round(Math.min(BACKOFF_CAP_MS, jittered));
}

/**
 * `Retry-After` as delta-seconds or an HTTP date (RFC 9110 §10.2.3), relative to `now`; undefined
 * when absent or unparseable. Capped at one hour; a date in the past means "now".
 */
export function retryAfterMs(value: string | undefined, now: Date): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Math.min(BACKOFF_CAP_MS, Number(trimmed) * 1000);
  if (!/[a-z]/i.test(trimmed)) return undefined;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.min(BACKOFF_CAP_MS, Math.max(0, at - now.getTime()));
}

export type Decision =
  | { status: 'succeeded' }
  | { status: 'failed'; why: 'not_retryable' | 'attempts_exhausted' }
  | { status: 'pending'; delayMs: number; source: 'backoff' | 'retry-after' };

/** What happens after attempt number `attempt` ended with `statusCode` (null = no response). */
export function decide(
  attempt: number,
  statusCode: number | null,
  retryAfterHeader: string | undefined,
  now: Date,
  random: () => number = Math.random,
): Decision {
  const v = verdict(statusCode);
  if (v === 'succeeded') return { status: 'succeeded' };
  if (v === 'fail') return { status: 'failed', why: 'not_retryable' };
  if (attempt >= MAX_ATTEMPTS) return { status: 'failed', why: 'attempts_exhausted' };
  if (statusCode === 429 || statusCode === 503) {
    const fromHeader = retryAfterMs(retryAfterHeader, now);
    if (fromHeader !== undefined) return { status: 'pending', delayMs: fromHeader, source: 'retry-after' };
  }
  return { status: 'pending', delayMs: backoffMs(attempt, random), source: 'backoff' };
}
