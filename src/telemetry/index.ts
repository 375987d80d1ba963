/** The telemetry module, wired: its services, its API handlers and authenticator, its jobs. */
import type { ReadRouter } from '../db/replicas.js';
import type { TelemetryConfig } from '../config.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { OrgService } from '../orgs/orgs.service.js';
import { createTelemetryAdminHandlers } from './admin.handlers.js';
import { createTelemetryConsoleHandlers } from './console.handlers.js';
import { telemetryAuthenticator } from './auth.js';
import { refineTelemetryError } from './errors.js';
import { createTelemetryHandlers } from './telemetry.handlers.js';
import { PROTOBUF_MEDIA_TYPE, decodeOtlpTraceRequest, encodeOtlpTraceResponse } from './otlp-protobuf.js';
import { KnexIngestUnitOfWork } from './ingest.repository.js';
import { IngestService } from './ingest.service.js';
import { TelemetryKeyService } from './keys.service.js';
import { MetricsService } from './metrics.service.js';
import { PriceTable } from './prices.js';
import { KnexModelPriceRepository } from './model-prices.repository.js';
import { ModelPriceService } from './model-prices.service.js';
import { createTelemetryExplorerHandlers } from './explorer.handlers.js';
import { KnexProjectRepository } from './projects.repository.js';
import { ProjectService } from './projects.service.js';
import type { Job } from '../kernel/job.js';
import { RetentionJob, TelemetryPartitionJob } from './retention.job.js';
import { GroupChangesJob } from './group-changes.job.js';
import { KnexGroupChangeRepository } from './groups.repository.js';
import { KnexRetentionRepository } from './retention.repository.js';
import { KnexRollupRepository } from './rollups.repository.js';
import { KnexSpanMeterRollups } from './span-meters.repository.js';
import { KnexTraceRepository } from './traces.repository.js';
import { TraceService } from './traces.service.js';

export interface TelemetryModule {
  projects: ProjectService;
  keys: TelemetryKeyService;
  ingest: IngestService;
  traces: TraceService;
  metrics: MetricsService;
  prices: ModelPriceService;
  retention: RetentionJob;
  partitions: TelemetryPartitionJob;
  /** Applies queued trace changes to the session and user rollups (`applyAll()`: everything now). */
  groupChanges: GroupChangesJob;
  /** Background jobs, made afresh for each worker. */
  jobs(): Job[];
  handlers: {
    /** The platform API's telemetry operations (telemetry.yaml). */
    platform: ReturnType<typeof createTelemetryHandlers>;
    /** The admin API's telemetry projects and keys. */
    admin: ReturnType<typeof createTelemetryAdminHandlers>;
    /** A member's projects and keys, and the explorer's reads and prices (console document). */
    console: ReturnType<typeof createTelemetryConsoleHandlers> & ReturnType<typeof createTelemetryExplorerHandlers>;
  };
  /** telemetry.yaml's security schemes. */
  authenticators: { BearerAuth: ReturnType<typeof telemetryAuthenticator> };
  /** Turns an envelope error into the telemetry API's error body. */
  refineError: typeof refineTelemetryError;
  /** Body encodings besides JSON, by operationId: OTLP/HTTP protobuf. */
  bodyCodecs: Record<string, { mediaType: string; decodeRequest: (raw: Buffer) => unknown; encodeResponse: (body: unknown) => Buffer }>;
}

export const DEFAULT_TELEMETRY_CONFIG: TelemetryConfig = {
  monthlyTraceQuota: 1_000_000,
  rateLimit: 1200,
  rateLimitWindowSeconds: 60,
  prices: {},
};

export function createTelemetryModule(deps: { db: Db; reads?: ReadRouter; clock: Clock; orgs: OrgService; config?: TelemetryConfig; /** The telemetry listener's public URL (PUBLIC_API_URL). */ publicApiUrl?: string }): TelemetryModule {
  const { db, clock, orgs } = deps;
  const config = deps.config ?? DEFAULT_TELEMETRY_CONFIG;
  const projectRepo = new KnexProjectRepository(db);
  const keys = new TelemetryKeyService(projectRepo, clock, { limit: config.rateLimit, windowSeconds: config.rateLimitWindowSeconds });
  const prices = new ModelPriceService(new KnexModelPriceRepository(db), projectRepo, new PriceTable(config.prices), clock);
  const services = {
    projects: new ProjectService(projectRepo, clock),
    keys,
    prices,
    ingest: new IngestService(new KnexIngestUnitOfWork(db, clock), projectRepo, (projectId) => prices.tableFor(projectId), clock, { monthlyTraceQuota: config.monthlyTraceQuota }),
    traces: new TraceService(new KnexTraceRepository(db, clock), new KnexSpanMeterRollups(db)),
    metrics: new MetricsService(new KnexRollupRepository(db), projectRepo, deps.reads?.reads((handle) => new KnexRollupRepository(handle))),
  };
  const retentionRepo = new KnexRetentionRepository(db, clock);
  const retention = new RetentionJob(projectRepo, retentionRepo, keys, clock);
  const partitions = new TelemetryPartitionJob(retentionRepo, clock);
  const groupChanges = new GroupChangesJob(new KnexGroupChangeRepository(db));
  return {
    ...services,
    retention,
    partitions,
    groupChanges,
    jobs: () => [retention, partitions, new GroupChangesJob(new KnexGroupChangeRepository(db))],
    handlers: {
      platform: createTelemetryHandlers(services, clock),
      admin: createTelemetryAdminHandlers({ orgs, ...services }),
      console: { ...createTelemetryConsoleHandlers({ ...services, publicApiUrl: deps.publicApiUrl ?? 'http://localhost:3001' }), ...createTelemetryExplorerHandlers(services) },
    },
    authenticators: { BearerAuth: telemetryAuthenticator(keys) },
    refineError: refineTelemetryError,
    bodyCodecs: { ingestOtlpTraces: { mediaType: PROTOBUF_MEDIA_TYPE, decodeRequest: decodeOtlpTraceRequest, encodeResponse: encodeOtlpTraceResponse } },
  };
}
