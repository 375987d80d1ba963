/** Typed data hooks and actions over the API keys (console document) and webhook endpoints (merchant document). */
import type { components as ConsoleComponents } from '../../../../generated/console';
import type { components as MerchantComponents } from '../../../../generated/merchant';
import { consoleApi, merchantApi } from '../../shared/api';
import { useApi } from '../../shared/use-api';

export type ApiKey = ConsoleComponents['schemas']['ConsoleApiKey'];
export type KeyPermission = ConsoleComponents['schemas']['KeyPermission'];
export type WebhookEndpoint = MerchantComponents['schemas']['WebhookEndpoint'];
export type WebhookEventType = MerchantComponents['schemas']['WebhookEventType'];

export const KEY_PERMISSIONS: KeyPermission[] = ['checkout:write', 'catalog:read', 'orders:read', 'subscriptions:read', 'customers:read', 'webhooks:write', 'entitlements:read', 'x402:settle', 'customers:write', 'usage:write', 'meters:read', 'meters:write', 'subscriptions:manage'];
// Every event type of the contract, in the order the form lists them: a type the contract adds
// and this list misses fails the type check (the record must name every member).
const EVENT_TYPE_ORDER: Record<WebhookEventType, number> = {
  'order.pending': 0,
  'order.paid': 1,
  'order.failed': 2,
  'order.refunded': 3,
  'order.refund_failed': 4,
  'order.dispute_created': 5,
  'order.dispute_closed': 6,
  'subscription.created': 7,
  'subscription.updated': 8,
  'subscription.action_required': 9,
  'subscription.trial_will_end': 10,
  'subscription.discount_ended': 11,
  'subscription.expired': 12,
  'subscription.ended': 13,
  'meter.credits_exhausted': 14,
  'meter.threshold_crossed': 15,
};
export const EVENT_TYPES = (Object.keys(EVENT_TYPE_ORDER) as WebhookEventType[]).sort((a, b) => EVENT_TYPE_ORDER[a] - EVENT_TYPE_ORDER[b]);

export function useApiKeys() {
  return useApi(() => consoleApi.GET('/v1/console/api-keys').then((r) => ({ ...r, data: r.data?.data })), []);
}

/** No permission chosen: the field is left out, and the key gets every permission the member's role allows (the API's default). */
export const createApiKey = (name: string, permissions: KeyPermission[]) => consoleApi.POST('/v1/console/api-keys', { body: permissions.length > 0 ? { name, permissions } : { name } }).then((r) => ({ ...r, data: r.data?.data }));
export const revokeApiKey = (id: string) => consoleApi.POST('/v1/console/api-keys/{id}/revoke', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data }));

export function useWebhookEndpoints() {
  return useApi(() => merchantApi.GET('/v1/webhook', { params: { query: { size: 100 } } }).then((r) => ({ ...r, data: r.data?.data })), []);
}

export const createWebhookEndpoint = (body: { name: string; url: string; events: WebhookEventType[]; enabled: boolean }) =>
  merchantApi.POST('/v1/webhook', { body }).then((r) => ({ ...r, data: r.data?.data }));
export const updateWebhookEndpoint = (id: string, body: { name?: string; url?: string; events?: WebhookEventType[]; enabled?: boolean }) =>
  merchantApi.PATCH('/v1/webhook/{id}', { params: { path: { id } }, body }).then((r) => ({ ...r, data: r.data?.data }));
export const deleteWebhookEndpoint = (id: string) => merchantApi.DELETE('/v1/webhook/{id}', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data ?? {} }));

export type DeliveriesQuery = { status?: 'pending' | 'succeeded' | 'failed'; event_type?: string; order_id?: string; starting_after?: string };

export function useDeliveries(query: DeliveriesQuery) {
  return useApi(() => consoleApi.GET('/v1/console/webhook-deliveries', { params: { query: { size: 25, ...query } } }).then((r) => ({ ...r, data: r.data?.data })), [JSON.stringify(query)]);
}

export function useDelivery(id: string) {
  return useApi(() => consoleApi.GET('/v1/console/webhook-deliveries/{id}', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data })), [id]);
}

export const redeliver = (id: string) => consoleApi.POST('/v1/console/webhook-deliveries/{id}/redeliver', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data }));

export const sendTestEvent = (id: string) => consoleApi.POST('/v1/console/webhook-endpoints/{id}/test', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data }));
export const useSigningKeys = () => useApi(() => consoleApi.GET('/v1/console/webhook-signing-keys').then((r) => ({ ...r, data: r.data?.data })), []);
export const rotateSigningKey = () => consoleApi.POST('/v1/console/webhook-signing-keys/rotate', { body: {} }).then((r) => ({ ...r, data: r.data?.data }));
