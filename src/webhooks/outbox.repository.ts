/**
 * The transactional outbox in PostgreSQL: webhook events, each written with one pending delivery
 * per endpoint it goes to. Other domains emit events with `enqueueWebhookEvent` inside their own
 * transaction, so a state change and its event commit (or roll back) together: an order is never
 * PAID without its `order.paid` queued, and no event is sent for a change that did not commit.
 */
import type { Knex } from 'knex';
import type { Db } from '../db/knex.js';
import { newId } from '../kernel/ids.js';
import { insertPendingDeliveries } from './deliveries.repository.js';
import type { Delivery, DirectedEventType, StoredEvent, StoredEventType, WebhookEventType, WebhookOrder, WebhookSubscription } from './webhook.model.js';

/** An event another domain emits, in its own transaction (`enqueueWebhookEvent`). */
export interface OutboxEvent {
  orgId: string;
  type: WebhookEventType;
  /** `order.refund*` also carry `refund`, `order.dispute_*` also `dispute`; `meter.*` a customer and what crossed (merchant.yaml). */
  data: ({ order: WebhookOrder } & Record<string, unknown>) | { subscription: WebhookSubscription } | ({ customer: { customerId: string; externalId: string | null } } & Record<string, unknown>);
}

interface EventRow {
  id: string;
  seq: number | string;
  org_id: string;
  type: string;
  payload: Record<string, unknown> | string;
  created_at: Date;
}

const toEvent = (row: EventRow): StoredEvent => ({
  id: row.id,
  seq: Number(row.seq),
  orgId: row.org_id,
  type: row.type as StoredEventType,
  data: typeof row.payload === 'string' ? (JSON.parse(row.payload) as Record<string, unknown>) : row.payload,
  createdAt: new Date(row.created_at),
});

const ORDER_TYPES = new Set<WebhookEventType>(['order.pending', 'order.paid', 'order.failed', 'order.refunded', 'order.refund_failed', 'order.dispute_created', 'order.dispute_closed']);
/** What else an order event carries beside `data.order`. */
const ORDER_EXTRA: Partial<Record<WebhookEventType, string>> = {
  'order.refunded': 'refund',
  'order.refund_failed': 'refund',
  'order.dispute_created': 'dispute',
  'order.dispute_closed': 'dispute',
};

/**
 * Writes the event (`EVT_…`, the future `webhook-id`) and one pending delivery per enabled,
 * live endpoint of the organization whose selection includes the type (empty selection = all).
 *
 * This function — unlike every other repository method — takes the CALLER's transaction: the
 * outbox guarantee (state change and event commit together) only holds if both writes share one
 * transaction, and the transaction belongs to the domain that changes state (orders,
 * subscriptions). It issues no query on the pool, so it is safe on PGlite's single connection.
 */
export async function enqueueWebhookEvent(trx: Knex.Transaction, event: OutboxEvent, now: Date): Promise<string> {
  const carriesOrder = 'order' in event.data;
  if (ORDER_TYPES.has(event.type) !== carriesOrder) {
    // A programming error in the emitting domain: refuse it rather than send a malformed event.
    throw new Error(`webhook event ${event.type} must carry data.${ORDER_TYPES.has(event.type) ? 'order' : 'subscription'}`);
  }
  const extra = ORDER_EXTRA[event.type];
  if (extra && !(extra in event.data)) throw new Error(`webhook event ${event.type} must carry data.${extra}`);
  const id = newId('EVT');
  // The customer's `externalId` (README step 6, docs/customer-portal.md; issue 37 §26): read from
  // the customer's row inside the INSERT, in this transaction (so an externalId attached by the
  // same checkout is seen), instead of one more query per event in every emitting flow.
  const subjectKey = 'order' in event.data ? 'order' : 'subscription';
  const customerId = (event.data as Record<string, { customerId?: unknown }>)[subjectKey]?.customerId;
  const payload =
    typeof customerId === 'string'
      ? { sql: `jsonb_set(?::jsonb, ARRAY[?::text, 'customerExternalId'], coalesce((SELECT to_jsonb(c.external_id) FROM customers c WHERE c.id = ? AND c.org_id = ?), 'null'::jsonb))`, bindings: [JSON.stringify(event.data), subjectKey, customerId, event.orgId] }
      : { sql: '?', bindings: [JSON.stringify(event.data)] };
  // The event row and the endpoints it goes to in one round trip (the emitting transaction holds
  // its locks meanwhile); the deliveries follow in a second one, when there are any.
  const result = await trx.raw(
    `WITH event AS (
       INSERT INTO webhook_events (id, org_id, type, payload, created_at) VALUES (?, ?, ?, ${payload.sql}, ?)
     )
     SELECT id FROM webhook_endpoints
      WHERE org_id = ? AND enabled AND deleted_at IS NULL AND (cardinality(events) = 0 OR ? = ANY(events))`,
    [id, event.orgId, event.type, ...payload.bindings, now, event.orgId, event.type],
  );
  const endpoints = result.rows as Array<{ id: string }>;
  await insertPendingDeliveries(trx, id, endpoints.map((e) => e.id), event.orgId, now);
  return id;
}

