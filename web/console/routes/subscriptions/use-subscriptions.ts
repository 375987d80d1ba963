/** Typed data hooks over the subscriptions operations of the merchant API. */
import type { components, operations } from '../../../../generated/merchant';
import { merchantApi } from '../../shared/api';
import { useApi } from '../../shared/use-api';

export type Subscription = components['schemas']['Subscription'];
export type SubscriptionsQuery = NonNullable<operations['listSubscriptions']['parameters']['query']>;

export function useSubscriptions(query: SubscriptionsQuery) {
  return useApi(() => merchantApi.GET('/v1/subscriptions', { params: { query } }).then((r) => ({ ...r, data: r.data?.data })), [JSON.stringify(query)]);
}

export function useSubscription(id: string) {
  return useApi(() => merchantApi.GET('/v1/subscriptions/{id}', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data })), [id]);
}
