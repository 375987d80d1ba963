/**
 * The webhook domain's records: endpoints, events (the outbox) and their deliveries and attempts,
 * shared by the three repositories, the services and the delivery worker.
 */
import type { components } from '../../generated/merchant.js';

export type WebhookEventType = components['schemas']['WebhookEventType'];
export type WebhookOrder = components['schemas']['WebhookOrder'];
export type WebhookSubscription = components['schemas']['WebhookSubscription'];

/** Types only ever sent on an operator's request, to one endpoint (never selectable). */
export type DirectedEventType = 'webhook.test';
export type StoredEventType = WebhookEventType | DirectedEventType;

export interface WebhookEndpoint {
  id: string;
  orgId: string;
  name: string;
  url: string;
  events: WebhookEventType[];
  enabled: boolean;
  createdAt: Date;
  updatedAt: Date;
  deletedAt: Date | null;
}

export type WebhookEndpointPatch = Partial<Pick<WebhookEndpoint, 'name' | 'url' | 'events' | 'enabled'>>;

export interface StoredEvent {
  id: string;
  seq: number;
  orgId: string;
  type: StoredEventType;
  /** The envelope's `data` object. */
  data: Record<string, unknown>;
  createdAt: Date;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface Delivery {
  id: string;
  eventId: string;
  endpointId: string;
  orgId: string;
  status: DeliveryStatus;
  attemptCount: number;
  nextAttemptAt: Date;
  leaseUntil: Date | null;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: Date;
  updatedAt: Date;
  completedAt: Date | null;
}

export interface Attempt {
  deliveryId: string;
  attemptNumber: number;
  url: string;
  statusCode: number | null;
  durationMs: number;
  responseBody: string | null;
  error: string | null;
  attemptedAt: Date;
}

export interface DeliveryWithAttempts extends Delivery {
  eventType: StoredEventType;
  attempts: Attempt[];
}

export interface ClaimedDelivery {
  delivery: Delivery;
  leaseToken: string;
  /** The lease a previous claim left behind without recording a result, if any. */
  abandonedLeaseUntil: Date | null;
  /** The delivery's event, read by the claim itself (undefined if it is gone). */
  event: StoredEvent | undefined;
  /** Its endpoint as the claim saw it; undefined when deleted. */
  endpoint: Pick<WebhookEndpoint, 'id' | 'name' | 'url' | 'enabled'> | undefined;
}

/** One finished attempt (or a drop without an attempt) to record; see `recordAttempts`. */
export interface AttemptRecord {
  deliveryId: string;
  leaseToken: string;
  attempt: Attempt | null;
  outcome: DeliveryOutcome;
}

/** What the worker writes when it finishes an attempt. */
export interface DeliveryOutcome {
  status: DeliveryStatus;
  nextAttemptAt?: Date;
  attemptCount?: number;
  lastStatusCode: number | null;
  lastError: string | null;
  now: Date;
}
