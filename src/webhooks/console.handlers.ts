/**
 * The console's webhook operations (openapi/console.yaml, tag Webhooks): a member's door to the
 * same WebhookService and SigningKeyService the operator's admin API uses, scoped to the
 * session's organization (another organization's delivery or endpoint is 404).
 */
import type { ConsoleHandlers } from '../handler-maps.js';
import { iso, isoOrNull } from '../kernel/present.js';
import type { DeliveryLogEntry } from './deliveries.repository.js';
import type { SigningKeyService } from './signing-key.service.js';
import type { DeliveryWithAttempts } from './webhook.model.js';
import type { WebhookService } from './webhooks.service.js';
import { presentAttempt, presentSigningKey } from './admin.handlers.js';

/** A member rotates the shared signing key at most once a day (see rotateConsoleWebhookSigningKey). */
export const CONSOLE_ROTATION_MIN_KEY_AGE_SECONDS = 24 * 3600;

const presentSummary = (d: DeliveryWithAttempts | DeliveryLogEntry, orderId: string | null) => ({
  deliveryId: d.id,
  eventId: d.eventId,
  eventType: d.eventType,
  endpointId: d.endpointId,
  orderId,
  status: d.status,
  attemptCount: d.attemptCount,
  nextAttemptAt: d.status === 'pending' ? iso(d.nextAttemptAt) : null,
  lastStatusCode: d.lastStatusCode,
  lastError: d.lastError,
  createdAt: iso(d.createdAt),
  completedAt: isoOrNull(d.completedAt),
});

type WebhookConsoleHandlers = Pick<
  ConsoleHandlers,
  | 'listConsoleWebhookDeliveries'
  | 'getConsoleWebhookDelivery'
  | 'redeliverConsoleWebhookDelivery'
  | 'sendConsoleTestWebhook'
  | 'listConsoleWebhookSigningKeys'
  | 'rotateConsoleWebhookSigningKey'
>;

export function createWebhookConsoleHandlers(deps: { webhooks: WebhookService; signingKeys: SigningKeyService }): WebhookConsoleHandlers {
  const { webhooks, signingKeys } = deps;
  return {
    listConsoleWebhookDeliveries: async ({ auth, query }) => {
      const log = await webhooks.deliveryLog(
        auth.orgId,
        { status: query.status, eventType: query.event_type, endpointId: query.endpoint_id, orderId: query.order_id, eventId: query.event_id },
        query.starting_after,
        query.size ?? 20,
      );
      return { status: 200, body: { success: true, message: 'OK', data: { records: log.records.map((d) => presentSummary(d, d.orderId)), hasMore: log.hasMore, nextCursor: log.nextCursor } } };
    },
    getConsoleWebhookDelivery: async ({ auth, params }) => {
      const d = await webhooks.deliveryDetail(params.id, auth.orgId);
      return {
        status: 200,
        body: {
          success: true,
          message: 'OK',
          data: {
            ...presentSummary(d, d.orderId),
            endpoint: d.endpoint,
            payload: d.payload as { type: string; timestamp: string; apiVersion: string; endpoint: Record<string, unknown>; data: Record<string, unknown> },
            attempts: d.attempts.map(presentAttempt),
          },
        },
      };
    },
    redeliverConsoleWebhookDelivery: async ({ auth, params }) => {
      const original = await webhooks.deliveryDetail(params.id, auth.orgId);
      const fresh = await webhooks.redeliver(params.id, auth.orgId);
      return { status: 201, body: { success: true, message: 'Redelivery queued', data: presentSummary(fresh, original.orderId) } };
    },
    sendConsoleTestWebhook: async ({ auth, params }) => ({
      status: 201,
      body: { success: true, message: 'Test event queued', data: presentSummary(await webhooks.sendTest(params.id, { orgId: auth.orgId, from: 'the Kassa console' }), null) },
    }),
    listConsoleWebhookSigningKeys: async () => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await signingKeys.published()).map(presentSigningKey) },
    }),
    rotateConsoleWebhookSigningKey: async ({ body }) => {
      const rotation = await signingKeys.rotate(body?.graceSeconds, { minKeyAgeSeconds: CONSOLE_ROTATION_MIN_KEY_AGE_SECONDS });
      return {
        status: 201,
        body: {
          success: true,
          message: 'Signing key rotated',
          data: { keyId: rotation.current.id, retiredKeyId: rotation.retired?.id ?? null, keys: rotation.published.map(presentSigningKey) },
        },
      };
    },
  };
}
