/**
 * The delivery worker: claim → deliver → record.
 *
 * 1. claim: one statement marks up to `batchSize` due deliveries as leased (`FOR UPDATE SKIP
 *    LOCKED`), so concurrent workers (any number of `npm run worker` processes) take disjoint rows,
 *    and returns each with its event and endpoint;
 * 2. deliver: with no transaction open, render, sign and POST each one, on a keep-alive connection
 *    to an address the SSRF guard checked (connections.ts);
 * 3. record: the attempt and the delivery's next state, guarded by the lease token. Attempts that
 *    finish together are recorded together, one statement per batch (group commit: a batch is
 *    written while the next one gathers), and a delivery's slot is freed only once it is recorded.
 * A worker killed between 1 and 3 leaves a lease behind; when it expires the delivery is due
 * again and the next claim records the lost attempt as abandoned. Delivery is at least once.
 *
 * Scheduling reads the injectable Clock, so tests move through the backoff schedule instantly.
 *
 * An idle worker polls (WEBHOOK_DELIVERY_POLL_MS) rather than LISTENing for a NOTIFY from the
 * producer on purpose: a transaction that NOTIFYs holds a database-wide lock through its commit,
 * which would serialize the commits of every payment that emits an event.
 */
import { performance } from 'node:perf_hooks';
import type { Clock } from '../kernel/clock.js';
import { unixSeconds } from '../kernel/clock.js';
import type { Logger } from '../kernel/logger.js';
import type { Job } from '../kernel/job.js';
import { renderEnvelope } from './envelope.js';
import { ReceiverConnections } from './connections.js';
import { postWebhook, requestTarget, type RequestTarget, type SendResult } from './http-sender.js';
import { decide, MAX_ATTEMPTS } from './retry-policy.js';
import { signWebhook } from './signature.js';
import type { Signer, SigningKeyService } from './signing-key.service.js';
import { UnsafeUrlError, type UrlGuard } from './url-guard.js';
import type { WebhookDeliveryRepository } from './deliveries.repository.js';
import type { Attempt, AttemptRecord, ClaimedDelivery, DeliveryOutcome } from './webhook.model.js';

export interface DeliveryWorkerOptions {
  /** Per attempt, everything included. The spec's 10 s; tests shorten it. */
  timeoutMs?: number;
  /** How long a claim holds a delivery; must exceed the timeout by a margin. */
  leaseMs?: number;
  /** Deliveries in flight at most (claimed, being sent or being recorded). */
  batchSize?: number;
  maxResponseBytes?: number;
  /** Pause of the worker loop when nothing was due. */
  idleIntervalMs?: number;
  /**
   * While deliveries are in flight and the last claim took everything due: how long before
   * claiming again (instead of one claim per finished delivery).
   */
  busyPollMs?: number;
  /** Extra trusted CA (tests only: the self-signed local receiver). */
  ca?: string | Buffer;
  /** How long a checked DNS answer (and the pooled connections to it) is reused; see connections.ts. */
  resolveTtlMs?: number;
  /** Idle keep-alive connections to receivers are closed after this long. */
  idleSocketMs?: number;
  /** Jitter source (tests make it deterministic). */
  random?: () => number;
  /** Told every attempt's outcome (the process's Prometheus counters). */
  onOutcome?: (outcome: 'succeeded' | 'retrying' | 'failed' | 'abandoned' | 'dropped') => void;
}

export const DELIVERY_TIMEOUT_MS = 10_000;
const MAX_CACHED_TARGETS = 10_000;

export class DeliveryWorker {
  private readonly timeoutMs: number;
  private readonly leaseMs: number;
  private readonly batchSize: number;
  private readonly maxResponseBytes: number;
  private readonly busyPollMs: number;
  private readonly random: () => number;
  private readonly connections: ReceiverConnections;
  private readonly recorder: AttemptRecorder;
  /** Endpoint URLs parsed and checked in form (guard.parse), by their text: parsed once, not per attempt. */
  private readonly targets = new Map<string, RequestTarget>();

  constructor(
    private readonly repo: WebhookDeliveryRepository,
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
    this.busyPollMs = options.busyPollMs ?? Math.min(20, options.idleIntervalMs ?? 1000);
    this.random = options.random ?? Math.random;
    this.connections = new ReceiverConnections(guard, clock, { ca: options.ca, resolveTtlMs: options.resolveTtlMs, idleSocketMs: options.idleSocketMs });
    this.recorder = new AttemptRecorder(repo);
  }

  /** Closes the pooled connections to receivers (they are reopened when needed). */
  closeConnections(): void {
    this.connections.close();
  }

  /** Pooled connections to receivers (tests). */
  pooledSockets(): { active: number; idle: number } {
    return this.connections.socketCount();
  }

