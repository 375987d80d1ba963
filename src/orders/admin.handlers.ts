import type { Clock } from '../kernel/clock.js';
import type { AdminHandlers } from '../handler-maps.js';
import { presentOrder, providerPayment } from '../commerce/order.presenter.js';
import type { Order } from '../commerce/model.js';
import type { OrgService } from '../orgs/orgs.service.js';
import type { OrderService } from './order.service.js';
import { listOrderPage } from './orders.handlers.js';

/** An order after a refund, as the admin and console answers show it. */
export const presentAdminOrder = (order: Order) => ({
  orderId: order.id,
  orgId: order.orgId,
  status: order.status,
  amountCents: order.amountCents,
  amountRefundedCents: order.amountRefundedCents,
  currency: order.currency,
  ...providerPayment(order),
});

export function createOrderAdminHandlers(orders: OrderService, orgs: OrgService, clock: Clock): Pick<AdminHandlers, 'listOrgOrders' | 'getOrgOrder' | 'refundOrder'> {
  return {
    listOrgOrders: async ({ params, query }) => {
      // An empty page would not tell a mistyped organization id from an organization with no orders.
      await orgs.getOrganization(params.id);
      return { status: 200, body: { success: true, message: 'OK', data: await listOrderPage(orders, clock, params.id, query ?? {}) } };
    },
    getOrgOrder: async ({ params }) => {
      await orgs.getOrganization(params.id);
      return { status: 200, body: { success: true, message: 'OK', data: presentOrder(await orders.get(params.id, params.orderId), clock.now()) } };
    },
    refundOrder: async ({ params, body }) => {
      const order = await orders.refund(params.id, body?.amount, body?.reason);
      return {
        status: 200,
        body: {
          success: true,
          message: order.status === 'REFUNDED' ? 'Order fully refunded' : 'Order partially refunded',
          data: presentAdminOrder(order),
        },
      };
    },
  };
}
