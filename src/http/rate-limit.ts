/**
 * Per-API-key rate limit of the merchant API: a fixed window counted in this process's memory.
 *
 * Why memory and not PostgreSQL (the telemetry API counts in PostgreSQL): a database counter is
 * one more write per request, and every request of one key updates the same row, so a busy key
 * serializes on that row's lock held until its commit is flushed; for the API whose hot path is
 * checkout creation that costs more than the protection is worth. The price: the limit holds per
 * API process, so behind a load balancer with N processes a key can make up to N times the limit
 * (README "Operating Kassa" says how to size it). Windows are aligned on the epoch, so all keys
 * change window together and the previous window's counters are dropped at once: memory is bounded
 * by the keys active in one window.
 */
import type { Clock } from '../kernel/clock.js';
import { AppError } from '../kernel/errors.js';

export class FixedWindowRateLimiter {
  private windowStart = -1;
  private counts = new Map<string, number>();

  /** `limit` requests per `windowMs`; a limit of 0 turns the limiter off. */
  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
  ) {}

  /** Counts one request of `key`; throws 429 RATE_LIMITED with Retry-After when over the limit. */
  hit(key: string): void {
    if (this.limit === 0) return;
    const now = this.clock.now().getTime();
    const windowStart = Math.floor(now / this.windowMs) * this.windowMs;
    if (windowStart !== this.windowStart) {
      this.windowStart = windowStart;
      this.counts = new Map();
    }
    const count = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, count);
    if (count > this.limit) {
      const retryAfter = Math.max(1, Math.ceil((windowStart + this.windowMs - now) / 1000));
      throw new AppError('RATE_LIMITED', `Rate limit exceeded: at most ${this.limit} requests per ${this.windowMs / 1000} s for this API key; retry after ${retryAfter} s`, {
        headers: { 'Retry-After': String(retryAfter) },
      });
    }
  }
}
