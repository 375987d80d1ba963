import type { Clock } from '../kernel/clock.js';
import type { MerchantHandlers, MerchantServedOperations } from '../handler-maps.js';
import { listPage } from '../kernel/present.js';
import type { OrderStatus } from '../commerce/model.js';
import { presentDispute, presentOrder, presentRefund } from '../commerce/order.presenter.js';
import type { OrderService } from './order.service.js';

type OrderHandlers = Pick<MerchantHandlers, 'listOrders' | 'getOrder' | 'listOrderRefunds' | 'listOrderDisputes' | 'listCustomers' | 'getCustomer' | 'updateCustomer'>;

type ListOrdersQuery = NonNullable<MerchantServedOperations['listOrders']['parameters']['query']>;

/**
 * One page of an organization's orders for a `listOrders`-shaped query: the merchant API's list
 * and the admin API's `listOrgOrders` (same filters, pagination and cursors) both answer with it.
 */
export async function listOrderPage(orders: OrderService, clock: Clock, orgId: string, query: ListOrdersQuery) {
  const pageNumber = query.page ?? 1;
  const size = query.size ?? 20;
  const result = await orders.list(
    orgId,
    {
      // `status` matches displayStatus; the spelling (Paid, PAID, paid) does not matter.
      status: query.status ? (query.status.toUpperCase() as OrderStatus) : undefined,
      customerId: query.customer_id,
      subscriptionId: query.subscription_id,
      merchantReference: query.merchant_reference,
      productId: query.product_id,
      provider: query.provider,
      fromAddress: query.from_address,
      txHash: query.tx_hash,
      createdFrom: query.date_from !== undefined ? new Date(query.date_from * 1000) : undefined,
      createdBefore: query.date_to !== undefined ? new Date(query.date_to * 1000) : undefined,
    },
    { page: pageNumber, size, startingAfter: query.starting_after, endingBefore: query.ending_before },
  );
  const now = clock.now();
  return listPage(result, (o) => presentOrder(o, now), pageNumber, size);
}

const presentCustomer = (c: { id: string; email: string; externalId: string | null }) => ({ customerId: c.id, email: c.email, externalId: c.externalId });

export function createOrderHandlers(orders: OrderService, clock: Clock): OrderHandlers {
  return {
    listOrders: async ({ auth, query }) => ({ status: 200, body: { success: true, message: 'OK', data: await listOrderPage(orders, clock, auth.orgId, query) } }),
    getOrder: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: presentOrder(await orders.get(auth.orgId, params.id), clock.now()) },
    }),
    listOrderRefunds: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await orders.listRefunds(auth.orgId, params.id)).map(presentRefund) },
    }),
    listOrderDisputes: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await orders.listDisputes(auth.orgId, params.id)).map(presentDispute) },
    }),
    listCustomers: async ({ auth, query }) => {
      const pageNumber = query.page ?? 1;
      const size = query.size ?? 20;
      const result = await orders.listCustomers(auth.orgId, { email: query.email, externalId: query.external_id }, { page: pageNumber, size, startingAfter: query.starting_after, endingBefore: query.ending_before });
      return { status: 200, body: { success: true, message: 'OK', data: listPage(result, presentCustomer, pageNumber, size) } };
    },
    getCustomer: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: presentCustomer(await orders.getCustomer(auth.orgId, params.id)) },
    }),
    updateCustomer: async ({ auth, params, body }) => ({
      status: 200,
      body: { success: true, message: 'Customer updated', data: presentCustomer(await orders.updateCustomer(auth.orgId, params.id, { externalId: body.externalId })) },
    }),
  };
}
