/** The catalog module, wired: products and prices, and their merchant, admin and console handlers. */
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { MeterDirectory } from '../commerce/metered-billing.js';
import type { OrgService } from '../orgs/orgs.service.js';
import { createCatalogAdminHandlers } from './admin.handlers.js';
import { createCatalogHandlers } from './catalog.handlers.js';
import { createCatalogConsoleHandlers } from './console.handlers.js';
import { KnexCatalogRepository } from './catalog.repository.js';
import { CatalogService } from './catalog.service.js';

export interface CatalogModule {
  catalog: CatalogService;
  handlers: {
    merchant: ReturnType<typeof createCatalogHandlers>;
    admin: ReturnType<typeof createCatalogAdminHandlers>;
    console: ReturnType<typeof createCatalogConsoleHandlers>;
  };
}

export function createCatalogModule(deps: {
  db: Db;
  clock: Clock;
  orgs: OrgService;
  /** The merchant listener's public URL: product checkout links point there. */
  publicBaseUrl: string;
  /** The organization's meters (the usage module's), for metered prices. */
  meters?: MeterDirectory;
}): CatalogModule {
  const catalog = new CatalogService(new KnexCatalogRepository(deps.db), deps.clock, deps.publicBaseUrl, deps.meters);
  return { catalog, handlers: { merchant: createCatalogHandlers(catalog), admin: createCatalogAdminHandlers(catalog, deps.orgs), console: createCatalogConsoleHandlers(catalog) } };
}
