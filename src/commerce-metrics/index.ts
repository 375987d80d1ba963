/** The commerce metrics module, wired: a read model over the commerce tables and its merchant handler. */
import type { Db } from '../db/knex.js';
import { createCommerceMetricsHandlers } from './commerce-metrics.handlers.js';
import { KnexCommerceMetricsRepository } from './commerce-metrics.repository.js';
import { CommerceMetricsService } from './commerce-metrics.service.js';

export interface CommerceMetricsModule {
  metrics: CommerceMetricsService;
  handlers: { merchant: ReturnType<typeof createCommerceMetricsHandlers> };
}

export function createCommerceMetricsModule(deps: { db: Db }): CommerceMetricsModule {
  const metrics = new CommerceMetricsService(new KnexCommerceMetricsRepository(deps.db));
  return { metrics, handlers: { merchant: createCommerceMetricsHandlers(metrics) } };
}
