import type { Knex } from 'knex';
import type { Order, OrderFilter, OrderStatus, Rail } from '../commerce/model.js';
import type { OrderRepository } from '../commerce/stores.js';
import { jsonRowSql, type JsonRow } from '../db/json-row.js';
import { runStatement } from '../db/knex.js';
import { estimatedCount, readListPage } from '../db/list-page.js';
import { EXACT_TOTAL_BOUND, type Keyset, type ListPage, type ListWindow } from '../kernel/list.js';




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

const toOrder = (r: OrderRow | JsonRow<OrderRow>): Order => ({
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
  createdAt: asDate(r.created_at),
  updatedAt: asDate(r.updated_at),
});

const toRow = (o: Order): OrderRow => ({
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
const FIND_ORDER_SQL = `SELECT ${jsonRowSql('o', ORDER_COLUMNS, new Set(['settled_available_on', 'created_at', 'updated_at']))} AS row FROM orders o WHERE o.org_id = $1 AND o.id = $2 LIMIT 1`;
/**
 * GET /v1/orders without filters (the dashboard's first page): prepared, over the index
 * (org_id, created_at, id); LIMIT is the page size + 1 (the extra row says more follow).
 */
export const LIST_ORDERS_SQL = `SELECT ${ORDER_COLUMNS_SQL} FROM orders WHERE org_id = $1 ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT $3`;
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


export class KnexOrderRepository implements OrderRepository {
  constructor(private readonly db: Knex) {}

  async insert(order: Order): Promise<void> {
    await this.db('orders').insert({ ...toRow(order), merchant_metadata: order.merchantMetadata ? JSON.stringify(order.merchantMetadata) : null });
  }

  async insertUnlessTxRecorded(order: Order): Promise<boolean> {
    // No conflict target: the partial unique index on (chain, tx_hash) is the one a fresh id can meet.
    const rows = await this.db('orders')
      .insert({ ...toRow(order), merchant_metadata: order.merchantMetadata ? JSON.stringify(order.merchantMetadata) : null })
      .onConflict()
      .ignore()
      .returning('id');
    return rows.length === 1;
  }

  async find(orgId: string, id: string): Promise<Order | undefined> {
    const [found] = await runStatement<{ row: JsonRow<OrderRow> }>(this.db, FIND_ORDER_SQL, [orgId, id]);
    return found ? toOrder(found.row) : undefined;
  }

  async findForUpdate(id: string): Promise<Order | undefined> {
    const row = await this.db<OrderRow>('orders').where({ id }).forUpdate().first();
    return row ? toOrder(row) : undefined;
  }

  async findBySession(checkoutSessionId: string): Promise<Order | undefined> {
    const row = await this.db<OrderRow>('orders').where({ checkout_session_id: checkoutSessionId }).first();
    return row ? toOrder(row) : undefined;
  }

  async findByProcessorPaymentId(processorPaymentId: string): Promise<Order | undefined> {
    const row = await this.db<OrderRow>('orders').where({ processor_payment_id: processorPaymentId }).orderBy('created_at').first();
    return row ? toOrder(row) : undefined;
  }

  async findByChainTx(chain: string, txHash: string): Promise<Order | undefined> {
    const row = await this.db<OrderRow>('orders').where({ chain, tx_hash: txHash }).first();
    return row ? toOrder(row) : undefined;
  }

  async findSubscriptionPeriod(subscriptionId: string, billingPeriod: number): Promise<Order | undefined> {
    const row = await this.db<OrderRow>('orders').where({ subscription_id: subscriptionId, billing_period: billingPeriod }).first();
    return row ? toOrder(row) : undefined;
  }

  async update(order: Order, expected: OrderStatus): Promise<boolean> {
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
    return (await q).map(toOrder);
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
      const fetched = await runStatement<OrderRow>(this.db, LIST_ORDERS_SQL, [orgId, window.offset, window.limit + 1]);
      const hasMore = fetched.length > window.limit;
      const records = (hasMore ? fetched.slice(0, window.limit) : fetched).map(toOrder);
      const sides = { hasMore, hasOlder: hasMore, hasNewer: window.offset > 0 && records.length > 0 };
      if (window.offset === 0 && !hasMore) return { records, total: records.length, totalExact: true, ...sides };
      const [{ n }] = (await runStatement<{ n: string }>(this.db, COUNT_ORDERS_SQL, [orgId, EXACT_TOTAL_BOUND + 1])) as [{ n: string }];
      if (Number(n) <= EXACT_TOTAL_BOUND) return { records, total: Number(n), totalExact: true, ...sides };
      const total = Math.max(EXACT_TOTAL_BOUND + 1, await estimatedCount(this.db, this.filtered(orgId, filter)));
      return { records, total, totalExact: false, ...sides };
    }
    const page = await readListPage<OrderRow & Record<string, unknown>>(this.db, { filtered: () => this.filtered(orgId, filter), createdAt: 'created_at', id: 'id', select: ORDER_COLUMNS_SQL }, window);
    return { ...page, records: page.records.map(toOrder) };
  }

}
