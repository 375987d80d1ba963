/**
 * Webhook endpoints, the event outbox, deliveries and attempts in PostgreSQL. The only module of
 * this domain (with signing-key.repository.ts) that speaks knex.
 *
 * Delivery rows move pending → succeeded | failed. A worker claims due rows with one statement
 * (`FOR UPDATE SKIP LOCKED` + a lease), delivers with no transaction open, and records the outcome
 * in one short transaction guarded by the lease token. A worker that dies after claiming leaves
 * the lease behind; once it passes, the row is due again and the next claim notes the abandoned
 * attempt. PGlite has a single connection, so nothing here queries `db` while a transaction is open.
 */
import type { Knex } from 'knex';
import { isPostgres, type Db } from '../db/knex.js';
import { newId, randomToken } from '../kernel/ids.js';
import type { components } from '../../generated/merchant.js';

export type WebhookEventType = components['schemas']['WebhookEventType'];
export type WebhookOrder = components['schemas']['WebhookOrder'];
export type WebhookSubscription = components['schemas']['WebhookSubscription'];

/** Types only ever sent on an operator's request, to one endpoint (never selectable). */
export type DirectedEventType = 'webhook.test';
export type StoredEventType = WebhookEventType | DirectedEventType;

export interface OutboxEvent {
  orgId: string;
  type: WebhookEventType;
  data: { order: WebhookOrder } | { subscription: WebhookSubscription };
}

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

interface EndpointRow {
  id: string;
  org_id: string;
  name: string;
  url: string;
  events: string[];
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

interface EventRow {
  id: string;
  seq: number | string;
  org_id: string;
  type: string;
  payload: Record<string, unknown> | string;
  created_at: Date;
}

interface DeliveryRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  org_id: string;
  status: DeliveryStatus;
  attempt_count: number;
  next_attempt_at: Date;
  lease_until: Date | null;
  lease_token: string | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

interface ClaimRow extends DeliveryRow {
  previous_lease: Date | null;
  event_seq: number | string | null;
  event_type: string | null;
  event_payload: Record<string, unknown> | string | null;
  event_created_at: Date | null;
  endpoint_name: string | null;
  endpoint_url: string | null;
  endpoint_enabled: boolean | null;
}

interface AttemptRow {
  id: number;
  delivery_id: string;
  attempt_number: number;
  url: string;
  status_code: number | null;
  duration_ms: number;
  response_body: string | null;
  error: string | null;
  attempted_at: Date;
}

const dateOrNull = (d: Date | string | null): Date | null => (d === null ? null : new Date(d));

const toEndpoint = (row: EndpointRow): WebhookEndpoint => ({
  id: row.id,
  orgId: row.org_id,
  name: row.name,
  url: row.url,
  events: row.events as WebhookEventType[],
  enabled: row.enabled,
  createdAt: new Date(row.created_at),
  updatedAt: new Date(row.updated_at),
  deletedAt: dateOrNull(row.deleted_at),
});

const toEvent = (row: EventRow): StoredEvent => ({
  id: row.id,
  seq: Number(row.seq),
  orgId: row.org_id,
  type: row.type as StoredEventType,
  data: typeof row.payload === 'string' ? (JSON.parse(row.payload) as Record<string, unknown>) : row.payload,
  createdAt: new Date(row.created_at),
});

const toDelivery = (row: DeliveryRow): Delivery => ({
  id: row.id,
  eventId: row.event_id,
  endpointId: row.endpoint_id,
  orgId: row.org_id,
  status: row.status,
  attemptCount: row.attempt_count,
  nextAttemptAt: new Date(row.next_attempt_at),
  leaseUntil: dateOrNull(row.lease_until),
  lastStatusCode: row.last_status_code,
  lastError: row.last_error,
  createdAt: new Date(row.created_at),
  updatedAt: new Date(row.updated_at),
  completedAt: dateOrNull(row.completed_at),
});

const toAttempt = (row: AttemptRow): Attempt => ({
  deliveryId: row.delivery_id,
  attemptNumber: row.attempt_number,
  url: row.url,
  statusCode: row.status_code,
  durationMs: row.duration_ms,
  responseBody: row.response_body,
  error: row.error,
  attemptedAt: new Date(row.attempted_at),
});

const attemptRow = (attempt: Attempt): Omit<AttemptRow, 'id'> => ({
  delivery_id: attempt.deliveryId,
  attempt_number: attempt.attemptNumber,
  url: attempt.url,
  status_code: attempt.statusCode,
  duration_ms: attempt.durationMs,
  response_body: attempt.responseBody,
  error: attempt.error,
  attempted_at: attempt.attemptedAt,
});

/** Delivery ids are not part of the merchant API; the prefix only helps operators read logs and CLI output. */
export const newDeliveryId = (): string => `WHD_${randomToken()}`;

function deliveryRow(eventId: string, endpointId: string, orgId: string, now: Date): DeliveryRow {
  return {
    id: newDeliveryId(),
    event_id: eventId,
    endpoint_id: endpointId,
    org_id: orgId,
    status: 'pending',
    attempt_count: 0,
    next_attempt_at: now,
    lease_until: null,
    lease_token: null,
    last_status_code: null,
    last_error: null,
    created_at: now,
    updated_at: now,
    completed_at: null,
  };
}

const ORDER_TYPES = new Set<WebhookEventType>(['order.pending', 'order.paid', 'order.failed']);

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
  const id = newId('EVT');
  // The event row and the endpoints it goes to in one round trip (the emitting transaction holds
  // its locks meanwhile); the deliveries follow in a second one, when there are any.
  const result = await trx.raw(
    `WITH event AS (
       INSERT INTO webhook_events (id, org_id, type, payload, created_at) VALUES (?, ?, ?, ?, ?)
     )
     SELECT id FROM webhook_endpoints
      WHERE org_id = ? AND enabled AND deleted_at IS NULL AND (cardinality(events) = 0 OR ? = ANY(events))`,
    [id, event.orgId, event.type, JSON.stringify(event.data), now, event.orgId, event.type],
  );
  const endpoints = result.rows as Array<{ id: string }>;
  if (endpoints.length > 0) {
    await trx('webhook_deliveries').insert(endpoints.map((e) => deliveryRow(id, e.id, event.orgId, now)));
  }
  return id;
}

