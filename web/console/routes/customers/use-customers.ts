/** Typed data hooks over the customers operations of the merchant API. */
import type { components, operations } from '../../../../generated/merchant';
import { consoleApi, merchantApi } from '../../shared/api';
import { useApi } from '../../shared/use-api';

export type Customer = components['schemas']['Customer'];
export type CustomersQuery = NonNullable<operations['listCustomers']['parameters']['query']>;

export function useCustomers(query: CustomersQuery) {
  return useApi(() => merchantApi.GET('/v1/customers', { params: { query } }).then((r) => ({ ...r, data: r.data?.data })), [JSON.stringify(query)]);
}

export function useCustomer(id: string) {
  return useApi(() => merchantApi.GET('/v1/customers/{id}', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data })), [id]);
}

/** The catalog products the customer has access to now (one-time purchase or active subscription). */
export function useCustomerEntitlements(id: string) {
  return useApi(() => merchantApi.GET('/v1/entitlements/check', { params: { query: { customer_id: id } } }).then((r) => ({ ...r, data: r.data?.data })), [id]);
}

/** The customer's metered subscriptions: usage this period and the estimated next charge (console getConsoleCustomerUsage). */
export function useCustomerUsage(id: string) {
  return useApi(() => consoleApi.GET('/v1/console/customers/{id}/usage', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data })), [id]);
}

/** The customer's credit balance per currency (merchant getCustomerBalance). */
export function useCustomerBalance(id: string) {
  return useApi(() => merchantApi.GET('/v1/customers/{id}/balance', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data })), [id]);
}

/** A page of the customer's balance ledger, newest first, after `startingAfter` (merchant listCustomerBalanceTransactions). */
export function useCustomerBalanceTransactions(id: string, startingAfter?: string) {
  return useApi(
    () => merchantApi.GET('/v1/customers/{id}/balance-transactions', { params: { path: { id }, query: { limit: 10, ...(startingAfter && { starting_after: startingAfter }) } } }).then((r) => ({ ...r, data: r.data?.data })),
    [id, startingAfter],
  );
}
