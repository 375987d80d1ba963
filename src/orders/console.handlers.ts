/**
 * The console's refund (openapi/console.yaml, tag Orders): the admin API's refund through the same
 * OrderService and refund flow, for an order of the member's organization, once per
 * Idempotency-Key. The audit entry is written at composition (src/accounts/audit.handlers.ts).
 */
import type { ConsoleHandlers } from '../handler-maps.js';
import { presentAdminOrder } from './admin.handlers.js';
import type { OrderService } from './order.service.js';

export function createOrderConsoleHandlers(orders: OrderService): Pick<ConsoleHandlers, 'refundConsoleOrder'> {
  return {
    refundConsoleOrder: async ({ auth, params, body, headers }) => {
      const { order, replayed } = await orders.refundOnce({
        orgId: auth.orgId,
        orderId: params.id,
        amount: body?.amount,
        reason: body?.reason,
        idempotencyKey: headers['Idempotency-Key'],
      });
      return {
        status: 200,
        ...(replayed && { headers: { 'Idempotent-Replayed': 'true' } }),
        body: { success: true, message: order.status === 'REFUNDED' ? 'Order fully refunded' : 'Order partially refunded', data: presentAdminOrder(order) },
      };
    },
  };
}