export interface WebhookRepository {
  /** Inserts unless the organization already has `cap` live endpoints; serialized per organization. */
  insertEndpointWithinCap(endpoint: WebhookEndpoint, cap: number): Promise<boolean>;
  findEndpoint(orgId: string, id: string): Promise<WebhookEndpoint | undefined>;
  /** Any organization's live endpoint (admin tools). */
  findEndpointById(id: string): Promise<WebhookEndpoint | undefined>;
  listEndpoints(orgId: string, page: { offset: number; limit: number }): Promise<{ records: WebhookEndpoint[]; total: number }>;
  updateEndpoint(orgId: string, id: string, patch: WebhookEndpointPatch, now: Date): Promise<WebhookEndpoint | undefined>;
  /** Soft-deletes the endpoint and drops its queued deliveries. */
  deleteEndpoint(orgId: string, id: string, now: Date): Promise<WebhookEndpoint | undefined>;

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

  /** Leases up to `limit` due deliveries, each with its event and endpoint (one statement). */
  claimDue(now: Date, limit: number, leaseMs: number): Promise<ClaimedDelivery[]>;
  /**
   * Writes the attempt and, if `leaseToken` still holds the lease, the delivery's new state.
   * Returns false when the lease was lost (the attempt is recorded anyway: it happened).
   */
  recordAttempt(deliveryId: string, leaseToken: string, attempt: Attempt | null, outcome: DeliveryOutcome): Promise<boolean>;
  /**
   * `recordAttempt` for many deliveries in one statement (atomic as a whole). Returns the ids of
   * the deliveries whose lease still held, i.e. whose new state was written.
   */
  recordAttempts(records: AttemptRecord[]): Promise<Set<string>>;
  /** An attempt row alone (an abandoned attempt noticed by the next claim). */
  insertAttempt(attempt: Attempt): Promise<void>;
  findDelivery(id: string): Promise<DeliveryWithAttempts | undefined>;
  listDeliveries(orgId: string, filter: { eventId?: string }, page: { offset: number; limit: number }): Promise<{ records: DeliveryWithAttempts[]; total: number }>;
  /** A fresh delivery (new attempt budget) of the same event to the same endpoint. */
  insertRedelivery(of: Delivery, now: Date): Promise<Delivery>;
}

export class KnexWebhookRepository implements WebhookRepository {
  /** node-postgres takes several statements in one query (simple protocol); PGlite's query does not. */
  private readonly simpleProtocol: boolean;

  constructor(private readonly db: Db) {
    this.simpleProtocol = isPostgres(db);
  }

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

