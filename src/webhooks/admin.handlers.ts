import type { AdminHandlers } from '../handler-maps.js';
import { iso, isoOrNull, page } from '../kernel/present.js';
import type { OrgService } from '../orgs/orgs.service.js';
import type { SigningKey } from './signing-key.repository.js';
import type { SigningKeyService } from './signing-key.service.js';
import type { Attempt, DeliveryWithAttempts } from './webhook.model.js';
import type { WebhookService } from './webhooks.service.js';

export const presentAttempt = (a: Attempt) => ({
  attemptNumber: a.attemptNumber,
  url: a.url,
  statusCode: a.statusCode,
  durationMs: a.durationMs,
  responseBody: a.responseBody,
  error: a.error,
  attemptedAt: iso(a.attemptedAt),
});

const presentDelivery = (d: DeliveryWithAttempts) => ({
  deliveryId: d.id,
  orgId: d.orgId,
  eventId: d.eventId,
  eventType: d.eventType,
  endpointId: d.endpointId,
  status: d.status,
  attemptCount: d.attemptCount,
  nextAttemptAt: d.status === 'pending' ? iso(d.nextAttemptAt) : null,
  lastStatusCode: d.lastStatusCode,
  lastError: d.lastError,
  createdAt: iso(d.createdAt),
  completedAt: isoOrNull(d.completedAt),
  attempts: d.attempts.map(presentAttempt),
});

export const presentSigningKey = (k: SigningKey) => ({
  keyId: k.id,
  publicKey: `whpk_${k.publicKey.toString('base64')}`,
  current: k.retiredAt === null,
  createdAt: iso(k.createdAt),
  retiredAt: isoOrNull(k.retiredAt),
  publishUntil: isoOrNull(k.publishUntil),
});

type WebhookAdminHandlers = Pick<
  AdminHandlers,
  'rotateWebhookSigningKey' | 'listWebhookDeliveries' | 'getWebhookDelivery' | 'redeliverWebhookDelivery' | 'sendTestWebhook' | 'listenWebhookEvents'
>;

export function createWebhookAdminHandlers(deps: { webhooks: WebhookService; signingKeys: SigningKeyService; orgs: OrgService }): WebhookAdminHandlers {
  const { webhooks, signingKeys, orgs } = deps;
  return {
    rotateWebhookSigningKey: async ({ body }) => {
      const rotation = await signingKeys.rotate(body?.graceSeconds);
      return {
        status: 201,
        body: {
          success: true,
          message: 'Signing key rotated',
          data: { keyId: rotation.current.id, retiredKeyId: rotation.retired?.id ?? null, keys: rotation.published.map(presentSigningKey) },
        },
      };
    },
    listWebhookDeliveries: async ({ params, query }) => {
      await orgs.getOrganization(params.id);
      const pageNumber = query.page ?? 1;
      const size = query.size ?? 20;
      const { records, total } = await webhooks.listDeliveries(params.id, query.event, pageNumber, size);
      return { status: 200, body: { success: true, message: 'OK', data: page(records.map(presentDelivery), total, pageNumber, size) } };
    },
    getWebhookDelivery: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: presentDelivery(await webhooks.getDelivery(params.id)) },
    }),
    redeliverWebhookDelivery: async ({ params }) => ({
      status: 201,
      body: { success: true, message: 'Redelivery queued', data: presentDelivery(await webhooks.redeliver(params.id)) },
    }),
    sendTestWebhook: async ({ params }) => ({
      status: 201,
      body: { success: true, message: 'Test event queued', data: presentDelivery(await webhooks.sendTest(params.id)) },
    }),
    listenWebhookEvents: async ({ params, query }) => {
      await orgs.getOrganization(params.id);
      const feed = await webhooks.eventFeed(params.id, query.after, query.limit ?? 50);
      return {
        status: 200,
        body: {
          success: true,
          message: 'OK',
          data: {
            cursor: feed.cursor,
            events: feed.events.map((e) => ({ eventId: e.event.id, type: e.event.type, createdAt: iso(e.event.createdAt), headers: { ...e.headers }, body: e.body })),
          },
        },
      };
    },
  };
}
