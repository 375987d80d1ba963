/** Typed data hooks over the orders operations of the merchant API. */
import type { components, operations } from '../../../../generated/merchant';
import { merchantApi } from '../../shared/api';
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
