/**
 * Kassa's mirror of Stripe customer balances in the database (migration 0441, docs/plan-changes.md
 * "Credit balance on Stripe"). Each move locks the balance row (`FOR UPDATE`) before reading it and
 * is written in the transaction of the order whose invoice made it, at most once per order and kind,
 * so a renewal drawing the credit and a downgrade adding to it never lose each other's move, and a
 * redelivered invoice moves nothing twice.
 */
import type { Knex } from 'knex';
import { newId } from '../kernel/ids.js';
import type { ProcessorBalanceMirror, ProcessorBalanceMove } from '../commerce/stores.js';

export class KnexProcessorBalanceMirror implements ProcessorBalanceMirror {
  constructor(private readonly db: Knex | Knex.Transaction) {}

  private where(orgId: string, processorCustomerId: string, currency: string) {
    return { org_id: orgId, processor_customer_id: processorCustomerId, currency: currency.toUpperCase() };
  }

  async record(m: ProcessorBalanceMove): Promise<number> {
    if (!Number.isSafeInteger(m.move)) throw new Error('A balance move is an integer of minor units');
    const key = this.where(m.orgId, m.processorCustomerId, m.currency);
    // The row first (so it can be locked), then locked: every move of this customer waits here for the others.
    await this.db('processor_customer_balances').insert({ ...key, customer_id: m.customerId, amount_cents: 0, updated_at: m.at }).onConflict(['org_id', 'processor_customer_id', 'currency']).ignore();
    const row = (await this.db('processor_customer_balances').where(key).forUpdate().first('amount_cents')) as { amount_cents: number | string };
    const before = Number(row.amount_cents);
    if (m.move === 0) return before;
    const entry = (kind: 'CARRIED' | 'APPLIED' | 'ADJUSTED', amount: number) =>
      this.db('processor_customer_balance_entries')
        .insert({ id: newId('PBE'), ...key, kind, amount_cents: amount, order_id: m.orderId, subscription_id: m.subscriptionId, processor_invoice_id: m.processorInvoiceId, created_at: m.at })
        .onConflict(['order_id', 'kind'])
        .ignore()
        .returning('id');
    // Stripe's sign: a move below 0 adds credit, above 0 draws it; the mirror holds the credit.
    const kind = m.move < 0 ? 'CARRIED' : 'APPLIED';
    if ((await entry(kind, -m.move)).length === 0) return before;
    let after = before - m.move;
    if (after < 0) {
      // The processor drew credit Kassa never saw added (granted in its dashboard): recorded, so the mirror stays its balance.
      await entry('ADJUSTED', -after);
      after = 0;
    }
    await this.db('processor_customer_balances').where(key).update({ amount_cents: after, updated_at: m.at });
    return after;
  }

  async balance(orgId: string, processorCustomerId: string, currency: string): Promise<number> {
    const row = (await this.db('processor_customer_balances').where(this.where(orgId, processorCustomerId, currency)).first('amount_cents')) as { amount_cents: number | string } | undefined;
    return row === undefined ? 0 : Number(row.amount_cents);
  }

  async balanceOfSubscription(orgId: string, subscriptionId: string, currency: string): Promise<number | undefined> {
    const seen = (await this.db('processor_customer_balance_entries').where({ org_id: orgId, subscription_id: subscriptionId }).orderBy('created_at', 'desc').first('processor_customer_id')) as { processor_customer_id: string } | undefined;
    return seen ? this.balance(orgId, seen.processor_customer_id, currency) : undefined;
  }
}
