/** The commerce metrics module, wired: a read model over the commerce tables and its merchant handler. */
import type { Db } from '../db/knex.js';
import type { ReadRouter } from '../db/replicas.js';
import { primaryReads } from '../kernel/lag-tolerant-reads.js';
import { createCommerceMetricsHandlers } from './commerce-metrics.handlers.js';
import { KnexCommerceMetricsRepository } from './commerce-metrics.repository.js';
import { CommerceMetricsService } from './commerce-metrics.service.js';

export interface CommerceMetricsModule {
  metrics: CommerceMetricsService;
  handlers: { merchant: ReturnType<typeof createCommerceMetricsHandlers> };
}

export function createCommerceMetricsModule(deps: { db: Db; reads?: ReadRouter }): CommerceMetricsModule {
  // The console's home page: a read that may lag, so a replica may answer it.
  const repositories = deps.reads ? deps.reads.reads((db) => new KnexCommerceMetricsRepository(db)) : primaryReads(new KnexCommerceMetricsRepository(deps.db));
  const metrics = new CommerceMetricsService(repositories);
  return { metrics, handlers: { merchant: createCommerceMetricsHandlers(metrics) } };
}