  async insertEndpointWithinCap(endpoint: WebhookEndpoint, cap: number): Promise<boolean> {
    return this.db.transaction(async (trx) => {
      // Row lock on the organization: two concurrent creations cannot both see 19.
      await trx('organizations').where({ id: endpoint.orgId }).forUpdate().first('id');
      const row = await trx('webhook_endpoints').where({ org_id: endpoint.orgId }).whereNull('deleted_at').count<{ count: number }[]>({ count: '*' }).first();
      if (Number(row?.count ?? 0) >= cap) return false;
      await trx<EndpointRow>('webhook_endpoints').insert({
        id: endpoint.id,
        org_id: endpoint.orgId,
        name: endpoint.name,
        url: endpoint.url,
        events: endpoint.events,
        enabled: endpoint.enabled,
        created_at: endpoint.createdAt,
        updated_at: endpoint.updatedAt,
        deleted_at: null,
      });
      return true;
    });
  }

  async findEndpoint(orgId: string, id: string): Promise<WebhookEndpoint | undefined> {
    const row = await this.db<EndpointRow>('webhook_endpoints').where({ org_id: orgId, id }).whereNull('deleted_at').first();
    return row ? toEndpoint(row) : undefined;
  }

  async findEndpointById(id: string): Promise<WebhookEndpoint | undefined> {
    const row = await this.db<EndpointRow>('webhook_endpoints').where({ id }).whereNull('deleted_at').first();
    return row ? toEndpoint(row) : undefined;
  }

  async listEndpoints(orgId: string, page: { offset: number; limit: number }) {
    const live = () => this.db<EndpointRow>('webhook_endpoints').where({ org_id: orgId }).whereNull('deleted_at');
    const rows = await live()
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
      .offset(page.offset)
      .limit(page.limit);
    const count = await live().count<{ count: number }[]>({ count: '*' }).first();
    return { records: rows.map(toEndpoint), total: Number(count?.count ?? 0) };
  }

  async updateEndpoint(orgId: string, id: string, patch: WebhookEndpointPatch, now: Date): Promise<WebhookEndpoint | undefined> {
    const changes: Partial<EndpointRow> = { updated_at: now };
    if (patch.name !== undefined) changes.name = patch.name;
    if (patch.url !== undefined) changes.url = patch.url;
    if (patch.events !== undefined) changes.events = patch.events;
    if (patch.enabled !== undefined) changes.enabled = patch.enabled;
    const [row] = await this.db<EndpointRow>('webhook_endpoints').where({ org_id: orgId, id }).whereNull('deleted_at').update(changes).returning('*');
    return row ? toEndpoint(row as EndpointRow) : undefined;
  }

  async deleteEndpoint(orgId: string, id: string, now: Date): Promise<WebhookEndpoint | undefined> {
    return this.db.transaction(async (trx) => {
      const [row] = await trx<EndpointRow>('webhook_endpoints')
        .where({ org_id: orgId, id })
        .whereNull('deleted_at')
        .update({ deleted_at: now, updated_at: now })
        .returning('*');
      if (!row) return undefined;
      await trx<DeliveryRow>('webhook_deliveries').where({ endpoint_id: id, status: 'pending' }).update({
        status: 'failed',
        last_error: 'dropped: endpoint deleted',
        lease_until: null,
        lease_token: null,
        updated_at: now,
        completed_at: now,
      });
      return toEndpoint(row as EndpointRow);
    });
  }

