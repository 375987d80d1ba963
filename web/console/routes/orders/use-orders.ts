/** Typed data hooks over the orders operations of the merchant API, and the delivery log's order filter (console document). */
import type { components, operations } from '../../../../generated/merchant';
import { consoleApi, merchantApi } from '../../shared/api';
import { useApi } from '../../shared/use-api';

export type Order = components['schemas']['Order'];
export type Refund = components['schemas']['Refund'];
export type Dispute = components['schemas']['Dispute'];
export type OrdersQuery = NonNullable<operations['listOrders']['parameters']['query']>;

export function useOrders(query: OrdersQuery) {
  return useApi(() => merchantApi.GET('/v1/orders', { params: { query } }).then((r) => ({ ...r, data: r.data?.data })), [JSON.stringify(query)]);
}

export function useOrder(id: string) {
  return useApi(() => merchantApi.GET('/v1/orders/{id}', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data })), [id]);
}

export function useOrderRefunds(id: string) {
  return useApi(() => merchantApi.GET('/v1/orders/{id}/refunds', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data })), [id]);
}

export function useOrderDisputes(id: string) {
  return useApi(() => merchantApi.GET('/v1/orders/{id}/disputes', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data })), [id]);
}

/**
 * The webhook deliveries of events about this order (the delivery log's `order_id` filter,
 * newest first). Only roles with `webhooks:write` read the log (payloads hold e-mail addresses):
 * for the others nothing is asked.
 */
export function useOrderDeliveries(orderId: string, allowed: boolean) {
  return useApi(
    () => (allowed ? consoleApi.GET('/v1/console/webhook-deliveries', { params: { query: { order_id: orderId, size: 25 } } }).then((r) => ({ ...r, data: r.data?.data })) : Promise.resolve({ data: undefined })),
    [orderId, allowed],
  );
}
