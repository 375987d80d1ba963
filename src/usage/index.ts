/** The usage module, wired: usage events, meters and their merchant handlers. */
import type { BalanceAlerts, MeterBalances } from '../commerce/meter-balances.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { Job } from '../kernel/job.js';
import { MeterService, type SpanReader } from './meters.service.js';
import { createUsageConsoleHandlers, createUsageHandlers } from './usage.handlers.js';
import { createUsageAdminHandlers } from './admin.handlers.js';
import { KnexMeterRepository, KnexUsageEventRepository } from './usage.repository.js';
import { UsageEventService } from './usage-events.service.js';
import { KnexUsageEventStorage } from './event-storage.repository.js';
import { UsageEventPartitionJob, UsageEventRetentionJob } from './event-storage.job.js';

export type { SpanReader, MeteredSpan } from './meters.service.js';

export interface UsageModule {
  events: UsageEventService;
  meters: MeterService;
  handlers: { merchant: ReturnType<typeof createUsageHandlers>; console: ReturnType<typeof createUsageConsoleHandlers>; admin: ReturnType<typeof createUsageAdminHandlers> };
  /** The background build of meters' rollups (migration 0335), the fold of ingest's rollup deltas (0395), the events' partitions and retention (0380). */
  jobs(): Job[];
}

export function createUsageModule(deps: {
  db: Db;
  uow: CommerceUnitOfWork;
  spans: SpanReader;
  clock: Clock;
  balances: MeterBalances;
  alerts?: BalanceAlerts;
  orgExists: (orgId: string) => Promise<boolean>;
  /** USAGE_EVENT_RETENTION_DAYS (undefined: kept for ever). */
  eventRetentionDays?: number;
}): UsageModule {
  const eventRepository = new KnexUsageEventRepository(deps.db);
  const events = new UsageEventService(eventRepository, deps.uow, deps.clock, deps.alerts, deps.eventRetentionDays);
  const storage = new KnexUsageEventStorage(deps.db);
  const meters = new MeterService(new KnexMeterRepository(deps.db), eventRepository, deps.uow, deps.spans, deps.clock);
  return {
    events,
    meters,
    handlers: { merchant: createUsageHandlers(events, meters, deps.balances, deps.clock), console: createUsageConsoleHandlers(meters), admin: createUsageAdminHandlers(meters, deps.orgExists) },
    jobs: () => [
      { name: 'usage-meter-rollups', intervalMs: 1000, run: () => meters.buildRollups() },
      // Several workers may run it: each pass folds one organization, round-robin, skipping one another worker holds (its fold lock).
      { name: 'usage-meter-fold', intervalMs: 500, run: () => events.foldRound() },
      new UsageEventPartitionJob(storage, deps.clock),
      ...(deps.eventRetentionDays === undefined ? [] : [new UsageEventRetentionJob(storage, deps.clock, deps.eventRetentionDays)]),
    ],
  };
}
