import type { MerchantHandlers } from '../handler-maps.js';
import { iso, page } from '../kernel/present.js';
import type { WebhookEndpoint } from './webhook.model.js';
import type { WebhookService } from './webhooks.service.js';

const present = (e: WebhookEndpoint) => ({
  id: e.id,
  name: e.name,
  url: e.url,
  events: e.events,
  enabled: e.enabled,
  createdAt: iso(e.createdAt),
  updatedAt: iso(e.updatedAt),
});

type EndpointHandlers = Pick<
  MerchantHandlers,
  | 'listWebhookEndpoints'
  | 'createWebhookEndpoint'
  | 'getWebhookEndpoint'
  | 'updateWebhookEndpoint'
  | 'updateWebhookEndpointByQuery'
  | 'deleteWebhookEndpoint'
  | 'deleteWebhookEndpointByQuery'
>;

export function createWebhookEndpointHandlers(webhooks: WebhookService): EndpointHandlers {
  return {
    listWebhookEndpoints: async ({ auth, query }) => {
      const pageNumber = query.page ?? 1;
      const size = query.size ?? 20;
      const { records, total } = await webhooks.listEndpoints(auth.orgId, pageNumber, size);
      return { status: 200, body: { success: true, message: 'Webhook endpoints retrieved', data: page(records.map(present), total, pageNumber, size) } };
    },
    createWebhookEndpoint: async ({ auth, body }) => ({
      status: 201,
      body: { success: true, message: 'Webhook endpoint created', data: present(await webhooks.createEndpoint(auth.orgId, body)) },
    }),
    getWebhookEndpoint: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Webhook endpoint retrieved', data: present(await webhooks.getEndpoint(auth.orgId, params.id)) },
    }),
    updateWebhookEndpoint: async ({ auth, params, body }) => ({
      status: 200,
      body: { success: true, message: 'Webhook endpoint updated', data: present(await webhooks.updateEndpoint(auth.orgId, params.id, body)) },
    }),
    updateWebhookEndpointByQuery: async ({ auth, query, body }) => ({
      status: 200,
      body: { success: true, message: 'Webhook endpoint updated', data: present(await webhooks.updateEndpoint(auth.orgId, query.id, body)) },
    }),
    deleteWebhookEndpoint: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Webhook endpoint deleted', data: present(await webhooks.deleteEndpoint(auth.orgId, params.id)) },
    }),
    deleteWebhookEndpointByQuery: async ({ auth, query }) => ({
      status: 200,
      body: { success: true, message: 'Webhook endpoint deleted', data: present(await webhooks.deleteEndpoint(auth.orgId, query.id)) },
    }),
  };
}
