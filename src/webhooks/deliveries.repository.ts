/**
 * Webhook deliveries and their attempts in PostgreSQL.
 *
 * Delivery rows move pending → succeeded | failed. A worker claims due rows with one statement
 * (`FOR UPDATE SKIP LOCKED` + a lease), delivers with no transaction open, and records the outcome
 * in one short transaction guarded by the lease token. A worker that dies after claiming leaves
 * the lease behind; once it passes, the row is due again and the next claim notes the abandoned
 * attempt. PGlite has a single connection, so nothing here queries `db` while a transaction is open.
 */
import type { Knex } from 'knex';
import { isPostgres, runStatement, type Db } from '../db/knex.js';
import { randomToken } from '../kernel/ids.js';
import type { Attempt, AttemptRecord, ClaimedDelivery, Delivery, DeliveryOutcome, DeliveryStatus, DeliveryWithAttempts, StoredEvent, StoredEventType } from './webhook.model.js';

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

/** The event's payload as the driver returns jsonb: parsed (node-postgres) or text. */
const payloadOf = (payload: Record<string, unknown> | string): Record<string, unknown> => (typeof payload === 'string' ? (JSON.parse(payload) as Record<string, unknown>) : payload);

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
const newDeliveryId = (): string => `WHD_${randomToken()}`;

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

/**
 * One pending delivery of the event to each endpoint, with the caller's transaction (the outbox's
 * when it writes an event; see outbox.repository.ts). Returns them in `endpointIds` order.
 */
export async function insertPendingDeliveries(trx: Knex.Transaction, eventId: string, endpointIds: string[], orgId: string, now: Date): Promise<Delivery[]> {
  if (endpointIds.length === 0) return [];
  const rows = endpointIds.map((endpointId) => deliveryRow(eventId, endpointId, orgId, now));
  await trx('webhook_deliveries').insert(rows);
  return rows.map(toDelivery);
}

/** Fails the endpoint's queued deliveries (their leases released), with the caller's transaction. */
export async function dropPendingDeliveries(trx: Knex.Transaction, endpointId: string, reason: string, now: Date): Promise<void> {
  await trx<DeliveryRow>('webhook_deliveries').where({ endpoint_id: endpointId, status: 'pending' }).update({
    status: 'failed',
    last_error: reason,
    lease_until: null,
    lease_token: null,
    updated_at: now,
    completed_at: now,
  });
}

export interface WebhookDeliveryRepository {
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
  /**
   * The delivery log (console): an organization's deliveries newest first (created_at, id), after
   * the delivery `after` when given, without attempts; `limit + 1` rows read to tell `hasMore`.
   */
  listDeliveryLog(orgId: string, filter: DeliveryLogFilter, after: { createdAt: Date; id: string } | undefined, limit: number): Promise<{ records: DeliveryLogEntry[]; hasMore: boolean }>;
  /** One delivery with its attempts, its event (payload) and its endpoint, deleted or not. */
  findDeliveryDetail(id: string): Promise<DeliveryDetail | undefined>;
}

export interface DeliveryLogFilter {
  status?: DeliveryStatus;
  eventType?: string;
  endpointId?: string;
  eventId?: string;
  /** The order the event is about (`data.order.orderId`). */
  orderId?: string;
}

export interface DeliveryLogEntry extends Delivery {
  eventType: StoredEventType;
  /** The order the event is about, when it is about one. */
  orderId: string | null;
}

export interface DeliveryDetail extends DeliveryWithAttempts {
  orderId: string | null;
  event: StoredEvent;
  endpoint: { id: string; name: string; url: string; deleted: boolean };
}

/**
 * The worker's batch of finished attempts, one statement (see recordAttempts). Run directly and
 * prepared (runStatement): a fixed text whose only result column is named.
 */
const RECORD_ATTEMPTS_SQL = `WITH input AS (
         SELECT * FROM json_to_recordset($1::json) AS i(
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
          WHERE d.id = ANY($2::text[]) AND d.id = i.delivery_id AND d.lease_token = i.lease_token AND d.status = 'pending'
         RETURNING d.id),
       inserted AS (
         INSERT INTO webhook_attempts (delivery_id, attempt_number, url, status_code, duration_ms, response_body, error, attempted_at)
         SELECT delivery_id, attempt_number, url, status_code, duration_ms, response_body, error, attempted_at
           FROM input WHERE has_attempt ORDER BY n)
       SELECT id FROM updated`;

