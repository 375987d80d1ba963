/**
 * The delivery worker: claim → deliver → record.
 *
 * 1. claim: one statement marks up to `batchSize` due deliveries as leased (`FOR UPDATE SKIP
 *    LOCKED`), so concurrent workers (any number of `npm run worker` processes) take disjoint rows;
 * 2. deliver: with no transaction open, render, sign and POST each one;
 * 3. record: one short transaction writes the attempt and the delivery's next state, guarded by
 *    the lease token.
 * A worker killed between 1 and 3 leaves a lease behind; when it expires the delivery is due
 * again and the next claim records the lost attempt as abandoned. Delivery is at least once.
 *
 * Scheduling reads the injectable Clock, so tests move through the backoff schedule instantly.
 */
import net from 'node:net';
import type { Clock } from '../kernel/clock.js';
import { unixSeconds } from '../kernel/clock.js';
import type { Logger } from '../kernel/logger.js';
import type { Job } from '../worker.js';
import { renderEnvelope } from './envelope.js';
import { postWebhook, type SendResult } from './http-sender.js';
import { decide, MAX_ATTEMPTS } from './retry-policy.js';
import { signWebhook } from './signature.js';
import type { Signer, SigningKeyService } from './signing-key.service.js';
import { hostOf, UnsafeUrlError, type UrlGuard } from './url-guard.js';
import type { Attempt, ClaimedDelivery, WebhookRepository } from './webhooks.repository.js';

export interface DeliveryWorkerOptions {
  /** Per attempt, everything included. The spec's 10 s; tests shorten it. */
  timeoutMs?: number;
  /** How long a claim holds a delivery; must exceed the timeout by a margin. */
  leaseMs?: number;
  batchSize?: number;
  maxResponseBytes?: number;
  /** Pause of the worker loop when nothing was due. */
  idleIntervalMs?: number;
  /** Extra trusted CA (tests only: the self-signed local receiver). */
  ca?: string | Buffer;
  /** Jitter source (tests make it deterministic). */
  random?: () => number;
  /** Told every attempt's outcome (the process's Prometheus counters). */
  onOutcome?: (outcome: 'succeeded' | 'retrying' | 'failed' | 'abandoned' | 'dropped') => void;
}

export const DELIVERY_TIMEOUT_MS = 10_000;

export class DeliveryWorker {
  private readonly timeoutMs: number;
  private readonly leaseMs: number;
  private readonly batchSize: number;
  private readonly maxResponseBytes: number;
  private readonly random: () => number;

  constructor(
    private readonly repo: WebhookRepository,
    private readonly signingKeys: SigningKeyService,
    private readonly guard: UrlGuard,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly options: DeliveryWorkerOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? DELIVERY_TIMEOUT_MS;
    this.leaseMs = options.leaseMs ?? Math.max(60_000, this.timeoutMs * 3);
    this.batchSize = options.batchSize ?? 10;
    this.maxResponseBytes = options.maxResponseBytes ?? 2048;
    this.random = options.random ?? Math.random;
  }

  /**
   * The worker job: keeps up to `batchSize` deliveries in flight and claims again as soon as one
   * finishes, so a slow receiver never holds up the others (runOnce, used by tests and tools,
   * waits for its whole batch instead). Stopping waits for the deliveries in flight.
   */
  job(): Job {
    const inFlight = new Set<Promise<void>>();
    const run = async (): Promise<boolean> => {
      const free = this.batchSize - inFlight.size;
      const claimed = free > 0 ? await this.repo.claimDue(this.clock.now(), free, this.leaseMs) : [];
      if (claimed.length > 0) {
        const signers = await this.signingKeys.signers();
        for (const c of claimed) {
          const delivery: Promise<void> = this.deliver(c, signers)
            .catch((err) => this.logger.error({ err, deliveryId: c.delivery.id }, 'webhook delivery failed unexpectedly; it is due again when its lease expires'))
            .finally(() => inFlight.delete(delivery));
          inFlight.add(delivery);
        }
      }
      if (inFlight.size === 0) return false;
      // Full, or nothing more was due: wait for a slot (or for a result that may free more work).
      if (inFlight.size >= this.batchSize || claimed.length === 0) await Promise.race(inFlight);
      return true;
    };
    return {
      name: 'webhook-delivery',
      intervalMs: this.options.idleIntervalMs ?? 1000,
      run,
      drain: async () => {
        await Promise.all(inFlight);
      },
    };
  }

  /** Claims what is due and delivers it; returns how many deliveries were handled. */
  async runOnce(): Promise<number> {
    const claimed = await this.claim();
    if (claimed.length === 0) return 0;
    const signers = await this.signingKeys.signers();
    await Promise.all(claimed.map((c) => this.deliver(c, signers)));
    return claimed.length;
  }

  /** Step 1 alone (tests use it to play a worker that dies right after claiming). */
  claim(): Promise<ClaimedDelivery[]> {
    return this.repo.claimDue(this.clock.now(), this.batchSize, this.leaseMs);
  }

