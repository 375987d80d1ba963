/**
 * The JSON envelope of a delivery (merchant.yaml `OrderWebhookEvent` / `SubscriptionWebhookEvent`):
 * the event's stored `data`, wrapped per endpoint. Rendering is deterministic, so every attempt of
 * a delivery sends the same bytes as long as the endpoint keeps its name.
 */
import type { StoredEvent } from './webhook.model.js';

/** Carried in every envelope; changes only with a breaking change of the payloads. */
export const WEBHOOK_API_VERSION = '2026-11-01';

export interface EndpointIdentity {
  id: string;
  name: string;
}

export function renderEnvelope(event: StoredEvent, endpoint: EndpointIdentity): Buffer {
  return Buffer.from(
    JSON.stringify({
      type: event.type,
      // When the event happened (its outbox row was written), not when this attempt is made.
      timestamp: event.createdAt.toISOString(),
      apiVersion: WEBHOOK_API_VERSION,
      // Whom the delivery is for: one signing key serves every organization, so a receiver checks
      // these (verifyWebhook's expectedOrganizationId / expectedEndpointId), not the signature alone.
      endpoint: { id: endpoint.id, name: endpoint.name, orgId: event.orgId },
      data: event.data,
    }),
    'utf8',
  );
}