  async insertDirectedEvent(event: { orgId: string; type: DirectedEventType; data: Record<string, unknown> }, endpointId: string, now: Date) {
    return this.db.transaction(async (trx) => {
      const eventId = newId('EVT');
      await trx('webhook_events').insert({ id: eventId, org_id: event.orgId, type: event.type, payload: JSON.stringify(event.data), created_at: now });
      const row = deliveryRow(eventId, endpointId, event.orgId, now);
      await trx('webhook_deliveries').insert(row);
      return { eventId, delivery: toDelivery(row) };
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

  async claimDue(now: Date, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    const leaseToken = randomToken(32);
    const leaseUntil = new Date(now.getTime() + leaseMs);
    // One statement, so no transaction stays open: SKIP LOCKED keeps concurrent workers off the
    // rows this one is taking, and the lease keeps them off once it commits. The event and the
    // endpoint come with the claim (two lookups per delivery saved). Due order is
    // `next_attempt_at` alone, the order of the partial index webhook_deliveries_due, so the scan
    // stops after `limit` rows (a tie-break on the random id made PostgreSQL sort every due row).
    const sql = `WITH due AS (
         SELECT id, lease_until AS previous_lease
           FROM webhook_deliveries
          WHERE status = 'pending'
            AND next_attempt_at <= ?::timestamptz
            AND (lease_until IS NULL OR lease_until <= ?::timestamptz)
          ORDER BY next_attempt_at
          LIMIT ?
          FOR UPDATE SKIP LOCKED),
       claimed AS (
         UPDATE webhook_deliveries AS d
            SET attempt_count = d.attempt_count + 1, lease_until = ?::timestamptz, lease_token = ?, updated_at = ?::timestamptz
           FROM due
          WHERE d.id = due.id
         RETURNING d.*, due.previous_lease)
       SELECT c.*,
              e.seq AS event_seq, e.type AS event_type, e.payload AS event_payload, e.created_at AS event_created_at,
              ep.name AS endpoint_name, ep.url AS endpoint_url, ep.enabled AS endpoint_enabled
         FROM claimed c
         LEFT JOIN webhook_events e ON e.id = c.event_id
         LEFT JOIN webhook_endpoints ep ON ep.id = c.endpoint_id AND ep.deleted_at IS NULL`;
    const bindings = [now.toISOString(), now.toISOString(), limit, leaseUntil.toISOString(), leaseToken, now.toISOString()];
    let result: { rows: unknown[] };
    if (this.simpleProtocol) {
      // The plan must be the ordered scan of webhook_deliveries_due whatever the statistics say.
      // Statistics taken while few deliveries were pending (the usual state) make a sudden
      // backlog look small, and PostgreSQL then picks a bitmap scan plus a sort of every due row
      // at each claim: O(backlog) per claim, exactly when throughput matters. SET LOCAL confines
      // the two planner settings to this claim: the three statements travel in one round trip
      // (simple protocol, values inlined by knex's escaping: ISO dates, an integer, our own
      // token) and run as one implicit transaction, rolled back as a whole on error.
      const inlined = this.db.raw(sql, bindings).toQuery();
      const results = (await this.db.raw(`SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off; ${inlined}`)) as unknown as Array<{ rows: unknown[] }>;
      result = results[2]!;
    } else {
      result = await this.db.raw(sql, bindings);
    }
    const rows = result.rows as Array<ClaimRow>;
    return rows
      .map((row) => ({
        delivery: toDelivery(row),
        leaseToken,
        abandonedLeaseUntil: dateOrNull(row.previous_lease),
        event:
          row.event_type === null
            ? undefined
            : toEvent({ id: row.event_id, seq: row.event_seq!, org_id: row.org_id, type: row.event_type, payload: row.event_payload!, created_at: row.event_created_at! }),
        endpoint: row.endpoint_url === null ? undefined : { id: row.endpoint_id, name: row.endpoint_name!, url: row.endpoint_url, enabled: row.endpoint_enabled! },
      }))
      .sort((a, b) => a.delivery.nextAttemptAt.getTime() - b.delivery.nextAttemptAt.getTime());
  }

  async recordAttempt(deliveryId: string, leaseToken: string, attempt: Attempt | null, outcome: DeliveryOutcome): Promise<boolean> {
    return (await this.recordAttempts([{ deliveryId, leaseToken, attempt, outcome }])).has(deliveryId);
  }

  async recordAttempts(records: AttemptRecord[]): Promise<Set<string>> {
    if (records.length === 0) return new Set();
    // One statement for the whole batch (the worker's finished attempts): the lease-token guard
    // applies per row, the attempts are inserted whether or not the lease still held (they
    // happened), and statement atomicity replaces the per-delivery transaction.
    const input = records.map((r, n) => ({
      n,
      delivery_id: r.deliveryId,
      lease_token: r.leaseToken,
      status: r.outcome.status,
      next_attempt_at: r.outcome.nextAttemptAt?.toISOString() ?? null,
      attempt_count: r.outcome.attemptCount ?? null,
      last_status_code: r.outcome.lastStatusCode,
      last_error: r.outcome.lastError,
      now: r.outcome.now.toISOString(),
      has_attempt: r.attempt !== null,
      attempt_number: r.attempt?.attemptNumber ?? null,
      url: r.attempt?.url ?? null,
      status_code: r.attempt?.statusCode ?? null,
      duration_ms: r.attempt?.durationMs ?? null,
      response_body: r.attempt?.responseBody ?? null,
      error: r.attempt?.error ?? null,
      attempted_at: r.attempt?.attemptedAt.toISOString() ?? null,
    }));
    const result = await this.db.raw(
      `WITH input AS (
         SELECT * FROM json_to_recordset(?::json) AS i(
           delivery_id text, lease_token text, status text, next_attempt_at timestamptz, attempt_count integer,
           last_status_code integer, last_error text, now timestamptz, has_attempt boolean,
           attempt_number integer, url text, status_code integer, duration_ms integer, response_body text, error text,
           attempted_at timestamptz, n integer)),
       updated AS (
         UPDATE webhook_deliveries AS d
            SET status = i.status,
                lease_until = NULL,
                lease_token = NULL,
                last_status_code = i.last_status_code,
                last_error = i.last_error,
                updated_at = i.now,
                completed_at = CASE WHEN i.status = 'pending' THEN NULL ELSE i.now END,
                next_attempt_at = COALESCE(i.next_attempt_at, d.next_attempt_at),
                attempt_count = COALESCE(i.attempt_count, d.attempt_count)
           FROM input AS i
          WHERE d.id = ANY(?::text[]) AND d.id = i.delivery_id AND d.lease_token = i.lease_token AND d.status = 'pending'
         RETURNING d.id),
       inserted AS (
         INSERT INTO webhook_attempts (delivery_id, attempt_number, url, status_code, duration_ms, response_body, error, attempted_at)
         SELECT delivery_id, attempt_number, url, status_code, duration_ms, response_body, error, attempted_at
           FROM input WHERE has_attempt ORDER BY n)
       SELECT id FROM updated`,
      // The id array lets the planner see how few rows it updates (primary-key lookups); joined
      // with the JSON rows alone it hashed the whole table.
      [JSON.stringify(input), records.map((r) => r.deliveryId)],
    );
    return new Set((result.rows as Array<{ id: string }>).map((r) => r.id));
  }

  async insertAttempt(attempt: Attempt): Promise<void> {
    await this.db<AttemptRow>('webhook_attempts').insert(attemptRow(attempt));
  }

  async findDelivery(id: string): Promise<DeliveryWithAttempts | undefined> {
    const row = await this.db('webhook_deliveries as d').join('webhook_events as e', 'e.id', 'd.event_id').where('d.id', id).first('d.*', 'e.type as event_type');
    if (!row) return undefined;
    const [withAttempts] = await this.attachAttempts([row as DeliveryRow & { event_type: string }]);
    return withAttempts;
  }

  async listDeliveries(orgId: string, filter: { eventId?: string }, page: { offset: number; limit: number }) {
    const base = () => {
      const q = this.db('webhook_deliveries as d').join('webhook_events as e', 'e.id', 'd.event_id').where('d.org_id', orgId);
      if (filter.eventId) q.andWhere('d.event_id', filter.eventId);
      return q;
    };
    const rows = await base()
      .select('d.*', 'e.type as event_type')
      .orderBy([{ column: 'd.created_at', order: 'desc' }, { column: 'd.id', order: 'desc' }])
      .offset(page.offset)
      .limit(page.limit);
    const count = await base().count<{ count: number }[]>({ count: '*' }).first();
    return { records: await this.attachAttempts(rows as Array<DeliveryRow & { event_type: string }>), total: Number(count?.count ?? 0) };
  }

  async insertRedelivery(of: Delivery, now: Date): Promise<Delivery> {
    const row = deliveryRow(of.eventId, of.endpointId, of.orgId, now);
    await this.db('webhook_deliveries').insert(row);
    return toDelivery(row);
  }

  private async attachAttempts(rows: Array<DeliveryRow & { event_type: string }>): Promise<DeliveryWithAttempts[]> {
    if (rows.length === 0) return [];
    const attempts = await this.db<AttemptRow>('webhook_attempts')
      .whereIn('delivery_id', rows.map((r) => r.id))
      .orderBy([{ column: 'delivery_id' }, { column: 'attempt_number' }, { column: 'id' }]);
    const byDelivery = new Map<string, Attempt[]>();
    for (const a of attempts) {
      const list = byDelivery.get(a.delivery_id) ?? [];
      list.push(toAttempt(a));
      byDelivery.set(a.delivery_id, list);
    }
    return rows.map((row) => ({ ...toDelivery(row), eventType: row.event_type as StoredEventType, attempts: byDelivery.get(row.id) ?? [] }));
  }
}
