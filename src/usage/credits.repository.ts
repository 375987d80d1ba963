/**
 * The prepaid-credit ledger in the database (migration 0310): `usage_credit_entries` (one row per
 * change, unique per order and kind and per subscription period and meter) and
 * `usage_credit_balances` (the undrawn units per customer and meter). Each change inserts its entry
 * (`ON CONFLICT DO NOTHING`: a repeated or concurrent copy inserts nothing) and moves the balance
 * row in the same transaction, the row locked first, so concurrent changes serialize on it.
 */
import type { Knex } from 'knex';
import { newId } from '../kernel/ids.js';
import { runStatement } from '../db/knex.js';
import type { BasisComponent, CreditBalance, CreditLedger, MeterBalanceBasis } from '../commerce/stores.js';

/**
 * A customer's meter balances' basis in one fixed statement, run prepared (runStatement): $1 org,
 * $2 the customer's CUS_… id or externalId (the id first, as CUSTOMER_QUANTITY_SQL). Before, the
 * balances read was ~8 statements (customer, subscriptions, credits, each price and its product,
 * the usage segments, each meter's name) before its quantities. It reads the tables of the credit
 * ledger (this module's), subscriptions, prices and meters: one read across the modules' tables,
 * as the access check's READ_ACCESS_SQL does (src/subscriptions/entitlement.repository.ts), the
 * same rows the stores' reads gave (a subscription with a product, ACTIVE, its current price's
 * metered components; the segments of its current period by seq, a segment's price's components).
 * The result is one row of json columns (node-postgres sets up each column again per execution).
 */
export const BALANCE_BASIS_SQL = `WITH c AS MATERIALIZED (
  SELECT id, external_id FROM (
    SELECT id, external_id, 0 AS o FROM customers WHERE id = $2 AND org_id = $1
    UNION ALL SELECT id, external_id, 1 FROM customers WHERE org_id = $1 AND external_id = $2
  ) found ORDER BY o LIMIT 1
), subs AS MATERIALIZED (
  SELECT x.id, x.current_period_start, x.current_period_end, x.period_number, p.metered_components
  FROM subscriptions x JOIN prices p ON p.org_id = x.org_id AND p.id = x.price_id
  WHERE x.org_id = $1 AND x.customer_id = (SELECT id FROM c) AND x.status = 'ACTIVE' AND x.product_id IS NOT NULL
    AND p.metered_components IS NOT NULL
), credits AS MATERIALIZED (
  SELECT b.meter_id, b.units, b.since FROM usage_credit_balances b WHERE b.org_id = $1 AND b.customer_id = (SELECT id FROM c)
)
SELECT c.id, c.external_id,
  (SELECT json_agg(json_build_object('meter_id', k.meter_id, 'units', k.units, 'since', k.since) ORDER BY k.meter_id COLLATE "C") FROM credits k) AS credits,
  (SELECT json_agg(json_build_object('id', s.id, 'start', s.current_period_start, 'end', s.current_period_end, 'components', s.metered_components,
     'segments', (SELECT json_agg(json_build_object('start', g.start_at, 'end', g.end_at, 'components', gp.metered_components) ORDER BY g.seq)
                  FROM subscription_usage_segments g LEFT JOIN prices gp ON gp.org_id = g.org_id AND gp.id = g.price_id
                  WHERE g.subscription_id = s.id AND g.period_number = s.period_number))
     ORDER BY s.current_period_start, s.id COLLATE "C") FROM subs s) AS subscriptions,
  (SELECT json_object_agg(mt.id, mt.name) FROM meters mt WHERE mt.org_id = $1 AND mt.id IN (
     SELECT k.meter_id FROM credits k UNION SELECT jsonb_array_elements(s.metered_components) ->> 'meterId' FROM subs s)) AS meter_names
FROM c`;

type Json<T> = T | string | null;
const parsed = <T>(v: Json<T>): T | null => (typeof v === 'string' ? (JSON.parse(v) as T) : v);
interface BasisRow {
  id: string;
  external_id: string | null;
  credits: Json<Array<{ meter_id: string; units: number | string; since: string }>>;
  subscriptions: Json<Array<{ id: string; start: string; end: string; components: BasisComponent[]; segments: Array<{ start: string; end: string; components: BasisComponent[] | null }> | null }>>;
  meter_names: Json<Record<string, string>>;
}

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

  async balanceBasis(orgId: string, customerRef: string): Promise<MeterBalanceBasis> {
    const row = (await runStatement<BasisRow>(this.db, BALANCE_BASIS_SQL, [orgId, customerRef]))[0];
    if (!row) return { customer: undefined, credits: [], subscriptions: [], meterNames: new Map() };
    return {
      customer: { id: row.id, externalId: row.external_id },
      credits: (parsed(row.credits) ?? []).map((c) => ({ meterId: c.meter_id, units: Number(c.units), since: new Date(c.since) })),
      subscriptions: (parsed(row.subscriptions) ?? []).map((x) => ({
        id: x.id,
        currentPeriodStart: new Date(x.start),
        currentPeriodEnd: new Date(x.end),
        components: x.components,
        segments: (x.segments ?? []).map((g) => ({ start: new Date(g.start), end: new Date(g.end), components: g.components ?? [] })),
      })),
      meterNames: new Map(Object.entries(parsed(row.meter_names) ?? {})),
    };
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
