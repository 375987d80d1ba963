/** The telemetry domain, wired: repositories, services, the retention job. */
import type { TelemetryConfig } from '../config.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import { IngestService } from './ingest.service.js';
import { TelemetryKeyService } from './keys.service.js';
import { MetricsService } from './metrics.service.js';
import { PriceTable } from './prices.js';
import { KnexProjectRepository } from './projects.repository.js';
import { ProjectService } from './projects.service.js';
import { RetentionJob } from './retention.job.js';
import { KnexStoreRepository } from './store.repository.js';
import { TraceService } from './traces.service.js';

export interface Telemetry {
  projects: ProjectService;
  keys: TelemetryKeyService;
  ingest: IngestService;
  traces: TraceService;
  metrics: MetricsService;
  retention: RetentionJob;
}

export const DEFAULT_TELEMETRY_CONFIG: TelemetryConfig = {
  monthlyTraceQuota: 1_000_000,
  rateLimit: 1200,
  rateLimitWindowSeconds: 60,
  prices: {},
};

export function createTelemetry(db: Db, clock: Clock, config: TelemetryConfig = DEFAULT_TELEMETRY_CONFIG): Telemetry {
  const projectRepo = new KnexProjectRepository(db);
  const store = new KnexStoreRepository(db);
  const keys = new TelemetryKeyService(projectRepo, clock, { limit: config.rateLimit, windowSeconds: config.rateLimitWindowSeconds });
  return {
    projects: new ProjectService(projectRepo, clock),
    keys,
    ingest: new IngestService(store, projectRepo, new PriceTable(config.prices), clock, { monthlyTraceQuota: config.monthlyTraceQuota }),
    traces: new TraceService(store),
    metrics: new MetricsService(store, projectRepo),
    retention: new RetentionJob(projectRepo, store, keys, clock),
  };
}
