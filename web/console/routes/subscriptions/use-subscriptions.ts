/** Typed data hooks over the subscriptions operations of the merchant API. */
import type { components, operations } from '../../../../generated/merchant';
import type { components as ConsoleComponents } from '../../../../generated/console';
import { consoleApi, merchantApi } from '../../shared/api';
import { useApi } from '../../shared/use-api';

export type Subscription = components['schemas']['Subscription'];
export type SubscriptionsQuery = NonNullable<operations['listSubscriptions']['parameters']['query']>;

export function useSubscriptions(query: SubscriptionsQuery) {
  return useApi(() => merchantApi.GET('/v1/subscriptions', { params: { query } }).then((r) => ({ ...r, data: r.data?.data })), [JSON.stringify(query)]);
}

export function useSubscription(id: string) {
  return useApi(() => merchantApi.GET('/v1/subscriptions/{id}', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data })), [id]);
}

/**
 * The catalog price a subscription charges (its name and terms for the page: two prices of one
 * product read apart), from its product's prices; null for a price not in the catalog.
 */
export function useSubscriptionPrice(s: Pick<Subscription, 'productId' | 'priceId'> | undefined) {
  return useApi<ConsoleComponents['schemas']['Price'] | null>(
    () =>
      s?.productId && s.priceId
        ? consoleApi.GET('/v1/console/products/{id}/prices', { params: { path: { id: s.productId } } }).then((r) => ({ ...r, data: r.data ? (r.data.data.find((p) => p.pricingId === s.priceId) ?? null) : undefined }))
        : Promise.resolve({ data: null }),
    [s?.productId, s?.priceId],
  );
}
