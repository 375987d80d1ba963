/**
 * The customer credit balance in the database (migration 0445, docs/plan-changes.md "Credit
 * balance"): `customer_balances` (the amount per customer and currency) and
 * `customer_balance_entries` (the ledger, at most one entry per order and kind). Each change locks
 * the balance row (`FOR UPDATE`) before reading it and moves it in the same transaction, so a
 * downgrade adding to it and a renewal drawing from it never lose each other's update.
 */
import type { Knex } from 'knex';
import { newId } from '../kernel/ids.js';
import type { CustomerBalanceLedger } from '../commerce/stores.js';

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

  private async entry(k: Key, kind: 'CARRIED' | 'APPLIED' | 'RESTORED', amount: number, orderId: string, subscriptionId: string | null, at: Date): Promise<boolean> {
    const inserted = await this.db('customer_balance_entries')
      .insert({ id: newId('CBE'), ...this.where(k), kind, amount_cents: amount, order_id: orderId, subscription_id: subscriptionId, created_at: at })
      .onConflict(['order_id', 'kind'])
      .ignore()
      .returning('id');
    return inserted.length > 0;
  }

  async carry(e: Key & { amount: number; orderId: string; subscriptionId: string; at: Date }): Promise<number> {
    if (!Number.isSafeInteger(e.amount) || e.amount <= 0) throw new Error('A carried credit is a positive integer of minor units');
    const before = await this.lock(e);
    if (!(await this.entry(e, 'CARRIED', e.amount, e.orderId, e.subscriptionId, e.at))) return before ?? 0;
    const rows = (await this.db('customer_balances')
      .insert({ ...this.where(e), amount_cents: e.amount, updated_at: e.at })
      .onConflict(['org_id', 'customer_id', 'currency'])
      .merge({ amount_cents: this.db.raw('customer_balances.amount_cents + excluded.amount_cents'), updated_at: e.at })
      .returning('amount_cents')) as Array<{ amount_cents: number | string }>;
    return Number(rows[0]!.amount_cents);
  }

  async apply(e: Key & { wanted: number; orderId: string; subscriptionId: string; at: Date }): Promise<number> {
    if (e.wanted <= 0) return 0;
    const balance = await this.lock(e);
    const drawn = Math.min(balance ?? 0, e.wanted);
    if (drawn <= 0) return 0;
    if (!(await this.entry(e, 'APPLIED', -drawn, e.orderId, e.subscriptionId, e.at))) return 0;
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
    if (!(await this.entry(k, 'RESTORED', amount, orderId, applied.subscription_id, at))) return 0;
    await this.db('customer_balances').where(this.where(k)).update({ amount_cents: balance + amount, updated_at: at });
    return amount;
  }

  async balance(orgId: string, customerId: string, currency: string): Promise<number> {
    const row = (await this.db('customer_balances').where(this.where({ orgId, customerId, currency })).first('amount_cents')) as { amount_cents: number | string } | undefined;
    return row === undefined ? 0 : Number(row.amount_cents);
  }
}