  /**
   * The worker job: keeps up to `batchSize` deliveries in flight and tops them up as they finish,
   * so a slow receiver never holds up the others (runOnce, used by tests and tools, waits for its
   * whole batch instead). Claims are batched: once half the slots are free, or after `busyPollMs`
   * when the previous claim took everything due. Stopping waits for the deliveries in flight.
   */
  job(): Job {
    const inFlight = new Set<Promise<void>>();
    // Resolved whenever a delivery finishes: one waiter, instead of racing every promise in flight.
    let wake: (() => void) | undefined;
    const sleepUntilWoken = (ms: number | undefined) =>
      new Promise<void>((resolve) => {
        const timer = ms === undefined ? undefined : setTimeout(resolve, ms);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      }).finally(() => (wake = undefined));
    const refillAt = Math.max(1, Math.floor(this.batchSize / 2));
    // Monotonic: a poll interval, not a point in business time.
    let nextClaimAt = 0;
    const run = async (): Promise<boolean> => {
      const free = this.batchSize - inFlight.size;
      if (free > 0 && (inFlight.size === 0 || free >= refillAt) && performance.now() >= nextClaimAt) {
        const claimed = await this.repo.claimDue(this.clock.now(), free, this.leaseMs);
        if (claimed.length > 0) {
          const signers = await this.signingKeys.signers();
          for (const c of claimed) {
            const delivery: Promise<void> = this.deliver(c, signers)
              .catch((err) => this.logger.error({ err, deliveryId: c.delivery.id }, 'webhook delivery failed unexpectedly; it is due again when its lease expires'))
              .finally(() => {
                inFlight.delete(delivery);
                wake?.();
              });
            inFlight.add(delivery);
          }
        }
        // Everything due was taken: look again shortly, not at every finished delivery.
        nextClaimAt = claimed.length < free ? performance.now() + this.busyPollMs : 0;
        if (inFlight.size === 0) return false;
      }
      // Wait for a delivery to finish (it frees a slot) or for the next claim.
      const untilClaim = nextClaimAt - performance.now();
      await sleepUntilWoken(inFlight.size === 0 || untilClaim > 0 ? Math.max(0, untilClaim) : undefined);
      return true;
    };
    return {
      name: 'webhook-delivery',
      intervalMs: this.options.idleIntervalMs ?? 1000,
      run,
      drain: async () => {
        await Promise.all(inFlight);
        this.closeConnections();
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
    const { delivery, leaseToken, event, endpoint } = claimed;
    const attemptNumber = delivery.attemptCount;
    const log = () => this.logger.child({ deliveryId: delivery.id, eventId: delivery.eventId, endpointId: delivery.endpointId });

    if (claimed.abandonedLeaseUntil) {
      const lost: Attempt = {
        deliveryId: delivery.id,
        attemptNumber: attemptNumber - 1,
        url: endpoint?.url ?? '',
        statusCode: null,
        durationMs: 0,
        responseBody: null,
        error: 'abandoned: the worker holding the lease stopped before recording a result',
        attemptedAt: claimed.abandonedLeaseUntil,
      };
      log().warn({ attempt: attemptNumber - 1 }, 'webhook attempt abandoned by a worker; retrying');
      this.options.onOutcome?.('abandoned');
      if (attemptNumber - 1 >= MAX_ATTEMPTS) {
        await this.record(delivery.id, leaseToken, lost, {
          status: 'failed',
          attemptCount: MAX_ATTEMPTS,
          lastStatusCode: null,
          lastError: `dropped after ${MAX_ATTEMPTS} attempts (the last one was abandoned)`,
          now: this.clock.now(),
        });
        return;
      }
      await this.repo.insertAttempt(lost);
    }

    if (!event || !endpoint || !endpoint.enabled) {
      await this.record(delivery.id, leaseToken, null, {
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
    const stillOwned = await this.record(
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
    if (!stillOwned) log().warn({ attempt: attemptNumber }, 'webhook lease expired before the result was recorded; another worker owns the delivery now');
    if (decision.status === 'failed') log().warn({ attempt: attemptNumber, status: result.statusCode, why: decision.why, error: result.error }, 'webhook delivery failed');
    else if (this.logger.isLevelEnabled('debug')) log().debug({ attempt: attemptNumber, status: result.statusCode, outcome: decision.status }, 'webhook attempt');
  }

  private record(deliveryId: string, leaseToken: string, attempt: Attempt | null, outcome: DeliveryOutcome): Promise<boolean> {
    return this.recorder.record({ deliveryId, leaseToken, attempt, outcome });
  }

  private async send(rawUrl: string, headers: Record<string, string>, body: Buffer): Promise<SendResult> {
    try {
      let target = this.targets.get(rawUrl);
      if (!target) {
        target = requestTarget(this.guard.parse(rawUrl));
        // Endpoint URLs are few; the bound only keeps a worker that meets very many from growing.
        if (this.targets.size >= MAX_CACHED_TARGETS) this.targets.clear();
        this.targets.set(rawUrl, target);
      }
      // The host's checked route: resolved and checked by the guard (IP literals included), its
      // pooled sockets connected to those addresses only.
      const connection = await this.connections.connectionFor(target.url);
      return await postWebhook(target, headers, body, { timeoutMs: this.timeoutMs, connection, maxResponseBytes: this.maxResponseBytes });
    } catch (err) {
      if (err instanceof UnsafeUrlError) return { statusCode: null, retryAfter: undefined, responseBody: null, error: `refused: ${err.message}`, durationMs: 0 };
      throw err;
    }
  }
}

/**
 * Group commit of finished attempts: whatever finished while the previous batch was being written
 * (or in the same turn of the event loop) is written by the next single statement. Each caller
 * learns whether its lease still held; a failed statement fails every caller of its batch (their
 * deliveries are due again when their leases expire, as after a crash).
 */
class AttemptRecorder {
  private queue: Array<{ record: AttemptRecord; resolve: (owned: boolean) => void; reject: (err: unknown) => void }> = [];
  private flushing = false;

  constructor(
    private readonly repo: WebhookDeliveryRepository,
    private readonly maxBatch = 500,
  ) {}

  record(record: AttemptRecord): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.queue.push({ record, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        // After the I/O callbacks of this turn: attempts that finished together go together.
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      try {
        const owned = await this.repo.recordAttempts(batch.map((b) => b.record));
        for (const b of batch) b.resolve(owned.has(b.record.deliveryId));
      } catch (err) {
        for (const b of batch) b.reject(err);
      }
    }
    this.flushing = false;
  }
}
