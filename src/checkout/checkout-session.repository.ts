import type { Knex } from 'knex';
import type { TaxContext } from '../commerce/tax.js';
import type { CheckoutSession, IdempotencyRecord, OrderStatus, PricingSnapshot, ProductSnapshot, ProviderFailure, Rail, SessionStatus } from '../commerce/model.js';
import type { CheckoutSessionRepository, DiscountIds, SessionOrder } from '../commerce/stores.js';
import { jsonRowSql, type JsonRow } from '../db/json-row.js';
import { runStatement } from '../db/knex.js';







interface SessionRow {
  id: string;
  org_id: string;
  status: SessionStatus;
  provider: Rail;
  amount: number | string;
  currency: string;
  quantity: number;
  pricing: PricingSnapshot;
  product: ProductSnapshot;
  price_id: string | null;
  customer_id: string | null;
  customer_email: string | null;
  customer_named: boolean;
  customer_external_id: string | null;
  merchant_reference: string | null;
  metadata: Record<string, string> | null;
  success_url: string | null;
  cancel_url: string | null;
  payment_link_id: string | null;
  page_token: string;
  last_error: ProviderFailure | null;
  processor_session_id: string | null;
  processor_url: string | null;
  processor_account_id: string | null;
  /** The buyer's tax location and the rates chosen for it (migration 0360). */
  tax: TaxContext | null;
  /** The location is asked on Kassa's page before Stripe's opens (migration 0399). */
  location_step: boolean;
  expires_at: Date;
  created_at: Date;
  updated_at: Date;
}

/**
 * The columns of SessionRow, listed: a prepared statement's result type must not change when a
 * migration adds one. The type checks below keep the list, SessionRow and sessionRow() in step.
 */
const SESSION_COLUMNS = [
  'id', 'org_id', 'status', 'provider', 'amount', 'currency', 'quantity', 'pricing', 'product', 'price_id', 'customer_id',
  'customer_email', 'customer_named', 'customer_external_id', 'merchant_reference', 'metadata', 'success_url', 'cancel_url', 'payment_link_id', 'page_token',
  'last_error', 'processor_session_id', 'processor_url', 'processor_account_id', 'tax', 'location_step', 'expires_at', 'created_at', 'updated_at',
] as const;
type SessionColumn = (typeof SESSION_COLUMNS)[number];
type Unlisted = Exclude<keyof SessionRow | keyof ReturnType<typeof sessionRow>, SessionColumn>;
type Unwritten = Exclude<SessionColumn, keyof SessionRow & keyof ReturnType<typeof sessionRow>>;
const everyColumnListed: [Unlisted] extends [never] ? true : Unlisted = true;
const everyListedColumnWritten: [Unwritten] extends [never] ? true : Unwritten = true;
void everyColumnListed;
void everyListedColumnWritten;
const SESSION_COLUMNS_SQL = SESSION_COLUMNS.join(', ');
const SESSION_TIMESTAMPS: ReadonlySet<SessionColumn> = new Set(['expires_at', 'created_at', 'updated_at']);
/** A session found by id, as one json column (src/db/json-row.ts): run directly and prepared (runStatement). */
const FIND_SESSION_SQL = `SELECT ${jsonRowSql('s', SESSION_COLUMNS, SESSION_TIMESTAMPS)} AS row FROM checkout_sessions s WHERE s.org_id = $1 AND s.id = $2 LIMIT 1`;
/**
 * GET /v1/checkout-sessions/{id}: the session and what it shows of its order (orders has one row
 * at most per session, unique checkout_session_id) in one prepared statement, not two round trips.
 */
const FIND_SESSION_WITH_ORDER_SQL = `SELECT ${jsonRowSql('s', SESSION_COLUMNS, SESSION_TIMESTAMPS, { order_id: 'o.id', order_status: 'o.status' })} AS row
    FROM checkout_sessions s LEFT JOIN orders o ON o.checkout_session_id = s.id
   WHERE s.org_id = $1 AND s.id = $2 LIMIT 1`;

