import type { Knex } from 'knex';
import type { Order, OrderFilter, OrderLine, OrderStatus, Rail } from '../commerce/model.js';
import type { OrderRepository } from '../commerce/stores.js';
import { jsonRowSql, type JsonRow } from '../db/json-row.js';
import { runStatement } from '../db/knex.js';
import { estimatedCount, readListPage } from '../db/list-page.js';
import { DATE_RANGE_EXACT_TOTAL_BOUND, EXACT_TOTAL_BOUND, type Keyset, type ListPage, type ListWindow } from '../kernel/list.js';




/** An order_lines row (migration 0240); numerics read as text, exact. */
interface LineRow {
  order_id: string;
  position: number;
  org_id: string;
  kind: OrderLine['kind'];
  description: string;
  product_id: string | null;
  price_id: string | null;
  meter_id: string | null;
  quantity: string | null;
  included_units: number | string | null;
  credited_units: number | string | null;
  billable_quantity: string | null;
  unit_amount: string | null;
  pricing: OrderLine['pricing'];
  tiers: OrderLine['tiers'];
  exact_amount: string;
  amount_cents: number | string;
  /** TAX lines (migration 0360): the rate and the tax. */
  tax?: OrderLine['tax'] | null;
}

const LINE_SELECT =
  'order_id, position, kind, description, product_id, price_id, meter_id, quantity::text AS quantity, included_units, credited_units, ' +
  'billable_quantity::text AS billable_quantity, unit_amount::text AS unit_amount, pricing, tiers, exact_amount::text AS exact_amount, amount_cents, tax';

const numberOrNull = (v: number | string | null): number | null => (v === null ? null : Number(v));

const toLine = (r: Omit<LineRow, 'org_id'>): OrderLine => ({
  kind: r.kind,
  description: r.description,
  productId: r.product_id,
  priceId: r.price_id,
  meterId: r.meter_id,
  quantity: r.quantity,
  includedUnits: numberOrNull(r.included_units),
  creditedUnits: numberOrNull(r.credited_units),
  billableQuantity: r.billable_quantity,
  unitAmount: r.unit_amount,
  pricing: r.pricing,
  tiers: r.tiers,
  exactAmount: r.exact_amount,
  amount: Number(r.amount_cents),
  ...(r.tax ? { tax: r.tax } : {}),
});

const toLineRow = (o: Order, l: OrderLine, position: number): LineRow => ({
  order_id: o.id,
  position,
  org_id: o.orgId,
  kind: l.kind,
  description: l.description,
  product_id: l.productId,
  price_id: l.priceId,
  meter_id: l.meterId,
  quantity: l.quantity,
  included_units: l.includedUnits,
  credited_units: l.creditedUnits,
  billable_quantity: l.billableQuantity,
  unit_amount: l.unitAmount,
  pricing: l.pricing === null ? null : (JSON.stringify(l.pricing) as unknown as OrderLine['pricing']),
  tiers: l.tiers === null ? null : (JSON.stringify(l.tiers) as unknown as OrderLine['tiers']),
  exact_amount: l.exactAmount,
  amount_cents: l.amount,
  tax: l.tax ? (JSON.stringify(l.tax) as unknown as OrderLine['tax']) : null,
});

/**
 * The line of an order that has none stored: one written by a release before order lines (during a
 * rolling deploy, after migration 0240's backfill) reads as the line the backfill would have made.
 */
export const derivedLine = (o: Pick<Order, 'productId' | 'productName' | 'amountCents'>): OrderLine => ({
  kind: 'PRICE',
  description: o.productName ?? 'Payment',
  productId: o.productId,
  priceId: null,
  meterId: null,
  quantity: '1',
  includedUnits: null,
  creditedUnits: null,
  billableQuantity: null,
  unitAmount: String(o.amountCents),
  pricing: null,
  tiers: null,
  exactAmount: String(o.amountCents),
  amount: o.amountCents,
});

