/**
 * Retries of calls to Stripe beyond the SDK's own. The SDK (maxNetworkRetries) retries network
 * errors, 409 and 5xx with the same idempotency key, but not 429 and without `Retry-After`; this
 * layer retries 429 after Stripe's `Retry-After` (or a backoff), and, for background work, rounds
 * of 5xx and network errors after a longer backoff. Only ever wrap calls that are safe to repeat:
 * reads, and POSTs that carry an idempotency key.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import Stripe from 'stripe';

export interface StripeRetryPolicy {
  /** Attempts in all (the first included), each with the SDK's own retries inside. */
  attempts: number;
  /** Longest wait before a retry; a `Retry-After` beyond it is not waited for (the call fails). */
  maxWaitMs: number;
  /** Backoff base when Stripe gives no `Retry-After`: base, 2 × base, 4 × base … (with jitter). */
  baseDelayMs: number;
  /** Also retry 5xx and network errors (the SDK already retried them): background work only. */
  retryUnavailable: boolean;
}

/** A request with someone waiting on it (a merchant's create, Stripe's webhook delivery). */
export const INTERACTIVE: StripeRetryPolicy = { attempts: 3, maxWaitMs: 2_000, baseDelayMs: 250, retryUnavailable: false };
/** The reconciliation job: nobody waits, and the next pass starts where this one stopped. */
export const BACKGROUND: StripeRetryPolicy = { attempts: 4, maxWaitMs: 30_000, baseDelayMs: 1_000, retryUnavailable: true };

/** Seconds of Stripe's `Retry-After` on a 429, when it sent one. */
export function retryAfterMs(err: unknown): number | undefined {
  if (!(err instanceof Stripe.errors.StripeError)) return undefined;
  const header = err.headers?.['retry-after'];
  const seconds = header === undefined ? NaN : Number(header);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

const isRateLimit = (err: unknown) => err instanceof Stripe.errors.StripeRateLimitError || (err instanceof Stripe.errors.StripeError && err.statusCode === 429);
const isUnavailable = (err: unknown) =>
  err instanceof Stripe.errors.StripeConnectionError || (err instanceof Stripe.errors.StripeError && (err.statusCode ?? 0) >= 500);

export async function withStripeRetries<T>(call: () => Promise<T>, policy: StripeRetryPolicy): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      const retryable = isRateLimit(err) || (policy.retryUnavailable && isUnavailable(err));
      if (!retryable || attempt >= policy.attempts) throw err;
      const backoff = policy.baseDelayMs * 2 ** (attempt - 1) * (0.5 + Math.random() / 2);
      const wait = retryAfterMs(err) ?? backoff;
      if (wait > policy.maxWaitMs) throw err;
      await sleep(wait);
    }
  }
}
