/**
 * Webhook endpoint management (merchant API) and the operator's delivery tools (admin API):
 * inspect deliveries, redeliver, send a test event, and the event feed behind `webhook listen`.
 */
import type { Clock } from '../kernel/clock.js';
import { unixSeconds } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import { conflict, notFound, serviceUnavailable, validationError } from '../kernel/errors.js';
import { renderEnvelope, type EndpointIdentity } from './envelope.js';
import { signWebhook, type SignedHeaders } from './signature.js';
import type { SigningKeyService } from './signing-key.service.js';
import { UnsafeUrlError, type UrlGuard } from './url-guard.js';
import type { DeliveryDetail, DeliveryLogFilter, WebhookDeliveryRepository } from './deliveries.repository.js';
import type { WebhookEndpointRepository } from './endpoints.repository.js';
import type { WebhookOutboxRepository } from './outbox.repository.js';
import type { Delivery, DeliveryWithAttempts, StoredEvent, WebhookEndpoint, WebhookEndpointPatch, WebhookEventType } from './webhook.model.js';

/** merchant.yaml Limits: "webhook endpoints — 20 per organization". */
export const MAX_ENDPOINTS_PER_ORG = 20;

/**
 * Identity used in envelopes rendered for `webhook listen` (admin.yaml documents it): the CLI is
 * not a registered endpoint, but the envelope's `endpoint` must still validate.
 */
export const LISTEN_ENDPOINT: EndpointIdentity = { id: 'WHE_000000000000000000listen', name: 'webhook listen (CLI)' };

export interface EndpointInput {
  name: string;
  url: string;
  events?: WebhookEventType[];
  enabled?: boolean;
}

export interface SignedEvent {
  event: StoredEvent;
  headers: SignedHeaders;
  body: string;
}

export class WebhookService {
  constructor(
    private readonly repos: { endpoints: WebhookEndpointRepository; outbox: WebhookOutboxRepository; deliveries: WebhookDeliveryRepository },
    private readonly signingKeys: SigningKeyService,
    private readonly guard: UrlGuard,
    private readonly clock: Clock,
  ) {}

  /**
   * Retention: events older than `retentionDays` whose deliveries are all final are deleted with
   * their deliveries and attempts, in batches. True when a full batch was deleted (more may wait).
   */
  async pruneSettledEvents(retentionDays: number, batch = 1000): Promise<boolean> {
    const before = new Date(this.clock.now().getTime() - retentionDays * 86_400_000);
    return (await this.repos.outbox.deleteSettledEventsBefore(before, batch)) === batch;
  }

  /** The spec's URL rules, as a 400 naming the rule (503 when DNS itself is failing). */
  private async checkUrl(url: string): Promise<void> {
    try {
      await this.guard.check(url);
    } catch (err) {
      if (!(err instanceof UnsafeUrlError)) throw err;
      if (err.reason === 'dns_error') throw serviceUnavailable(`${err.message}; retry later`);
      throw validationError(`body.${err.message}`, { field: 'url', reason: err.reason });
    }
  }

  async createEndpoint(orgId: string, input: EndpointInput): Promise<WebhookEndpoint> {
    await this.checkUrl(input.url);
    const now = this.clock.now();
    const endpoint: WebhookEndpoint = {
      id: newId('WHE'),
      orgId,
      name: input.name,
      url: input.url,
      events: input.events ?? [],
      enabled: input.enabled ?? true,
      createdAt: now,
      updatedAt: now,
      deletedAt: null,
    };
    if (!(await this.repos.endpoints.insertEndpointWithinCap(endpoint, MAX_ENDPOINTS_PER_ORG))) {
      throw conflict(`An organization can have at most ${MAX_ENDPOINTS_PER_ORG} webhook endpoints`);
    }
    return endpoint;
  }

  listEndpoints(orgId: string, page: number, size: number) {
    return this.repos.endpoints.listEndpoints(orgId, { offset: (page - 1) * size, limit: size });
  }

  async getEndpoint(orgId: string, id: string): Promise<WebhookEndpoint> {
    const endpoint = await this.repos.endpoints.findEndpoint(orgId, id);
    if (!endpoint) throw notFound('Webhook endpoint');
    return endpoint;
  }

  async updateEndpoint(orgId: string, id: string, patch: WebhookEndpointPatch): Promise<WebhookEndpoint> {
    // Existence first: a foreign or unknown id is 404 whatever the body says.
    await this.getEndpoint(orgId, id);
    if (patch.url !== undefined) await this.checkUrl(patch.url);
    const updated = await this.repos.endpoints.updateEndpoint(orgId, id, patch, this.clock.now());
    if (!updated) throw notFound('Webhook endpoint');
    return updated;
  }

  async deleteEndpoint(orgId: string, id: string): Promise<WebhookEndpoint> {
    const deleted = await this.repos.endpoints.deleteEndpoint(orgId, id, this.clock.now());
    if (!deleted) throw notFound('Webhook endpoint');
    return deleted;
  }

  // ---------- operator tools (admin API) ----------

