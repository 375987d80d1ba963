/** The discounts module, wired: coupons, promotion codes, redemptions (issue 39, item 2). */
import type { Db } from '../db/knex.js';
import { KnexUnitOfWork } from '../db/unit-of-work.js';
import type { Clock } from '../kernel/clock.js';
import { KnexDiscountRepository } from './discount.repository.js';
import { DiscountService, type ProductDirectory } from './discount.service.js';
import { createDiscountHandlers } from './discounts.handlers.js';

export interface DiscountsModule {
  discounts: DiscountService;
  handlers: { merchant: ReturnType<typeof createDiscountHandlers> };
}

export function createDiscountsModule(deps: { db: Db; clock: Clock; products: ProductDirectory }): DiscountsModule {
  const uow = new KnexUnitOfWork(deps.db, (executor) => new KnexDiscountRepository(executor));
  const discounts = new DiscountService(uow, deps.clock, deps.products);
  return { discounts, handlers: { merchant: createDiscountHandlers(discounts) } };
}
