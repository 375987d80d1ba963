/** The orders module, wired: the order service and its merchant and admin (read, refund) handlers. */
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Clock } from '../kernel/clock.js';
import type { OrgService } from '../orgs/orgs.service.js';
import type { CardRefunds } from '../processors/card-processor.js';
import { createOrderAdminHandlers } from './admin.handlers.js';
import { OrderService, type ListStores } from './order.service.js';
import type { LagTolerantReads } from '../kernel/lag-tolerant-reads.js';
import { createOrderHandlers } from './orders.handlers.js';
import { createOrderConsoleHandlers } from './console.handlers.js';

export interface OrdersModule {
  orders: OrderService;
  handlers: {
    merchant: ReturnType<typeof createOrderHandlers>;
    admin: ReturnType<typeof createOrderAdminHandlers>;
    console: ReturnType<typeof createOrderConsoleHandlers>;
  };
}

export function createOrdersModule(deps: {
  uow: CommerceUnitOfWork;
  clock: Clock;
  /** Admin reads check the organization exists (404 rather than an empty page). */
  orgs: OrgService;
  /** Refunds through the card processor that took the payment (Stripe), when there is one. */
  cardRefunds?: CardRefunds;
  /** Where the order and customer lists may be read (a replica fresh enough for the organization). */
  listReads?: LagTolerantReads<ListStores>;
}): OrdersModule {
  const orders = new OrderService(deps.uow, deps.clock, deps.cardRefunds, deps.listReads);
  return { orders, handlers: { merchant: createOrderHandlers(orders, deps.clock), admin: createOrderAdminHandlers(orders, deps.orgs, deps.clock), console: createOrderConsoleHandlers(orders) } };
}