export class KnexWebhookDeliveryRepository implements WebhookDeliveryRepository {
  /** node-postgres takes several statements in one query (simple protocol); PGlite's query does not. */
  private readonly simpleProtocol: boolean;

  constructor(private readonly db: Db) {
    this.simpleProtocol = isPostgres(db);
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
            : { id: row.event_id, seq: Number(row.event_seq), orgId: row.org_id, type: row.event_type as StoredEventType, data: payloadOf(row.event_payload!), createdAt: new Date(row.event_created_at!) },
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
    // The id array lets the planner see how few rows it updates (primary-key lookups); joined
    // with the JSON rows alone it hashed the whole table.
    const rows = await runStatement<{ id: string }>(this.db, RECORD_ATTEMPTS_SQL, [JSON.stringify(input), records.map((r) => r.deliveryId)]);
    return new Set(rows.map((r) => r.id));
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

  async listDeliveryLog(orgId: string, filter: DeliveryLogFilter, after: { createdAt: Date; id: string } | undefined, limit: number) {
    const q = this.db('webhook_deliveries as d')
      .join('webhook_events as e', 'e.id', 'd.event_id')
      .where('d.org_id', orgId)
      .select('d.*', 'e.type as event_type', this.db.raw(`e.payload #>> '{order,orderId}' as order_id`));
    if (filter.status) q.andWhere('d.status', filter.status);
    if (filter.eventType) q.andWhere('e.type', filter.eventType);
    if (filter.endpointId) q.andWhere('d.endpoint_id', filter.endpointId);
    if (filter.eventId) q.andWhere('d.event_id', filter.eventId);
    // The expression of the index webhook_events_order (migration 0180), with the event's organization.
    if (filter.orderId) q.andWhere('e.org_id', orgId).andWhereRaw(`e.payload #>> '{order,orderId}' = ?`, [filter.orderId]);
    if (after) q.andWhereRaw('(d.created_at, d.id) < (?::timestamptz, ?)', [after.createdAt.toISOString(), after.id]);
    const rows = (await q
      .orderBy([{ column: 'd.created_at', order: 'desc' }, { column: 'd.id', order: 'desc' }])
      .limit(limit + 1)) as Array<DeliveryRow & { event_type: string; order_id: string | null }>;
    return {
      records: rows.slice(0, limit).map((row) => ({ ...toDelivery(row), eventType: row.event_type as StoredEventType, orderId: row.order_id ?? null })),
      hasMore: rows.length > limit,
    };
  }

  async findDeliveryDetail(id: string): Promise<DeliveryDetail | undefined> {
    const row = (await this.db('webhook_deliveries as d')
      .join('webhook_events as e', 'e.id', 'd.event_id')
      .join('webhook_endpoints as ep', 'ep.id', 'd.endpoint_id')
      .where('d.id', id)
      .first(
        'd.*',
        'e.type as event_type',
        'e.seq as event_seq',
        'e.payload as event_payload',
        'e.created_at as event_created_at',
        'ep.name as endpoint_name',
        'ep.url as endpoint_url',
        'ep.deleted_at as endpoint_deleted_at',
      )) as (DeliveryRow & { event_type: string; event_seq: number | string; event_payload: Record<string, unknown> | string; event_created_at: Date; endpoint_name: string; endpoint_url: string; endpoint_deleted_at: Date | null }) | undefined;
    if (!row) return undefined;
    const [withAttempts] = await this.attachAttempts([row]);
    const data = payloadOf(row.event_payload);
    const order = data.order as { orderId?: unknown } | undefined;
    return {
      ...withAttempts!,
      orderId: typeof order?.orderId === 'string' ? order.orderId : null,
      event: { id: row.event_id, seq: Number(row.event_seq), orgId: row.org_id, type: row.event_type as StoredEventType, data, createdAt: new Date(row.event_created_at) },
      endpoint: { id: row.endpoint_id, name: row.endpoint_name, url: row.endpoint_url, deleted: row.endpoint_deleted_at !== null },
    };
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
