import type { AdminHandlers } from '../handler-maps.js';
import { providerPayment } from '../commerce/order.presenter.js';
import type { OrderService } from './order.service.js';

export function createOrderAdminHandlers(orders: OrderService): Pick<AdminHandlers, 'refundOrder'> {
  return {
    refundOrder: async ({ params, body }) => {
      const order = await orders.refund(params.id, body?.amount, body?.reason);
      return {
        status: 200,
        body: {
          success: true,
          message: order.status === 'REFUNDED' ? 'Order fully refunded' : 'Order partially refunded',
          data: {
            orderId: order.id,
            orgId: order.orgId,
            status: order.status,
            amountCents: order.amountCents,
            amountRefundedCents: order.amountRefundedCents,
            currency: order.currency,
            ...providerPayment(order),
          },
        },
      };
    },
  };
}
