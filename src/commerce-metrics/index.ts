/** The commerce metrics module, wired: a read model over the commerce rollups, its merchant handler, and the job that folds their queue. */
import type { Db } from '../db/knex.js';
import type { ReadRouter } from '../db/replicas.js';
import { primaryReads } from '../kernel/lag-tolerant-reads.js';
import type { Job } from '../kernel/job.js';
import type { Clock } from '../kernel/clock.js';
import { createCommerceMetricsHandlers } from './commerce-metrics.handlers.js';
import { KnexCommerceMetricsRepository } from './commerce-metrics.repository.js';
import { CommerceMetricsService } from './commerce-metrics.service.js';
import { CommerceRollupsJob } from './rollups.job.js';
import { KnexCommerceRollupRepository } from './rollups.repository.js';

export interface CommerceMetricsModule {
  metrics: CommerceMetricsService;
  rollups: CommerceRollupsJob;
  handlers: { merchant: ReturnType<typeof createCommerceMetricsHandlers> };
  jobs(): Job[];
}

export function createCommerceMetricsModule(deps: { db: Db; reads?: ReadRouter; clock: Clock }): CommerceMetricsModule {
  // The console's home page: a read that may lag, so a replica may answer it.
  const repositories = deps.reads ? deps.reads.reads((db) => new KnexCommerceMetricsRepository(db, deps.db, deps.clock)) : primaryReads(new KnexCommerceMetricsRepository(deps.db, deps.db, deps.clock));
  const metrics = new CommerceMetricsService(repositories);
  const rollups = new CommerceRollupsJob(new KnexCommerceRollupRepository(deps.db, deps.clock));
  return { metrics, rollups, handlers: { merchant: createCommerceMetricsHandlers(metrics) }, jobs: () => [new CommerceRollupsJob(new KnexCommerceRollupRepository(deps.db, deps.clock))] };
}