export interface WebhookOutboxRepository {
  /** An event addressed to one endpoint only (test events), with its delivery. */
  insertDirectedEvent(event: { orgId: string; type: DirectedEventType; data: Record<string, unknown> }, endpointId: string, now: Date): Promise<{ eventId: string; delivery: Delivery }>;
  findEvent(id: string): Promise<StoredEvent | undefined>;
  /**
   * Deletes up to `limit` events created before `before` whose deliveries are all final
   * (succeeded or failed), with their deliveries and attempts. Returns how many were deleted.
   */
  deleteSettledEventsBefore(before: Date, limit: number): Promise<number>;
  listEventsAfter(orgId: string, afterSeq: number, limit: number): Promise<StoredEvent[]>;
  latestEventSeq(orgId: string): Promise<number>;
}

export class KnexWebhookOutboxRepository implements WebhookOutboxRepository {
  constructor(private readonly db: Db) {}

  async deleteSettledEventsBefore(before: Date, limit: number): Promise<number> {
    // Oldest first by the created_at index; an event with a pending delivery (a retry still
    // scheduled, or a redelivery) stays until it settles. Deliveries and attempts cascade.
    const result = await this.db.raw(
      `DELETE FROM webhook_events WHERE id IN (
         SELECT e.id FROM webhook_events e
          WHERE e.created_at < ?::timestamptz
            AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.status = 'pending')
          ORDER BY e.created_at
          LIMIT ?)
       RETURNING id`,
      [before.toISOString(), limit],
    );
    return (result.rows as unknown[]).length;
  }

  async insertDirectedEvent(event: { orgId: string; type: DirectedEventType; data: Record<string, unknown> }, endpointId: string, now: Date) {
    return this.db.transaction(async (trx) => {
      const eventId = newId('EVT');
      await trx('webhook_events').insert({ id: eventId, org_id: event.orgId, type: event.type, payload: JSON.stringify(event.data), created_at: now });
      const [delivery] = await insertPendingDeliveries(trx, eventId, [endpointId], event.orgId, now);
      return { eventId, delivery: delivery! };
    });
  }

  async findEvent(id: string): Promise<StoredEvent | undefined> {
    const row = await this.db<EventRow>('webhook_events').where({ id }).first();
    return row ? toEvent(row) : undefined;
  }

  async listEventsAfter(orgId: string, afterSeq: number, limit: number): Promise<StoredEvent[]> {
    const rows = await this.db<EventRow>('webhook_events').where({ org_id: orgId }).andWhere('seq', '>', afterSeq).orderBy('seq', 'asc').limit(limit);
    return rows.map(toEvent);
  }

  async latestEventSeq(orgId: string): Promise<number> {
    const row = await this.db('webhook_events').where({ org_id: orgId }).max<{ max: number | string | null }[]>({ max: 'seq' }).first();
    return Number(row?.max ?? 0);
  }
}
