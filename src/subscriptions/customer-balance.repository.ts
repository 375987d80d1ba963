/**
 * The customer credit balance in the database (migration 0445, docs/plan-changes.md "Credit
 * balance"): `customer_balances` (the amount per customer and currency) and
 * `customer_balance_entries` (the ledger, at most one entry per order and kind). Each change locks
 * the balance row (`FOR UPDATE`) before reading it and moves it in the same transaction, so a
 * downgrade adding to it and a renewal drawing from it never lose each other's update.
 */
import type { Knex } from 'knex';
import { newId } from '../kernel/ids.js';
import type { CustomerBalanceEntry, CustomerBalanceLedger } from '../commerce/stores.js';

interface EntryRow {
  id: string;
  org_id: string;
  customer_id: string;
  currency: string;
  kind: CustomerBalanceEntry['kind'];
  amount_cents: number | string;
  ending_balance_cents: number | string;
  description: string | null;
  order_id: string | null;
  subscription_id: string | null;
  created_at: Date | string;
  idempotency_key: string | null;
  request_hash: string | null;
}

const toEntry = (r: EntryRow): CustomerBalanceEntry => ({
  id: r.id,
  orgId: r.org_id,
  customerId: r.customer_id,
  currency: r.currency,
  kind: r.kind,
  amountCents: Number(r.amount_cents),
  endingBalanceCents: Number(r.ending_balance_cents),
  description: r.description,
  orderId: r.order_id,
  subscriptionId: r.subscription_id,
  createdAt: new Date(r.created_at),
  idempotencyKey: r.idempotency_key,
  requestHash: r.request_hash,
});

type Key = { orgId: string; customerId: string; currency: string };

export class KnexCustomerBalanceLedger implements CustomerBalanceLedger {
  constructor(private readonly db: Knex | Knex.Transaction) {}

  private where(k: Key) {
    return { org_id: k.orgId, customer_id: k.customerId, currency: k.currency.toUpperCase() };
  }

  /** The balance row locked for the rest of the transaction (undefined: none yet). */
  private async lock(k: Key): Promise<number | undefined> {
    const row = (await this.db('customer_balances').where(this.where(k)).forUpdate().first('amount_cents')) as { amount_cents: number | string } | undefined;
    return row === undefined ? undefined : Number(row.amount_cents);
  }

  /** The balance row created at 0 when missing, then locked: the first change of a currency serializes too. */
  private async lockOrCreate(k: Key, at: Date): Promise<number> {
    await this.db('customer_balances').insert({ ...this.where(k), amount_cents: 0, updated_at: at }).onConflict(['org_id', 'customer_id', 'currency']).ignore();
    return (await this.lock(k))!;
  }

  private async entry(k: Key, kind: 'CARRIED' | 'APPLIED' | 'RESTORED', amount: number, endingBalance: number, orderId: string, subscriptionId: string | null, at: Date): Promise<boolean> {
    const inserted = await this.db('customer_balance_entries')
      .insert({ id: newId('CBE'), ...this.where(k), kind, amount_cents: amount, ending_balance_cents: endingBalance, order_id: orderId, subscription_id: subscriptionId, created_at: at })
      .onConflict(['order_id', 'kind'])
      .ignore()
      .returning('id');
    return inserted.length > 0;
  }

  async carry(e: Key & { amount: number; orderId: string; subscriptionId: string; at: Date }): Promise<number> {
    if (!Number.isSafeInteger(e.amount) || e.amount <= 0) throw new Error('A carried credit is a positive integer of minor units');
    const before = await this.lockOrCreate(e, e.at);
    if (!(await this.entry(e, 'CARRIED', e.amount, before + e.amount, e.orderId, e.subscriptionId, e.at))) return before;
    await this.db('customer_balances').where(this.where(e)).update({ amount_cents: before + e.amount, updated_at: e.at });
    return before + e.amount;
  }

  async apply(e: Key & { wanted: number; orderId: string; subscriptionId: string | null; at: Date }): Promise<number> {
    if (e.wanted <= 0) return 0;
    const balance = await this.lock(e);
    const drawn = Math.min(balance ?? 0, e.wanted);
    if (drawn <= 0) return 0;
    if (!(await this.entry(e, 'APPLIED', -drawn, balance! - drawn, e.orderId, e.subscriptionId, e.at))) return 0;
    await this.db('customer_balances').where(this.where(e)).update({ amount_cents: balance! - drawn, updated_at: e.at });
    return drawn;
  }