/** Timestamps are Dates as knex reads a row, epoch milliseconds in a json row. */
const toSession = (r: SessionRow | JsonRow<SessionRow>): CheckoutSession => ({
  id: r.id,
  orgId: r.org_id,
  status: r.status,
  provider: r.provider,
  amount: Number(r.amount),
  currency: r.currency,
  quantity: r.quantity,
  pricing: r.pricing,
  product: r.product,
  customerId: r.customer_id,
  customerEmail: r.customer_email,
  customerNamed: r.customer_named,
  customerExternalId: r.customer_external_id,
  merchantReference: r.merchant_reference,
  metadata: r.metadata,
  successUrl: r.success_url,
  cancelUrl: r.cancel_url,
  paymentLinkId: r.payment_link_id,
  pageToken: r.page_token,
  lastError: r.last_error,
  processorSessionId: r.processor_session_id,
  processorUrl: r.processor_url,
  processorAccountId: r.processor_account_id,
  tax: r.tax ?? null,
  locationStep: r.location_step === true,
  expiresAt: new Date(r.expires_at),
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

const json = (value: unknown) => (value === null || value === undefined ? null : JSON.stringify(value));

/** The columns of a session row as knex inserts them (jsonb values as JSON text). */
function sessionRow(s: CheckoutSession) {
  return {
    id: s.id,
    org_id: s.orgId,
    status: s.status,
    provider: s.provider,
    amount: s.amount,
    currency: s.currency,
    quantity: s.quantity,
    pricing: json(s.pricing),
    product: json(s.product),
    price_id: s.pricing.pricingId,
    customer_id: s.customerId,
    customer_email: s.customerEmail,
    customer_named: s.customerNamed,
    customer_external_id: s.customerExternalId ?? null,
    merchant_reference: s.merchantReference,
    metadata: json(s.metadata),
    success_url: s.successUrl,
    cancel_url: s.cancelUrl,
    payment_link_id: s.paymentLinkId,
    page_token: s.pageToken,
    last_error: json(s.lastError),
    processor_session_id: s.processorSessionId,
    processor_url: s.processorUrl,
    processor_account_id: s.processorAccountId,
    tax: json(s.tax),
    location_step: s.locationStep ?? false,
    expires_at: s.expiresAt,
    created_at: s.createdAt,
    updated_at: s.updatedAt,
  };
}


/**
 * Claims (org_id, key): a new key is inserted; a key whose record predates the 6th parameter
 * (the TTL) is taken over by the new session; a live key is left alone and nothing is returned.
 * The old session of a taken-over key stays (it is only no longer reachable by the key).
 */
const CLAIM_IDEMPOTENCY_KEY_SQL = `INSERT INTO idempotency_keys (org_id, key, request_hash, checkout_session_id, created_at)
       VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (org_id, key) DO UPDATE
         SET request_hash = EXCLUDED.request_hash, checkout_session_id = EXCLUDED.checkout_session_id, created_at = EXCLUDED.created_at
         WHERE idempotency_keys.created_at < ?
       RETURNING key`;

/**
 * Checkout creation in one statement: claims the key (as above) and inserts the session only when
 * the claim succeeded. Run directly and prepared (runStatement); the session's columns are those
 * of sessionRow, fixed.
 */
const CREATE_WITH_IDEMPOTENCY_KEY_SQL = `WITH claimed AS (
    ${CLAIM_IDEMPOTENCY_KEY_SQL.replace(/\?/g, (() => { let n = 0; return () => `$${++n}`; })())})
  INSERT INTO checkout_sessions (${SESSION_COLUMNS_SQL})
  SELECT ${SESSION_COLUMNS.map((c) => `r.${c}`).join(', ')}
    FROM claimed, json_populate_record(NULL::checkout_sessions, $7::json) AS r
  RETURNING id`;

export class KnexCheckoutSessionRepository implements CheckoutSessionRepository {
  constructor(private readonly db: Knex) {}

  async insert(s: CheckoutSession): Promise<void> {
    await this.db('checkout_sessions').insert(sessionRow(s));
  }

  async insertWithIdempotencyRecord(r: IdempotencyRecord, s: CheckoutSession, expiredBefore: Date): Promise<boolean> {
    // The session row travels as one JSON document typed by the table's own row type, so every
    // column gets its type without a cast per parameter; jsonb columns take the nested values.
    const row = sessionRow(s);
    const document = { ...row, pricing: s.pricing, product: s.product, metadata: s.metadata, last_error: s.lastError, tax: s.tax ?? null };
    const rows = await runStatement(this.db, CREATE_WITH_IDEMPOTENCY_KEY_SQL, [
      r.orgId,
      r.key,
      r.requestHash,
      r.checkoutSessionId,
      r.createdAt.toISOString(),
      expiredBefore.toISOString(),
      JSON.stringify(document),
    ]);
    return rows.length === 1;
  }

  async find(orgId: string, id: string): Promise<CheckoutSession | undefined> {
    const [found] = await runStatement<{ row: JsonRow<SessionRow> }>(this.db, FIND_SESSION_SQL, [orgId, id]);
    return found ? toSession(found.row) : undefined;
  }

  async findWithOrder(orgId: string, id: string): Promise<{ session: CheckoutSession; order: SessionOrder | null } | undefined> {
    const [found] = await runStatement<{ row: JsonRow<SessionRow> & { order_id: string | null; order_status: OrderStatus | null } }>(this.db, FIND_SESSION_WITH_ORDER_SQL, [orgId, id]);
    if (!found) return undefined;
    const { row } = found;
    return { session: toSession(row), order: row.order_id === null ? null : { id: row.order_id, status: row.order_status! } };
  }

  async findForUpdate(id: string): Promise<CheckoutSession | undefined> {
    const row = await this.db<SessionRow>('checkout_sessions').where({ id }).forUpdate().first();
    return row ? toSession(row) : undefined;
  }

  async findByPageToken(token: string): Promise<CheckoutSession | undefined> {
    const row = await this.db<SessionRow>('checkout_sessions').where({ page_token: token }).first();
    return row ? toSession(row) : undefined;
  }

  async update(s: CheckoutSession, expected: SessionStatus): Promise<boolean> {
    const written = await this.db('checkout_sessions').where({ id: s.id, status: expected }).update({
      status: s.status,
      customer_id: s.customerId,
      customer_email: s.customerEmail,
      last_error: json(s.lastError),
      updated_at: s.updatedAt,
    });
    return written === 1;
  }

  async setTax(id: string, tax: TaxContext, amount: number, expectedAmount: number, at: Date): Promise<boolean> {
    // Only while payable, and only over the amount the caller read: a stale page never writes back.
    // Nor after the payment started (promotion codes, issue 39): the amount being charged is fixed.
    const written = await this.db('checkout_sessions').where({ id, status: 'CREATED', amount: expectedAmount })
      .whereRaw("(pricing->>'paymentStarted') IS NULL")
      .update({ tax: json(tax), amount, updated_at: at });
    return written === 1;
  }

  async markProcessorClosing(id: string, processorSessionId: string, at: Date): Promise<boolean> {
    const written = await this.db('checkout_sessions').where({ id, status: 'CREATED', processor_session_id: processorSessionId, location_step: true })
      .update({ processor_url: null, updated_at: at });
    return written === 1;
  }

  async handOffWithLocation(id: string, previous: string | null, next: { tax: TaxContext; amount: number; processorSessionId: string; processorUrl: string; expiresAt: Date }, at: Date, discount?: DiscountIds | null): Promise<boolean> {
    // Over the processor session the caller read (none, or the one it closed): of two concurrent
    // steps, one writes; the other finds a session it did not open and closes its own.
    const query = this.db('checkout_sessions').where({ id, status: 'CREATED', location_step: true });
    if (previous === null) query.whereNull('processor_session_id');
    else query.where({ processor_session_id: previous });
    // And over the discount the caller opened the processor session with (a code changed on the step meanwhile: nothing written).
    if (discount !== undefined) {
      query.whereRaw("(pricing->'discount'->>'couponId') IS NOT DISTINCT FROM ?", [discount?.couponId ?? null]);
      query.whereRaw("(pricing->'discount'->>'promotionCodeId') IS NOT DISTINCT FROM ?", [discount?.promotionCodeId ?? null]);
    }
    const written = await query.update({
      tax: json(next.tax),
      amount: next.amount,
      processor_session_id: next.processorSessionId,
      processor_url: next.processorUrl,
      // Never earlier: Stripe's session lasts at least 30 minutes from its creation (stripeExpiresAt).
      expires_at: this.db.raw('GREATEST(expires_at, ?)', [next.expiresAt]),
      updated_at: at,
    });
    return written === 1;
  }

  async setStepDiscount(id: string, pricing: PricingSnapshot, amount: number, expectedAmount: number, processorSessionId: string | null, at: Date): Promise<boolean> {
    const query = this.db('checkout_sessions').where({ id, status: 'CREATED', amount: expectedAmount, location_step: true }).whereNull('processor_url')
      .whereRaw("(pricing->>'paymentStarted') IS NULL");
    if (processorSessionId === null) query.whereNull('processor_session_id');
    else query.where({ processor_session_id: processorSessionId });
    return (await query.update({ pricing: json(pricing), amount, updated_at: at })) === 1;
  }

  async setProcessorTax(id: string, tax: TaxContext, amount: number, at: Date): Promise<boolean> {
    // Once: a session that has a tax (given at creation, or already recorded) keeps it.
    const written = await this.db('checkout_sessions').where({ id }).whereNull('tax').update({ tax: json(tax), amount, updated_at: at });
    return written === 1;
  }

  async recordAttemptFailure(id: string, failure: ProviderFailure, at: Date): Promise<boolean> {
    const written = await this.db('checkout_sessions').where({ id, status: 'CREATED' }).update({ last_error: json(failure), updated_at: at });
    return written === 1;
  }

  async setDiscount(id: string, pricing: PricingSnapshot, amount: number, expectedAmount: number, now: Date): Promise<boolean> {
    const written = await this.db('checkout_sessions').where({ id, status: 'CREATED', amount: expectedAmount })
      .whereRaw("(pricing->>'paymentStarted') IS NULL")
      .update({ pricing: json(pricing), amount, updated_at: now });
    return written === 1;
  }

  async bringExpiryForward(id: string, expiresAt: Date, now: Date): Promise<boolean> {
    const changed = await this.db('checkout_sessions')
      .where({ id, status: 'CREATED' })
      .update({ expires_at: this.db.raw('LEAST(expires_at, ?)', [expiresAt]), updated_at: now });
    return changed === 1;
  }

  async expireDue(now: Date, limit: number): Promise<Array<{ id: string; drawOrderId: string | null }>> {
    const result = await this.db.raw(
      `UPDATE checkout_sessions SET status = 'EXPIRED', updated_at = ?
       WHERE id IN (SELECT id FROM checkout_sessions WHERE status = 'CREATED' AND expires_at <= ? ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED)
       RETURNING id, pricing->'balance'->>'orderId' AS draw_order_id`,
      [now, now, limit],
    );
    return (result.rows as { id: string; draw_order_id: string | null }[]).map((r) => ({ id: r.id, drawOrderId: r.draw_order_id ?? null }));
  }

  async findIdempotencyRecord(orgId: string, key: string): Promise<IdempotencyRecord | undefined> {
    const row = await this.db('idempotency_keys').where({ org_id: orgId, key }).first();
    return row
      ? { orgId: row.org_id, key: row.key, requestHash: row.request_hash, checkoutSessionId: row.checkout_session_id, createdAt: new Date(row.created_at) }
      : undefined;
  }

  async insertIdempotencyRecord(r: IdempotencyRecord, expiredBefore: Date): Promise<boolean> {
    const result = await this.db.raw(CLAIM_IDEMPOTENCY_KEY_SQL, [r.orgId, r.key, r.requestHash, r.checkoutSessionId, r.createdAt, expiredBefore]);
    return (result.rows as unknown[]).length === 1;
  }
}