/** The order's lines in the json row of FIND_ORDER_SQL (same names as LINE_SELECT's). */
const LINES_JSON_SQL = `(SELECT json_agg(json_build_object('order_id', l.order_id, 'position', l.position, 'kind', l.kind, 'description', l.description,
  'product_id', l.product_id, 'price_id', l.price_id, 'meter_id', l.meter_id, 'quantity', l.quantity::text, 'included_units', l.included_units,
  'credited_units', l.credited_units, 'billable_quantity', l.billable_quantity::text, 'unit_amount', l.unit_amount::text, 'pricing', l.pricing,
  'tiers', l.tiers, 'exact_amount', l.exact_amount::text, 'amount_cents', l.amount_cents, 'tax', l.tax) ORDER BY l.position) FROM order_lines l WHERE l.order_id = o.id)`;

interface OrderRow {
  id: string;
  org_id: string;
  status: OrderStatus;
  provider: Rail;
  amount_cents: number | string;
  amount_refunded_cents: number | string;
  currency: string;
  customer_id: string;
  customer_email: string;
  product_id: string | null;
  product_name: string | null;
  payment_link_id: string | null;
  checkout_session_id: string | null;
  subscription_id: string | null;
  original_order_id: string | null;
  merchant_reference: string | null;
  merchant_metadata: Record<string, string> | null;
  note: string | null;
  disputed: boolean;
  settled_available_on: Date | null;
  chain: string | null;
  from_address: string | null;
  tx_hash: string | null;
  amount_received_cents: number | string | null;
  processor_payment_id: string | null;
  processor_status: string | null;
  payment_method: string | null;
  billing_period: number | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * Timestamps are Dates as pg and PGlite read a column (used as they are, not copied: a page of
 * orders holds 60), epoch milliseconds in a json row (src/db/json-row.ts).
 */
const asDate = (value: Date | number): Date => (typeof value === 'number' ? new Date(value) : value);

const toOrder = (r: OrderRow | JsonRow<OrderRow>, lines: OrderLine[] = []): Order => ({
  id: r.id,
  orgId: r.org_id,
  status: r.status,
  provider: r.provider,
  amountCents: Number(r.amount_cents),
  amountRefundedCents: Number(r.amount_refunded_cents),
  currency: r.currency,
  customerId: r.customer_id,
  customerEmail: r.customer_email,
  productId: r.product_id,
  productName: r.product_name,
  paymentLinkId: r.payment_link_id,
  checkoutSessionId: r.checkout_session_id,
  subscriptionId: r.subscription_id,
  originalOrderId: r.original_order_id,
  merchantReference: r.merchant_reference,
  merchantMetadata: r.merchant_metadata,
  note: r.note,
  disputed: r.disputed,
  settledAvailableOn: r.settled_available_on === null ? null : asDate(r.settled_available_on),
  chain: r.chain,
  fromAddress: r.from_address,
  txHash: r.tx_hash,
  amountReceivedCents: r.amount_received_cents === null ? null : Number(r.amount_received_cents),
  processorPaymentId: r.processor_payment_id,
  processorStatus: r.processor_status,
  paymentMethod: r.payment_method,
  billingPeriod: r.billing_period,
  lines,
  createdAt: asDate(r.created_at),
  updatedAt: asDate(r.updated_at),
});

const toRow = (o: Omit<Order, 'lines'>): OrderRow => ({
  id: o.id,
  org_id: o.orgId,
  status: o.status,
  provider: o.provider,
  amount_cents: o.amountCents,
  amount_refunded_cents: o.amountRefundedCents,
  currency: o.currency,
  customer_id: o.customerId,
  customer_email: o.customerEmail,
  product_id: o.productId,
  product_name: o.productName,
  payment_link_id: o.paymentLinkId,
  checkout_session_id: o.checkoutSessionId,
  subscription_id: o.subscriptionId,
  original_order_id: o.originalOrderId,
  merchant_reference: o.merchantReference,
  merchant_metadata: o.merchantMetadata,
  note: o.note,
  disputed: o.disputed,
  settled_available_on: o.settledAvailableOn,
  chain: o.chain,
  from_address: o.fromAddress,
  tx_hash: o.txHash,
  amount_received_cents: o.amountReceivedCents ?? null,
  processor_payment_id: o.processorPaymentId,
  processor_status: o.processorStatus,
  payment_method: o.paymentMethod,
  billing_period: o.billingPeriod,
  created_at: o.createdAt,
  updated_at: o.updatedAt,
});

/** The columns of OrderRow, listed: a prepared statement's result type must not change when a migration adds one. */
const ORDER_COLUMNS = [
  'id', 'org_id', 'status', 'provider', 'amount_cents', 'amount_refunded_cents', 'currency', 'customer_id', 'customer_email',
  'product_id', 'product_name', 'payment_link_id', 'checkout_session_id', 'subscription_id', 'original_order_id',
  'merchant_reference', 'merchant_metadata', 'note', 'disputed', 'settled_available_on', 'chain', 'from_address', 'tx_hash',
  'amount_received_cents', 'processor_payment_id', 'processor_status', 'payment_method', 'billing_period', 'created_at', 'updated_at',
] as const;
type Unlisted = Exclude<keyof OrderRow, (typeof ORDER_COLUMNS)[number]>;
const everyColumnListed: [Unlisted] extends [never] ? true : Unlisted = true;
void everyColumnListed;
const ORDER_COLUMNS_SQL = ORDER_COLUMNS.join(', ');
/** GET /v1/orders/{id}: as one json column (src/db/json-row.ts), run directly and prepared (runStatement). */
const FIND_ORDER_SQL = `SELECT ${jsonRowSql('o', ORDER_COLUMNS, new Set(['settled_available_on', 'created_at', 'updated_at']))} AS row, ${LINES_JSON_SQL} AS lines FROM orders o WHERE o.org_id = $1 AND o.id = $2 LIMIT 1`;
/**
 * GET /v1/orders without filters (the dashboard's first page): prepared, over the index
 * (org_id, created_at, id); LIMIT is the page size + 1 (the extra row says more follow).
 */
export const LIST_ORDERS_SQL = `SELECT ${ORDER_COLUMNS_SQL} FROM orders WHERE org_id = $1 ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT $3`;
/** A page past the first: the offset skipped over the index alone, then only the page's rows read (list-page.ts). */
export const LIST_ORDERS_DEEP_SQL = `SELECT ${ORDER_COLUMNS_SQL} FROM orders WHERE org_id = $1 AND id IN (SELECT id FROM orders WHERE org_id = $1 ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT $3) ORDER BY created_at DESC, id DESC`;
/**
 * Its total, counted up to a bound (src/db/list-page.ts): an index-only scan that stops there. The
 * ORDER BY (the index's) keeps it one: without it the planner took a LIMITed sequential scan of
 * the table whenever the organization held most of it, which reads as many rows as it must pass
 * before finding the bound's worth of this organization's (all of them, were they stored last).
 */
export const COUNT_ORDERS_SQL = 'SELECT count(*) AS n FROM (SELECT 1 FROM orders WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2) capped';
const FIND_KEYSET_SQL = 'SELECT created_at, id FROM orders WHERE org_id = $1 AND id = $2';

const noFilter = (f: OrderFilter): boolean => Object.values(f).every((v) => v === undefined);

/** `%` and `_` in a user's search text match themselves. */
export const escapeLike = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`);


/**
 * The tax and discount an order's lines hold (migration 0372: the commerce metrics' figures). The
 * order_lines trigger sets them from the stored lines by the same rule; written here with the row,
 * so the trigger finds them equal and writes nothing more.
 */
export const lineFigures = (lines: readonly OrderLine[]) => ({
  tax_cents: lines.reduce((s, l) => (l.kind === 'TAX' ? s + (l.tax ? l.tax.taxAmount : l.amount) : s), 0),
  discount_cents: lines.reduce((s, l) => (l.kind === 'DISCOUNT' ? s - l.amount : s), 0),
});

const orderInsertRow = (order: Order) => ({ ...toRow(order), ...lineFigures(order.lines), merchant_metadata: order.merchantMetadata ? JSON.stringify(order.merchantMetadata) : null });

async function insertLines(db: Knex, order: Order): Promise<void> {
  if (order.lines.length === 0) throw new Error(`order ${order.id} has no lines`);
  const sum = order.lines.reduce((s, l) => s + l.amount, 0);
  // commerce/pricing.ts makes the total from the lines; an order whose total is not theirs is a bug, not data.
  if (sum !== order.amountCents) throw new Error(`order ${order.id}: lines sum to ${sum}, amountCents is ${order.amountCents}`);
  await db('order_lines').insert(order.lines.map((l, i) => toLineRow(order, l, i)));
}

export class KnexOrderRepository implements OrderRepository {
  constructor(private readonly db: Knex) {}

  /** The order and its lines, in one transaction (the caller's, or one of its own). */
  async insert(order: Order): Promise<void> {
    await this.inTransaction(async (db) => {
      await db('orders').insert(orderInsertRow(order));
      await insertLines(db, order);
    });
  }

  async insertUnlessTxRecorded(order: Order): Promise<boolean> {
    return this.inTransaction(async (db) => {
      // No conflict target: the partial unique index on (chain, tx_hash) is the one a fresh id can meet.
      const rows = await db('orders').insert(orderInsertRow(order)).onConflict().ignore().returning('id');
      if (rows.length !== 1) return false;
      await insertLines(db, order);
      return true;
    });
  }

  private inTransaction<T>(work: (db: Knex) => Promise<T>): Promise<T> {
    return this.db.isTransaction ? work(this.db) : this.db.transaction(work);
  }

  /** Attaches each order's stored lines (one query), or its derived line when it has none. */
  private async withLines(orders: Order[]): Promise<Order[]> {
    if (orders.length === 0) return orders;
    const rows = await this.db.raw<{ rows: LineRow[] }>(`SELECT ${LINE_SELECT} FROM order_lines WHERE order_id = ANY(?) ORDER BY order_id, position`, [orders.map((o) => o.id)]);
    const byOrder = new Map<string, OrderLine[]>();
    for (const r of rows.rows) {
      const list = byOrder.get(r.order_id) ?? [];
      list.push(toLine(r));
      byOrder.set(r.order_id, list);
    }
    for (const o of orders) o.lines = byOrder.get(o.id) ?? [derivedLine(o)];
    return orders;
  }

  private async one(row: OrderRow | undefined): Promise<Order | undefined> {
    return row ? (await this.withLines([toOrder(row)]))[0] : undefined;
  }

  async find(orgId: string, id: string): Promise<Order | undefined> {
    const [found] = await runStatement<{ row: JsonRow<OrderRow>; lines: Omit<LineRow, 'org_id'>[] | null }>(this.db, FIND_ORDER_SQL, [orgId, id]);
    if (!found) return undefined;
    const order = toOrder(found.row);
    order.lines = found.lines ? found.lines.map(toLine) : [derivedLine(order)];
    return order;
  }

  async findForUpdate(id: string): Promise<Order | undefined> {
    const row = await this.db<OrderRow>('orders').where({ id }).forUpdate().first();
    return this.one(row);
  }

  async findBySession(checkoutSessionId: string): Promise<Order | undefined> {
    const row = await this.db<OrderRow>('orders').where({ checkout_session_id: checkoutSessionId }).first();
    return this.one(row);
  }

  async findByProcessorPaymentId(processorPaymentId: string): Promise<Order | undefined> {
    const row = await this.db<OrderRow>('orders').where({ processor_payment_id: processorPaymentId }).orderBy('created_at').first();
    return this.one(row);
  }

  async findByChainTx(chain: string, txHash: string): Promise<Order | undefined> {
    const row = await this.db<OrderRow>('orders').where({ chain, tx_hash: txHash }).first();
    return this.one(row);
  }

  async findSubscriptionPeriod(subscriptionId: string, billingPeriod: number): Promise<Order | undefined> {
    const row = await this.db<OrderRow>('orders').where({ subscription_id: subscriptionId, billing_period: billingPeriod }).first();
    return this.one(row);
  }

  async update(order: Order, expected: OrderStatus): Promise<boolean> {
    // Lines are written with the order and never change: only the order's row is updated.
    const { id, org_id, created_at, ...changes } = toRow(order);
    const written = await this.db('orders')
      .where({ id, org_id, status: expected })
      .update({ ...changes, merchant_metadata: order.merchantMetadata ? JSON.stringify(order.merchantMetadata) : null });
    return written === 1;
  }

  async listAccessGranting(orgId: string, subject: { customerIds?: string[]; fromAddress?: string }): Promise<Order[]> {
    const q = this.db<OrderRow>('orders')
      .where({ org_id: orgId, status: 'PAID', amount_refunded_cents: 0 })
      .whereNull('subscription_id')
      .whereNotNull('product_id');
    if (subject.customerIds) q.whereIn('customer_id', subject.customerIds);
    if (subject.fromAddress) q.andWhereRaw('lower(from_address) = lower(?)', [subject.fromAddress]);
    return this.withLines((await q).map((r) => toOrder(r)));
  }

  private filtered(orgId: string, f: OrderFilter) {
    const q = this.db<OrderRow>('orders').where({ org_id: orgId });
    if (f.status) q.andWhere('status', f.status);
    if (f.customerId) q.andWhere('customer_id', f.customerId);
    if (f.subscriptionId) q.andWhere('subscription_id', f.subscriptionId);
    if (f.productId) q.andWhere('product_id', f.productId);
    if (f.provider) q.andWhere('provider', f.provider);
    if (f.fromAddress) q.andWhereRaw('lower(from_address) = lower(?)', [f.fromAddress]);
    // The expression of the index of migration 0200 (org_id, lower(tx_hash), created_at, id).
    if (f.txHash) q.andWhereRaw('lower(tx_hash) = lower(?)', [f.txHash]);
    if (f.merchantReference) q.andWhereRaw("merchant_reference ILIKE ? ESCAPE '\\'", [`%${escapeLike(f.merchantReference)}%`]);
    if (f.createdFrom) q.andWhere('created_at', '>=', f.createdFrom);
    if (f.createdBefore) q.andWhere('created_at', '<', f.createdBefore);
    return q;
  }

  async keyset(orgId: string, id: string): Promise<Keyset | undefined> {
    const [row] = await runStatement<{ created_at: Date; id: string }>(this.db, FIND_KEYSET_SQL, [orgId, id]);
    return row ? { createdAt: row.created_at, id: row.id } : undefined;
  }

  async list(orgId: string, filter: OrderFilter, window: ListWindow): Promise<ListPage<Order>> {
    if (noFilter(filter) && !window.startingAfter && !window.endingBefore) {
      const fetched = await runStatement<OrderRow>(this.db, window.offset === 0 ? LIST_ORDERS_SQL : LIST_ORDERS_DEEP_SQL, [orgId, window.offset, window.limit + 1]);
      const hasMore = fetched.length > window.limit;
      const records = await this.withLines((hasMore ? fetched.slice(0, window.limit) : fetched).map((r) => toOrder(r)));
      const sides = { hasMore, hasOlder: hasMore, hasNewer: window.offset > 0 && records.length > 0 };
      if (window.offset === 0 && !hasMore) return { records, total: records.length, totalExact: true, ...sides };
      const [{ n }] = (await runStatement<{ n: string }>(this.db, COUNT_ORDERS_SQL, [orgId, EXACT_TOTAL_BOUND + 1])) as [{ n: string }];
      if (Number(n) <= EXACT_TOTAL_BOUND) return { records, total: Number(n), totalExact: true, ...sides };
      const total = Math.max(EXACT_TOTAL_BOUND + 1, await estimatedCount(this.db, this.filtered(orgId, filter)));
      return { records, total, totalExact: false, ...sides };
    }
    // A date range counts exactly further (its estimate is weakest at the newest end): an
    // index-only range scan, except with the contains-match of merchant_reference (a GIN index).
    const exactBound = (filter.createdFrom || filter.createdBefore) && !filter.merchantReference ? DATE_RANGE_EXACT_TOTAL_BOUND : EXACT_TOTAL_BOUND;
    const page = await readListPage<OrderRow & Record<string, unknown>>(this.db, { filtered: () => this.filtered(orgId, filter), createdAt: 'created_at', id: 'id', select: ORDER_COLUMNS_SQL, exactBound }, window);
    return { ...page, records: await this.withLines(page.records.map((r) => toOrder(r))) };
  }

}
