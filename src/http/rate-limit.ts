/**
 * Fixed-window rate limits counted in this process's memory: per API key on the merchant API,
 * per client address on the hosted pages.
 *
 * Why memory and not PostgreSQL (the telemetry API counts in PostgreSQL): a database counter is
 * one more write per request, and every request of one key updates the same row, so a busy key
 * serializes on that row's lock held until its commit is flushed; for the API whose hot path is
 * checkout creation that costs more than the protection is worth. The price: the limit holds per
 * API process, so behind a load balancer with N processes a key can make up to N times the limit
 * (docs/operations.md says how to size it). Windows are aligned on the epoch, so all keys
 * change window together and the previous window's counters are dropped at once: memory is bounded
 * by the keys active in one window.
 */
import ipaddr from 'ipaddr.js';
import type { Clock } from '../kernel/clock.js';
import { AppError } from '../kernel/errors.js';

export class FixedWindowRateLimiter {
  private windowStart = -1;
  private counts = new Map<string, number>();

  /**
   * `limit` requests per `windowMs`; a limit of 0 turns the limiter off. `subject` names what is
   * counted in the 429 message ("this API key", "your address").
   */
  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
    private readonly subject = 'this API key',
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
      throw new AppError('RATE_LIMITED', `Rate limit exceeded: at most ${this.limit} requests per ${this.windowMs / 1000} s for ${this.subject}; retry after ${retryAfter} s`, {
        headers: { 'Retry-After': String(retryAfter) },
      });
    }
  }
}

/**
 * The rate-limit key of a client address (Express's `req.ip`, which honours `trust proxy`):
 * IPv4 as is (an IPv4-mapped IPv6 address as its IPv4 form); IPv6 by its /64 prefix, because a
 * single host is routinely given a whole /64 and can pick a new address from it per request.
 */
export function clientAddressKey(address: string | undefined): string {
  if (!address || !ipaddr.isValid(address)) return 'unknown';
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const parts = (parsed as ipaddr.IPv6).parts;
  return `${parts.slice(0, 4).map((p) => p.toString(16)).join(':')}::/64`;
}
