/** The orders module, wired: the order service and its merchant and admin (refund) handlers. */
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Clock } from '../kernel/clock.js';
import type { CardRefunds } from '../processors/card-processor.js';
import { createOrderAdminHandlers } from './admin.handlers.js';
import { OrderService } from './order.service.js';
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
  /** Refunds through the card processor that took the payment (Stripe), when there is one. */
  cardRefunds?: CardRefunds;
}): OrdersModule {
  const orders = new OrderService(deps.uow, deps.clock, deps.cardRefunds);
  return { orders, handlers: { merchant: createOrderHandlers(orders, deps.clock), admin: createOrderAdminHandlers(orders), console: createOrderConsoleHandlers(orders) } };
}
