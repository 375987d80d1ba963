/** The tax module (issue 39, item 4), wired: tax rates, tax settings and their handlers. */
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import { KnexTaxRateRepository } from './tax-rate.repository.js';
import { createTaxConsoleHandlers, createTaxMerchantHandlers } from './tax.handlers.js';
import { TaxService } from './tax.service.js';

export { TaxService } from './tax.service.js';

export interface TaxModule {
  tax: TaxService;
  handlers: { merchant: ReturnType<typeof createTaxMerchantHandlers>; console: ReturnType<typeof createTaxConsoleHandlers> };
}

export function createTaxModule(deps: { db: Db; clock: Clock }): TaxModule {
  const tax = new TaxService(new KnexTaxRateRepository(deps.db), deps.clock);
  return { tax, handlers: { merchant: createTaxMerchantHandlers(tax), console: createTaxConsoleHandlers(tax) } };
}
