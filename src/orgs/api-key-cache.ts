/**
 * Merchant API keys as authentication last read them, by key hash, for API_KEY_CACHE_TTL_MS.
 * Every merchant request authenticates, and the key lookup was a database round trip of its own
 * on each (a third of a read's server CPU, docs/benchmarks.md). The bound on staleness:
 * - in the process that revokes a key, changes an organization (the admin API, the admin CLI
 *   through it) or changes or removes a member (a member's key is limited by their role, read
 *   with the key), the cache is emptied at once, so the change applies to the next request;
 * - in every other process, a revoked key or a changed organization flag (frozen, card
 *   verification) takes effect within API_KEY_CACHE_TTL_MS of the change, by the injectable clock.
 * An entry is dated from before its read, and a read that overlapped an invalidation is not kept,
 * so no entry can outlive the bound. Unknown keys are never cached.
 */
import type { Clock } from '../kernel/clock.js';
import type { ApiKeyWithOrganization } from './orgs.repository.js';

/** Documented in openapi/merchant.yaml (ApiKeyAuth) and openapi/admin.yaml (revoke). */
export const API_KEY_CACHE_TTL_MS = 5_000;
/** Keys held at most; the oldest read goes first. */
export const API_KEY_CACHE_MAX_ENTRIES = 10_000;

interface Entry {
  key: ApiKeyWithOrganization;
  readAt: number;
}

export class ApiKeyCache {
  private readonly entries = new Map<string, Entry>();
  /** Bumped by every invalidation: a read that started before one is not cached. */
  private generation = 0;

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs = API_KEY_CACHE_TTL_MS,
    private readonly maxEntries = API_KEY_CACHE_MAX_ENTRIES,
  ) {}

  /** The cached key for this hash, or what `read` returns (kept when found). */
  async get(keyHash: string, read: () => Promise<ApiKeyWithOrganization | undefined>): Promise<ApiKeyWithOrganization | undefined> {
    const now = this.clock.now().getTime();
    const hit = this.entries.get(keyHash);
    // A clock set back (tests) counts as expired, like one past the bound.
    if (hit && now - hit.readAt < this.ttlMs && now >= hit.readAt) return hit.key;
    if (hit) this.entries.delete(keyHash);
    const generation = this.generation;
    const key = await read();
    if (key && generation === this.generation) {
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(keyHash, { key, readAt: now });
    }
    return key;
  }

  /** After a key is revoked or an organization changed in this process. */
  clear(): void {
    this.generation++;
    this.entries.clear();
  }
}