  listDeliveries(orgId: string, eventId: string | undefined, page: number, size: number) {
    return this.repos.deliveries.listDeliveries(orgId, { eventId }, { offset: (page - 1) * size, limit: size });
  }

  /** One delivery; with `orgId` (a member's or a key's door) another organization's is the same 404 as an unknown one. */
  async getDelivery(id: string, orgId?: string): Promise<DeliveryWithAttempts> {
    const delivery = await this.repos.deliveries.findDelivery(id);
    if (!delivery || (orgId !== undefined && delivery.orgId !== orgId)) throw notFound('Webhook delivery');
    return delivery;
  }

  /**
   * The delivery log: the organization's deliveries newest first, filtered, a keyset page after
   * the delivery `startingAfter` (an id of an earlier page; unknown or foreign is a 400).
   */
  async deliveryLog(orgId: string, filter: DeliveryLogFilter, startingAfter: string | undefined, limit: number) {
    let after: { createdAt: Date; id: string } | undefined;
    if (startingAfter !== undefined) {
      const cursor = await this.repos.deliveries.findDelivery(startingAfter);
      if (!cursor || cursor.orgId !== orgId) throw validationError('query.starting_after: no delivery of this organization has this id (it may have passed the retention period); start again without it', { field: 'starting_after' });
      after = { createdAt: cursor.createdAt, id: cursor.id };
    }
    const { records, hasMore } = await this.repos.deliveries.listDeliveryLog(orgId, filter, after, limit);
    return { records, hasMore, nextCursor: hasMore ? records.at(-1)!.id : null };
  }

  /**
   * One delivery of the organization with its attempts and the exact envelope it sends (the
   * event's `data` wrapped for its endpoint, as every attempt renders it).
   */
  async deliveryDetail(id: string, orgId: string): Promise<DeliveryDetail & { payload: Record<string, unknown> }> {
    const detail = await this.repos.deliveries.findDeliveryDetail(id);
    if (!detail || detail.orgId !== orgId) throw notFound('Webhook delivery');
    const payload = JSON.parse(renderEnvelope(detail.event, detail.endpoint).toString('utf8')) as Record<string, unknown>;
    return { ...detail, payload };
  }

  /**
   * Sends the delivery's event to its endpoint again as a new delivery (fresh 12-attempt budget,
   * same `webhook-id`, so a receiver that already processed it de-duplicates it).
   */
  async redeliver(deliveryId: string, orgId?: string): Promise<DeliveryWithAttempts> {
    const original = await this.getDelivery(deliveryId, orgId);
    const endpoint = await this.repos.endpoints.findEndpointById(original.endpointId);
    if (!endpoint) throw conflict('The endpoint of this delivery was deleted');
    if (!endpoint.enabled) throw conflict('The endpoint of this delivery is disabled; enable it first');
    const fresh: Delivery = await this.repos.deliveries.insertRedelivery(original, this.clock.now());
    return { ...fresh, eventType: original.eventType, attempts: [] };
  }

  /**
   * Queues a signed `webhook.test` event for one endpoint, whatever its event selection. With
   * `orgId` only an endpoint of that organization (another's is 404). `from` names who asked, in
   * the test event's message.
   */
  async sendTest(endpointId: string, options: { orgId?: string; from?: string } = {}): Promise<DeliveryWithAttempts> {
    const endpoint = options.orgId === undefined ? await this.repos.endpoints.findEndpointById(endpointId) : await this.repos.endpoints.findEndpoint(options.orgId, endpointId);
    if (!endpoint) throw notFound('Webhook endpoint');
    if (!endpoint.enabled) throw conflict('The endpoint is disabled; enable it first');
    const now = this.clock.now();
    const { delivery } = await this.repos.outbox.insertDirectedEvent(
      {
        orgId: endpoint.orgId,
        type: 'webhook.test',
        data: { test: { message: `Test event sent from ${options.from ?? 'the Kassa admin CLI'}; no action needed.`, requestedAt: now.toISOString() } },
      },
      endpoint.id,
      now,
    );
    return { ...delivery, eventType: 'webhook.test', attempts: [] };
  }

  /**
   * The feed behind `webhook listen`: the organization's events after cursor `after` (a sequence
   * number), each rendered for LISTEN_ENDPOINT and signed now with the published keys, so the
   * local receiver verifies them exactly like real deliveries. Without `after`, returns no events
   * and the current cursor (listening starts "from now").
   */
  async eventFeed(orgId: string, after: number | undefined, limit: number): Promise<{ cursor: number; events: SignedEvent[] }> {
    if (after === undefined) return { cursor: await this.repos.outbox.latestEventSeq(orgId), events: [] };
    const events = await this.repos.outbox.listEventsAfter(orgId, after, limit);
    if (events.length === 0) return { cursor: after, events: [] };
    const signers = await this.signingKeys.signers();
    const timestamp = unixSeconds(this.clock.now());
    return {
      cursor: events[events.length - 1]!.seq,
      events: events.map((event) => {
        const body = renderEnvelope(event, LISTEN_ENDPOINT);
        return { event, headers: signWebhook(signers, event.id, timestamp, body), body: body.toString('utf8') };
      }),
    };
  }
}

