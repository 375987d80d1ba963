/**
 * Prometheus metrics of one process (prom-client), served at `GET /metrics` on the admin listener
 * (see docs/operations.md). Two kinds:
 *
 * - per-process counters and histograms, fed by the code that does the work: HTTP request
 *   durations by operationId and status, webhook attempt outcomes (worker processes), telemetry
 *   ingest volumes (API processes), chain-watcher head lag (worker processes);
 * - cluster-wide gauges read from PostgreSQL at scrape time (outbox depth, due and leased
 *   deliveries, oldest due delivery, chain cursor age). Every process reports the same values for
 *   these, so aggregate them with max(), not sum().
 *
 * Labels never carry organization ids, keys or paths with ids in them: operationIds and status
 * codes only, so the series count stays bounded.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Clock } from '../kernel/clock.js';
import type { MetricsRepository } from './metrics.repository.js';

export type WebhookAttemptOutcome = 'succeeded' | 'retrying' | 'failed' | 'abandoned' | 'dropped';

export interface HttpObservation {
  app: string;
  operation: string;
  method: string;
  status: number;
  seconds: number;
}

/** What the HTTP layer needs (src/http/openapi-app.ts). */
export interface HttpMetrics {
  observeHttp(observation: HttpObservation): void;
}

/** What the database layer reports to the scrape: the pool and the replicas (src/db). */
export interface DatabaseGauges {
  pool(): { used: number; idle: number; pending: number; max: number } | undefined;
  replicas(): Array<{ name: string; lagSeconds: number | null; usable: boolean }>;
}

export class Metrics implements HttpMetrics {
  readonly registry = new Registry();
  private readonly httpDuration: Histogram<'app' | 'operation' | 'method' | 'status'>;
  private readonly webhookAttempts: Counter<'outcome'>;
  private readonly ingested: Counter<'kind'>;
  private readonly chainLag: Gauge<'chain_id'>;
  private readonly databaseUp: Gauge;
  private readonly outboxPending: Gauge;
  private readonly outboxDue: Gauge;
  private readonly outboxLeased: Gauge;
  private readonly outboxOldestDue: Gauge;
  private readonly cursorAge: Gauge<'chain_id'>;

