/**
 * The prepaid-credit ledger in the database (migration 0310): `usage_credit_entries` (one row per
 * change, unique per order and kind and per subscription period and meter) and
 * `usage_credit_balances` (the undrawn units per customer and meter). Each change inserts its entry
 * (`ON CONFLICT DO NOTHING`: a repeated or concurrent copy inserts nothing) and moves the balance
 * row in the same transaction, the row locked first, so concurrent changes serialize on it.
 */
import type { Knex } from 'knex';
import { newId } from '../kernel/ids.js';
import type { CreditBalance, CreditLedger } from '../commerce/stores.js';

interface BalanceRow {
  meter_id: string;
  units: number | string;
  since: Date | string;
}

export class KnexCreditLedger implements CreditLedger {
  constructor(private readonly db: Knex | Knex.Transaction) {}

  async grant(entry: { orgId: string; customerId: string; meterId: string; units: number; orderId: string; at: Date }): Promise<boolean> {
    const inserted = await this.db('usage_credit_entries')
      .insert({ id: newId('CRE'), org_id: entry.orgId, customer_id: entry.customerId, meter_id: entry.meterId, kind: 'GRANT', units: entry.units, order_id: entry.orderId, created_at: entry.at })
      .onConflict(this.db.raw("(order_id, kind) WHERE kind IN ('GRANT', 'REVOKE')"))
      .ignore()
      .returning('id');
    if (inserted.length === 0) return false;
    await this.db('usage_credit_balances')
      .insert({ org_id: entry.orgId, customer_id: entry.customerId, meter_id: entry.meterId, units: entry.units, since: entry.at, updated_at: entry.at })
      .onConflict(['org_id', 'customer_id', 'meter_id'])
      .merge({ units: this.db.raw('usage_credit_balances.units + excluded.units'), updated_at: entry.at });
    return true;
  }

  private async lockBalance(orgId: string, customerId: string, meterId: string): Promise<number | undefined> {
    const row = (await this.db('usage_credit_balances').where({ org_id: orgId, customer_id: customerId, meter_id: meterId }).forUpdate().first('units')) as { units: number | string } | undefined;
    return row === undefined ? undefined : Number(row.units);
  }

  private async move(orgId: string, customerId: string, meterId: string, delta: number, at: Date): Promise<void> {
    await this.db('usage_credit_balances')
      .where({ org_id: orgId, customer_id: customerId, meter_id: meterId })
      .update({ units: this.db.raw('units + ?', [delta]), updated_at: at });
  }

  async revokeOrderGrant(orderId: string, at: Date): Promise<number | null> {
    const grant = (await this.db('usage_credit_entries').where({ order_id: orderId, kind: 'GRANT' }).first('org_id', 'customer_id', 'meter_id', 'units')) as
      | { org_id: string; customer_id: string; meter_id: string; units: number | string }
      | undefined;
    if (!grant) return null;
    const balance = (await this.lockBalance(grant.org_id, grant.customer_id, grant.meter_id)) ?? 0;
    const units = Math.min(Number(grant.units), balance);
    const inserted = await this.db('usage_credit_entries')
      .insert({ id: newId('CRE'), org_id: grant.org_id, customer_id: grant.customer_id, meter_id: grant.meter_id, kind: 'REVOKE', units: -units, order_id: orderId, created_at: at })
      .onConflict(this.db.raw("(order_id, kind) WHERE kind IN ('GRANT', 'REVOKE')"))
      .ignore()
      .returning('id');
    if (inserted.length === 0) return null;
    if (units > 0) await this.move(grant.org_id, grant.customer_id, grant.meter_id, -units, at);
    return units;
  }

  async draw(entry: { orgId: string; customerId: string; meterId: string; subscriptionId: string; period: number; wanted: number; at: Date }): Promise<number> {
    if (entry.wanted <= 0) return 0;
    const balance = await this.lockBalance(entry.orgId, entry.customerId, entry.meterId);
    if (balance === undefined) return 0;
    const drawn = (await this.db('usage_credit_entries')
      .where({ subscription_id: entry.subscriptionId, billing_period: entry.period, meter_id: entry.meterId, kind: 'DRAW' })
      .first('units')) as { units: number | string } | undefined;
    if (drawn) return -Number(drawn.units);
    const units = Math.min(balance, entry.wanted);
    if (units <= 0) return 0;
    await this.db('usage_credit_entries').insert({
      id: newId('CRE'),
      org_id: entry.orgId,
      customer_id: entry.customerId,
      meter_id: entry.meterId,
      kind: 'DRAW',
      units: -units,
      subscription_id: entry.subscriptionId,
      billing_period: entry.period,
      created_at: entry.at,
    });
    await this.move(entry.orgId, entry.customerId, entry.meterId, -units, entry.at);
    return units;
  }

  async customersWithCredits(orgId: string, customerIds: readonly string[]): Promise<string[]> {
    if (customerIds.length === 0) return [];
    // One array parameter (not one per customer): an ingest batch names up to 1,000 customers.
    const rows = (await this.db('usage_credit_balances').where({ org_id: orgId }).whereRaw('customer_id = ANY(?::text[])', [[...customerIds]]).distinct('customer_id').orderBy('customer_id')) as Array<{ customer_id: string }>;
    return rows.map((r) => r.customer_id);
  }

  async balances(orgId: string, customerId: string): Promise<CreditBalance[]> {
    const rows = (await this.db('usage_credit_balances').where({ org_id: orgId, customer_id: customerId }).orderBy('meter_id').select('meter_id', 'units', 'since')) as BalanceRow[];
    return rows.map((r) => ({ meterId: r.meter_id, units: Number(r.units), since: new Date(r.since) }));
  }

  async claimAlert(alert: { orgId: string; customerId: string; meterId: string; periodKey: string; kind: string; at: Date }): Promise<boolean> {
    const inserted = await this.db('usage_balance_alerts')
      .insert({ org_id: alert.orgId, customer_id: alert.customerId, meter_id: alert.meterId, period_key: alert.periodKey, kind: alert.kind, sent_at: alert.at })
      .onConflict(['org_id', 'customer_id', 'meter_id', 'period_key', 'kind'])
      .ignore()
      .returning('org_id');
    return inserted.length > 0;
  }

  async claimedAlerts(orgId: string, keys: ReadonlyArray<{ customerId: string; meterId: string; periodKey: string }>): Promise<Set<string>> {
    if (keys.length === 0) return new Set();
    // The primary key's prefix (org, customer) narrows; the rest is matched on the rows found.
    const wanted = new Set(keys.map((k) => `${k.customerId}|${k.meterId}|${k.periodKey}`));
    const rows = (await this.db('usage_balance_alerts')
      .where({ org_id: orgId })
      .whereIn('customer_id', [...new Set(keys.map((k) => k.customerId))])
      .whereIn('period_key', [...new Set(keys.map((k) => k.periodKey))])
      .select('customer_id', 'meter_id', 'period_key', 'kind')) as Array<{ customer_id: string; meter_id: string; period_key: string; kind: string }>;
    const out = new Set<string>();
    for (const r of rows) if (wanted.has(`${r.customer_id}|${r.meter_id}|${r.period_key}`)) out.add(`${r.customer_id}|${r.meter_id}|${r.period_key}|${r.kind}`);
    return out;
  }
}
