/** The usage module, wired: usage events, meters and their merchant handlers. */
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import { MeterService, type SpanReader } from './meters.service.js';
import { createUsageConsoleHandlers, createUsageHandlers } from './usage.handlers.js';
import { createUsageAdminHandlers } from './admin.handlers.js';
import { KnexMeterRepository, KnexUsageEventRepository } from './usage.repository.js';
import { UsageEventService } from './usage-events.service.js';

export type { SpanReader, MeteredSpan } from './meters.service.js';

export interface UsageModule {
  events: UsageEventService;
  meters: MeterService;
  handlers: { merchant: ReturnType<typeof createUsageHandlers>; console: ReturnType<typeof createUsageConsoleHandlers>; admin: ReturnType<typeof createUsageAdminHandlers> };
}

export function createUsageModule(deps: { db: Db; uow: CommerceUnitOfWork; spans: SpanReader; clock: Clock; orgExists: (orgId: string) => Promise<boolean> }): UsageModule {
  const eventRepository = new KnexUsageEventRepository(deps.db);
  const events = new UsageEventService(eventRepository, deps.uow, deps.clock);
  const meters = new MeterService(new KnexMeterRepository(deps.db), eventRepository, deps.uow, deps.spans, deps.clock);
  return { events, meters, handlers: { merchant: createUsageHandlers(events, meters), console: createUsageConsoleHandlers(meters), admin: createUsageAdminHandlers(meters, deps.orgExists) } };
}