  constructor(
    private readonly options: { repo?: MetricsRepository; clock: Clock; role: string; defaultMetrics?: boolean; database?: DatabaseGauges },
  ) {
    const registry = this.registry;
    registry.setDefaultLabels({ role: options.role });
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'kassa_' });
    this.httpDuration = new Histogram({
      name: 'kassa_http_request_duration_seconds',
      help: 'HTTP request duration by listener, OpenAPI operationId (or route outside the contract) and status code.',
      labelNames: ['app', 'operation', 'method', 'status'],
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
    this.webhookAttempts = new Counter({
      name: 'kassa_webhook_attempts_total',
      help: 'Webhook delivery attempts made by this process, by outcome (retrying: failed but due again; failed: dropped for good; abandoned: a lease left by a stopped worker; dropped: endpoint or event gone).',
      labelNames: ['outcome'],
      registers: [registry],
    });
    this.ingested = new Counter({
      name: 'kassa_telemetry_ingested_total',
      help: 'Telemetry items accepted by this process (traces, spans, metrics); rate() gives ingest rates.',
      labelNames: ['kind'],
      registers: [registry],
    });
    this.chainLag = new Gauge({
      name: 'kassa_chain_watcher_lag_blocks',
      help: 'Blocks between the chain head and the last block scanned, as seen by the last pass of this process.',
      labelNames: ['chain_id'],
      registers: [registry],
    });
    this.databaseUp = new Gauge({ name: 'kassa_database_up', help: '1 when the scrape could read PostgreSQL, else 0.', registers: [registry] });
    this.outboxPending = new Gauge({ name: 'kassa_webhook_outbox_pending', help: 'Webhook deliveries not yet succeeded or dropped (cluster-wide).', registers: [registry] });
    this.outboxDue = new Gauge({ name: 'kassa_webhook_outbox_due', help: 'Pending deliveries due now and not leased by a worker (cluster-wide backlog).', registers: [registry] });
    this.outboxLeased = new Gauge({ name: 'kassa_webhook_outbox_leased', help: 'Deliveries a worker holds right now (cluster-wide).', registers: [registry] });
    this.outboxOldestDue = new Gauge({
      name: 'kassa_webhook_outbox_oldest_due_seconds',
      help: 'How long the oldest due, unleased delivery has been waiting (0 when none; cluster-wide).',
      registers: [registry],
    });
    this.cursorAge = new Gauge({
      name: 'kassa_chain_cursor_age_seconds',
      help: 'Seconds since a worker last advanced or renewed the chain cursor (cluster-wide).',
      labelNames: ['chain_id'],
      registers: [registry],
    });
    const database = options.database;
    if (database) {
      new Gauge({
        name: 'kassa_database_pool_connections',
        help: "This process's connections to the primary by state: used, idle, pending (queries waiting for one: the pool is saturated), max.",
        labelNames: ['state'],
        registers: [registry],
        collect() {
          const pool = database.pool();
          if (!pool) return;
          for (const state of ['used', 'idle', 'pending', 'max'] as const) this.set({ state }, pool[state]);
        },
      });
      new Gauge({
        name: 'kassa_database_replica_lag_seconds',
        help: 'Age of the newest primary WAL position each read replica has replayed, as this process last checked (NaN: not known yet).',
        labelNames: ['replica'],
        registers: [registry],
        collect() {
          for (const r of database.replicas()) this.set({ replica: r.name }, r.lagSeconds ?? NaN);
        },
      });
      new Gauge({
        name: 'kassa_database_replica_usable',
        help: '1 when a read replica is up and within DATABASE_REPLICA_MAX_LAG_MS, so lag-tolerant reads may go to it; else 0.',
        labelNames: ['replica'],
        registers: [registry],
        collect() {
          for (const r of database.replicas()) this.set({ replica: r.name }, r.usable ? 1 : 0);
        },
      });
    }
    for (const outcome of ['succeeded', 'retrying', 'failed', 'abandoned', 'dropped'] as const) this.webhookAttempts.inc({ outcome }, 0);
    for (const kind of ['traces', 'spans', 'metrics'] as const) this.ingested.inc({ kind }, 0);
  }

  observeHttp(o: HttpObservation): void {
    this.httpDuration.observe({ app: o.app, operation: o.operation, method: o.method, status: String(o.status) }, o.seconds);
  }

  webhookAttempt(outcome: WebhookAttemptOutcome): void {
    this.webhookAttempts.inc({ outcome });
  }

  telemetryIngested(counts: { traces?: number; spans?: number; metrics?: number }): void {
    for (const kind of ['traces', 'spans', 'metrics'] as const) {
      const n = counts[kind];
      if (n) this.ingested.inc({ kind }, n);
    }
  }

  chainWatcherLag(chainId: number, blocks: number): void {
    this.chainLag.set({ chain_id: String(chainId) }, Math.max(0, blocks));
  }

  /** The exposition text; reads the cluster-wide gauges first (one short query). */
  async render(): Promise<{ contentType: string; body: string }> {
    await this.refreshDatabaseGauges();
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  private async refreshDatabaseGauges(): Promise<void> {
    const repo = this.options.repo;
    if (!repo) return;
    const now = this.options.clock.now();
    try {
      const snapshot = await repo.snapshot(now);
      this.databaseUp.set(1);
      this.outboxPending.set(snapshot.outbox.pending);
      this.outboxDue.set(snapshot.outbox.due);
      this.outboxLeased.set(snapshot.outbox.leased);
      this.outboxOldestDue.set(snapshot.outbox.oldestDueAt ? Math.max(0, (now.getTime() - snapshot.outbox.oldestDueAt.getTime()) / 1000) : 0);
      this.cursorAge.reset();
      for (const cursor of snapshot.chainCursors) {
        this.cursorAge.set({ chain_id: String(cursor.chainId) }, Math.max(0, (now.getTime() - cursor.updatedAt.getTime()) / 1000));
      }
    } catch {
      // A scrape must answer while the database is down (that is when it matters most); stale
      // values would lie, so the database-derived values read NaN (unknown) until it is back.
      this.databaseUp.set(0);
      for (const gauge of [this.outboxPending, this.outboxDue, this.outboxLeased, this.outboxOldestDue]) gauge.set(NaN);
      this.cursorAge.reset();
    }
  }
}