  async restore(orderId: string, at: Date): Promise<number> {
    const applied = (await this.db('customer_balance_entries').where({ order_id: orderId, kind: 'APPLIED' }).first('org_id', 'customer_id', 'currency', 'amount_cents', 'subscription_id')) as
      | { org_id: string; customer_id: string; currency: string; amount_cents: number | string; subscription_id: string | null }
      | undefined;
    if (!applied) return 0;
    const k = { orgId: applied.org_id, customerId: applied.customer_id, currency: applied.currency };
    const amount = -Number(applied.amount_cents);
    const balance = (await this.lock(k)) ?? 0;
    if (!(await this.entry(k, 'RESTORED', amount, balance + amount, orderId, applied.subscription_id, at))) return 0;
    await this.db('customer_balances').where(this.where(k)).update({ amount_cents: balance + amount, updated_at: at });
    return amount;
  }

  async balance(orgId: string, customerId: string, currency: string): Promise<number> {
    const row = (await this.db('customer_balances').where(this.where({ orgId, customerId, currency })).first('amount_cents')) as { amount_cents: number | string } | undefined;
    return row === undefined ? 0 : Number(row.amount_cents);
  }

  async balancesOf(orgId: string, customerId: string): Promise<Array<{ currency: string; amountCents: number; updatedAt: Date }>> {
    const rows = (await this.db('customer_balances').where({ org_id: orgId, customer_id: customerId }).orderBy('currency').select('currency', 'amount_cents', 'updated_at')) as Array<{ currency: string; amount_cents: number | string; updated_at: Date | string }>;
    return rows.map((r) => ({ currency: r.currency, amountCents: Number(r.amount_cents), updatedAt: new Date(r.updated_at) }));
  }

  async entries(orgId: string, customerId: string, page: { currency?: string; limit: number; startingAfter?: string }): Promise<{ items: CustomerBalanceEntry[]; hasMore: boolean } | undefined> {
    const query = this.db('customer_balance_entries').where({ org_id: orgId, customer_id: customerId });
    if (page.currency !== undefined) query.andWhere({ currency: page.currency.toUpperCase() });
    if (page.startingAfter !== undefined) {
      const cursor = (await this.db('customer_balance_entries').where({ org_id: orgId, customer_id: customerId, id: page.startingAfter }).first('seq')) as { seq: number | string } | undefined;
      if (!cursor) return undefined;
      query.andWhere('seq', '<', cursor.seq);
    }
    const rows = (await query.orderBy('seq', 'desc').limit(page.limit + 1).select('*')) as EntryRow[];
    return { items: rows.slice(0, page.limit).map(toEntry), hasMore: rows.length > page.limit };
  }

  async findByIdempotencyKey(orgId: string, key: string): Promise<CustomerBalanceEntry | undefined> {
    const row = (await this.db('customer_balance_entries').where({ org_id: orgId, idempotency_key: key }).first()) as EntryRow | undefined;
    return row && toEntry(row);
  }

  async lockedBalance(k: Key): Promise<number> {
    return (await this.lock(k)) ?? 0;
  }

  lockForChange(k: Key, at: Date): Promise<number> {
    return this.lockOrCreate(k, at);
  }

  async recordAdjustment(a: Key & { amount: number; balanceBefore: number; description: string; idempotencyKey: string; requestHash: string; at: Date }): Promise<CustomerBalanceEntry | undefined> {
    const ending = a.balanceBefore + a.amount;
    const result = await this.db.raw(
      `INSERT INTO customer_balance_entries (id, org_id, customer_id, currency, kind, amount_cents, ending_balance_cents, description, order_id, subscription_id, created_at, idempotency_key, request_hash)
       VALUES (?, ?, ?, ?, 'ADJUSTMENT', ?, ?, ?, NULL, NULL, ?, ?, ?)
       ON CONFLICT (org_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING *`,
      [newId('CBE'), a.orgId, a.customerId, a.currency.toUpperCase(), a.amount, ending, a.description, a.at, a.idempotencyKey, a.requestHash],
    );
    const rows = result.rows as EntryRow[];
    if (rows.length === 0) return undefined;
    await this.db('customer_balances').where(this.where(a)).update({ amount_cents: ending, updated_at: a.at });
    return toEntry(rows[0]!);
  }
}