  /** Steps 2 and 3 for one claimed delivery. Never throws for a receiver's fault. */
  async deliver(claimed: ClaimedDelivery, signers: Signer[]): Promise<void> {
    const { delivery, leaseToken } = claimed;
    const attemptNumber = delivery.attemptCount;
    const log = this.logger.child({ deliveryId: delivery.id, eventId: delivery.eventId, endpointId: delivery.endpointId });

    if (claimed.abandonedLeaseUntil) {
      const lost: Attempt = {
        deliveryId: delivery.id,
        attemptNumber: attemptNumber - 1,
        url: '',
        statusCode: null,
        durationMs: 0,
        responseBody: null,
        error: 'abandoned: the worker holding the lease stopped before recording a result',
        attemptedAt: claimed.abandonedLeaseUntil,
      };
      log.warn({ attempt: attemptNumber - 1 }, 'webhook attempt abandoned by a worker; retrying');
      this.options.onOutcome?.('abandoned');
      if (attemptNumber - 1 >= MAX_ATTEMPTS) {
        await this.repo.recordAttempt(delivery.id, leaseToken, lost, {
          status: 'failed',
          attemptCount: MAX_ATTEMPTS,
          lastStatusCode: null,
          lastError: `dropped after ${MAX_ATTEMPTS} attempts (the last one was abandoned)`,
          now: this.clock.now(),
        });
        return;
      }
      await this.repo.insertAttempt({ ...lost, url: (await this.repo.findEndpointById(delivery.endpointId))?.url ?? '' });
    }

    const [event, endpoint] = await Promise.all([this.repo.findEvent(delivery.eventId), this.repo.findEndpointById(delivery.endpointId)]);
    if (!event || !endpoint || !endpoint.enabled) {
      await this.repo.recordAttempt(delivery.id, leaseToken, null, {
        status: 'failed',
        attemptCount: attemptNumber - 1,
        lastStatusCode: null,
        lastError: !endpoint ? 'dropped: endpoint deleted' : !event ? 'dropped: event missing' : 'dropped: endpoint disabled',
        now: this.clock.now(),
      });
      this.options.onOutcome?.('dropped');
      return;
    }

    const body = renderEnvelope(event, endpoint);
    const attemptedAt = this.clock.now();
    const headers = signWebhook(signers, event.id, unixSeconds(attemptedAt), body);
    const result = await this.send(endpoint.url, { ...headers }, body);

    const now = this.clock.now();
    const decision = decide(attemptNumber, result.statusCode, result.retryAfter, now, this.random);
    const lastError = result.error ?? (decision.status === 'succeeded' ? null : `HTTP ${result.statusCode}`);
    const stillOwned = await this.repo.recordAttempt(
      delivery.id,
      leaseToken,
      {
        deliveryId: delivery.id,
        attemptNumber,
        url: endpoint.url,
        statusCode: result.statusCode,
        durationMs: result.durationMs,
        responseBody: result.responseBody,
        error: result.error,
        attemptedAt,
      },
      decision.status === 'pending'
        ? { status: 'pending', nextAttemptAt: new Date(now.getTime() + decision.delayMs), lastStatusCode: result.statusCode, lastError, now }
        : {
            status: decision.status,
            lastStatusCode: result.statusCode,
            lastError: decision.status === 'failed' && decision.why === 'attempts_exhausted' ? `dropped after ${MAX_ATTEMPTS} attempts; last: ${lastError}` : lastError,
            now,
          },
    );
    this.options.onOutcome?.(decision.status === 'pending' ? 'retrying' : decision.status);
    if (!stillOwned) log.warn({ attempt: attemptNumber }, 'webhook lease expired before the result was recorded; another worker owns the delivery now');
    if (decision.status === 'failed') log.warn({ attempt: attemptNumber, status: result.statusCode, why: decision.why, error: result.error }, 'webhook delivery failed');
    else log.debug({ attempt: attemptNumber, status: result.statusCode, outcome: decision.status }, 'webhook attempt');
  }

  private async send(rawUrl: string, headers: Record<string, string>, body: Buffer): Promise<SendResult> {
    try {
      const url = this.guard.parse(rawUrl);
      // IP-literal hosts skip the socket's DNS lookup, so they are checked here; names are checked
      // inside the lookup itself (same resolution the socket connects with).
      const host = hostOf(url);
      if (net.isIP(host) !== 0) await this.guard.resolveChecked(host);
      return await postWebhook(url, headers, body, { timeoutMs: this.timeoutMs, lookup: this.guard.lookup, ca: this.options.ca, maxResponseBytes: this.maxResponseBytes });
    } catch (err) {
      if (err instanceof UnsafeUrlError) return { statusCode: null, retryAfter: undefined, responseBody: null, error: `refused: ${err.message}`, durationMs: 0 };
      throw err;
    }
  }
}
