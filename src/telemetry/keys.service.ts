/**
 * Telemetry API keys: issuance (admin), revocation, and authentication of `Authorization: Bearer`
 * with the per-key fixed-window rate limit.
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import { constantTimeEqual, sha256Hex } from '../kernel/secrets.js';
import { AppError, notFound, unauthorized } from '../kernel/errors.js';
import type { ProjectRepository, TelemetryKey } from './projects.repository.js';

/** Who a telemetry request is: the key's organization and project. */
export interface TelemetryAuth {
  orgId: string;
  projectId: string;
  keyId: string;
}

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Unix seconds at which the window ends. */
  reset: number;
}

export interface RateLimitSettings {
  limit: number;
  windowSeconds: number;
}

const KEY_PATTERN = /^tk_[A-Za-z0-9_-]{43}$/;
const BEARER = /^Bearer ([^\s]+)$/i;

export const rateLimitHeaders = (state: RateLimitState): Record<string, string> => ({
  'X-RateLimit-Limit': String(state.limit),
  'X-RateLimit-Remaining': String(state.remaining),
  'X-RateLimit-Reset': String(state.reset),
});

export class TelemetryKeyService {
  constructor(
    private readonly repo: ProjectRepository,
    private readonly clock: Clock,
    private readonly rate: RateLimitSettings,
  ) {}

  /** Issues `tk_` + base64url(32 random bytes). Only its SHA-256 is stored; the key is returned once. */
  async create(orgId: string, input: { projectId: string; name?: string; createdBy?: string }): Promise<TelemetryKey & { key: string }> {
    const project = await this.repo.findProject(orgId, input.projectId);
    if (!project) throw notFound('Project');
    const key = `tk_${randomBytes(32).toString('base64url')}`;
    const record: TelemetryKey = {
      id: newId('TKI'),
      orgId,
      projectId: project.id,
      name: input.name ?? 'default',
      prefix: key.slice(0, 10),
      createdAt: this.clock.now(),
      revokedAt: null,
      lastUsedAt: null,
      createdBy: input.createdBy ?? null,
    };
    await this.repo.insertKey({ ...record, keyHash: sha256Hex(key) });
    return { ...record, key };
  }

  list(orgId: string, projectId?: string): Promise<TelemetryKey[]> {
    return this.repo.listKeys(orgId, projectId);
  }

  /** Revokes a key; with `orgId` (a member's door) another organization's key is the same 404 as an unknown one. */
  async revoke(id: string, orgId?: string): Promise<TelemetryKey> {
    const key = await this.repo.revokeKey(id, this.clock.now(), orgId);
    if (!key) throw notFound('Telemetry API key');
    return key;
  }

  /** Revokes the keys a member made in the console: when they leave the organization or lose telemetry:manage. */
  revokeCreatedBy(orgId: string, createdBy: string): Promise<TelemetryKey[]> {
    return this.repo.revokeKeysCreatedBy(orgId, createdBy, this.clock.now());
  }

  /**
   * Resolves the bearer key and counts the request against the key's window. Returns the
   * identity and the rate-limit state; throws 401, or 429 `rate_limited` (with the headers) when
   * the window is exhausted.
   */
  async authenticate(authorization: string | undefined): Promise<{ auth: TelemetryAuth; rate: RateLimitState }> {
    const presented = BEARER.exec(authorization ?? '')?.[1];
    if (!presented || !KEY_PATTERN.test(presented)) throw unauthorized();
    const now = this.clock.now().getTime();
    const windowMs = this.rate.windowSeconds * 1000;
    const windowStart = Math.floor(now / windowMs) * windowMs;
    const hash = sha256Hex(presented);
    const found = await this.repo.authenticate(hash, new Date(windowStart));
    if (!found || !constantTimeEqual(found.key.keyHash, hash) || found.key.revokedAt) throw unauthorized();
    const reset = Math.ceil((windowStart + windowMs) / 1000);
    const rate: RateLimitState = { limit: this.rate.limit, remaining: Math.max(0, this.rate.limit - found.requests), reset };
    if (found.requests > this.rate.limit) {
      const retryAfter = Math.max(1, Math.ceil((windowStart + windowMs - now) / 1000));
      throw new AppError('RATE_LIMITED', 'Rate limit exceeded', {
        details: { retry_after_seconds: retryAfter },
        headers: { ...rateLimitHeaders(rate), 'Retry-After': String(retryAfter) },
      });
    }
    return { auth: { orgId: found.key.orgId, projectId: found.key.projectId, keyId: found.key.id }, rate };
  }

  /** Rate-limit windows older than this are no longer read. */
  pruneRateWindows(): Promise<number> {
    const before = new Date(this.clock.now().getTime() - 2 * this.rate.windowSeconds * 1000);
    return this.repo.deleteRateWindowsBefore(before);
  }
}
