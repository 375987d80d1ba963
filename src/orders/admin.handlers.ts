import type { AdminHandlers } from '../handler-maps.js';
import { providerPayment } from '../commerce/order.presenter.js';
import type { Order } from '../commerce/model.js';
import type { OrderService } from './order.service.js';

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

export function createOrderAdminHandlers(orders: OrderService): Pick<AdminHandlers, 'refundOrder'> {
  return {
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
