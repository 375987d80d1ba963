/**
 * The access check's read (`GET /v1/entitlements/check`, which a merchant's app calls on every
 * page view): who the identifiers name, what they are granted and the asked-for product's name,
 * in one prepared statement over customers, orders, subscriptions and products instead of up to
 * four round trips. A read model only: it writes nothing, and the rules it encodes are those of
 * src/subscriptions/entitlement.service.ts, which decides from its rows.
 */
import type { CreditGrant, MeteredComponent } from '../commerce/metered-billing.js';
import type { CreditBalance } from '../commerce/stores.js';
import { runStatement, type Db } from '../db/knex.js';

export interface AccessRead {
  /** An identifier named nobody, or two named different customers. */
  unknown: boolean;
  customer: { id: string; email: string } | null;
  /** One-time orders first, then subscriptions (the service lets an order's grant win). */
  grants: Array<{ type: 'ONE_TIME' | 'SUBSCRIPTION'; productId: string; productName: string }>;
  /** The name of the product asked about, when it is a product of the organization. */
  queriedProductName: string | null;
  metered: MeteredRead | null;
}

/** What the access read tells of a metered product (null for any other). */
export interface MeteredRead {
  /** The product's prices' metered components and credit-pack grants. */
  prices: Array<{ components: MeteredComponent[] | null; grant: CreditGrant | null }>;
  /** The resolved customer's credit balances (every meter). */
  credits: CreditBalance[];
  /** The customer's ACTIVE subscriptions with metered components, the earliest period first. */
  subscriptions: Array<{ id: string; start: Date; end: Date; components: MeteredComponent[]; segments: Array<{ start: Date; end: Date; components: MeteredComponent[] }> }>;
}

export interface EntitlementRepository {
  readAccess(orgId: string, subject: { customerId?: string; email?: string; wallet?: string }, productId?: string): Promise<AccessRead>;
  customerIdByExternalId(orgId: string, externalId: string): Promise<string | undefined>;
}

/**
 * $1 org, $2 customer id, $3 e-mail, $4 wallet, $5 product id (each null when not given). The
 * first row carries the subject; each grant is a row (none: one row with a null grant). The rows
 * come as one json array in one column: node-postgres sets up every column of a result again on
 * each execution, which cost more than parsing the array (src/db/json-row.ts).
 */
const GRANTING = "o.org_id = $1 AND o.status = 'PAID' AND o.amount_refunded_cents = 0 AND o.subscription_id IS NULL AND o.product_id IS NOT NULL";
/**
 * One-time grants are read one row per product (a loose index scan: the first product, then the
 * first one after it, …) over the partial indexes orders_access_by_customer / _by_wallet
 * (migration 0120), so a buyer with ten thousand orders of three products costs three index
 * probes, not ten thousand rows. Each product's row is its newest order (its name as last sold).
 * The customer and the wallet-only cases are separate branches, each an index condition (an OR of
 * the two made the planner read every paid order of the organization). Each step, the first one
 * too, is a LATERAL subquery with its own ORDER BY … LIMIT 1: written as a join of the subject and
 * orders, the first step's order was the join's, so the planner sorted every granting order of
 * the buyer to keep one (8,000 rows for a buyer with 1 % of a million orders: issue 32's 4.3×).
 */
export const READ_ACCESS_SQL = `
WITH RECURSIVE
     by_id AS (SELECT id, email FROM customers WHERE org_id = $1 AND id = $2::text),
     by_email AS (SELECT id, email FROM customers WHERE org_id = $1 AND lower(email) = lower($3::text) LIMIT 1),
     subject AS (
       SELECT ($2::text IS NOT NULL AND NOT EXISTS (SELECT 1 FROM by_id))
           OR ($3::text IS NOT NULL AND (NOT EXISTS (SELECT 1 FROM by_email)
                 OR (EXISTS (SELECT 1 FROM by_id) AND (SELECT id FROM by_id) IS DISTINCT FROM (SELECT id FROM by_email)))) AS unknown,
              coalesce((SELECT id FROM by_id), (SELECT id FROM by_email)) AS customer_id,
              coalesce((SELECT email FROM by_id), (SELECT email FROM by_email)) AS customer_email),
     by_customer AS (
       SELECT f.product_id, f.product_name FROM subject s, LATERAL (
         SELECT o.product_id, o.product_name FROM orders o
          WHERE ${GRANTING} AND o.customer_id = s.customer_id
            AND ($4::text IS NULL OR lower(o.from_address) = lower($4::text))
          ORDER BY o.product_id, o.created_at DESC, o.id DESC LIMIT 1) f
        WHERE NOT s.unknown AND s.customer_id IS NOT NULL
       UNION ALL
       SELECT n.product_id, n.product_name FROM by_customer p, subject s, LATERAL (
         SELECT o.product_id, o.product_name FROM orders o
          WHERE ${GRANTING} AND o.customer_id = s.customer_id AND o.product_id > p.product_id
            AND ($4::text IS NULL OR lower(o.from_address) = lower($4::text))
          ORDER BY o.product_id, o.created_at DESC, o.id DESC LIMIT 1) n),
     by_wallet AS (
       (SELECT o.product_id, o.product_name FROM subject s, orders o
         WHERE NOT s.unknown AND s.customer_id IS NULL AND $4::text IS NOT NULL AND ${GRANTING}
           AND o.from_address IS NOT NULL AND lower(o.from_address) = lower($4::text)
         ORDER BY o.product_id, o.created_at DESC, o.id DESC LIMIT 1)
       UNION ALL
       SELECT n.product_id, n.product_name FROM by_wallet p, LATERAL (
         SELECT o.product_id, o.product_name FROM orders o
          WHERE ${GRANTING} AND o.from_address IS NOT NULL AND lower(o.from_address) = lower($4::text) AND o.product_id > p.product_id
          ORDER BY o.product_id, o.created_at DESC, o.id DESC LIMIT 1) n),
     -- A metered product (issue 38 §6): its prices' meters, and for a resolved customer their credit
     -- balances and ACTIVE subscriptions with metered components. Null for any other product, so a
     -- plain product costs one index probe of its prices more than before.
     product_meters AS (
       SELECT p.id, p.metered_components, p.grants_units FROM prices p
        WHERE $5::text IS NOT NULL AND p.org_id = $1 AND p.product_id = $5::text
          AND (p.metered_components IS NOT NULL OR p.grants_units IS NOT NULL)),
     metered AS (
       SELECT CASE WHEN EXISTS (SELECT 1 FROM product_meters) THEN json_build_object(
         'prices', (SELECT json_agg(json_build_object('components', m.metered_components, 'grant', m.grants_units)) FROM product_meters m),
         'credits', (SELECT json_agg(json_build_object('meter_id', b.meter_id, 'units', b.units, 'since', b.since))
                       FROM usage_credit_balances b, subject s
                      WHERE NOT s.unknown AND b.org_id = $1 AND b.customer_id = s.customer_id),
         -- A period a metered plan change split (migration 0450): its parts before the change, with their prices' components.
         'subscriptions', (SELECT json_agg(json_build_object('id', x.id, 'start', x.current_period_start, 'end', x.current_period_end, 'components', p.metered_components,
                                     'segments', (SELECT json_agg(json_build_object('start', g.start_at, 'end', g.end_at, 'components', gp.metered_components) ORDER BY g.seq)
                                                    FROM subscription_usage_segments g LEFT JOIN prices gp ON gp.org_id = g.org_id AND gp.id = g.price_id
                                                   WHERE g.subscription_id = x.id AND g.period_number = x.period_number))
                                   ORDER BY x.current_period_start, x.id)
                             FROM subscriptions x JOIN prices p ON p.org_id = x.org_id AND p.id = x.price_id, subject s
                            WHERE NOT s.unknown AND x.org_id = $1 AND x.customer_id = s.customer_id AND x.status = 'ACTIVE'
                              AND p.metered_components IS NOT NULL)) END AS metered)
SELECT json_agg(json_build_object('unknown', s.unknown, 'customer_id', s.customer_id, 'customer_email', s.customer_email,
         'kind', g.kind, 'product_id', g.product_id, 'product_name', g.product_name,
         'queried_product_name', (SELECT name FROM products WHERE org_id = $1 AND id = $5::text)) ORDER BY g.rank NULLS FIRST) AS rows,
       (SELECT metered FROM metered) AS metered
  FROM subject s
  LEFT JOIN LATERAL (
    SELECT 1 AS rank, 'ONE_TIME' AS kind, t.product_id, coalesce(t.product_name, '') AS product_name FROM by_customer t
    UNION ALL
    SELECT 1, 'ONE_TIME', t.product_id, coalesce(t.product_name, '') FROM by_wallet t
    UNION ALL
    SELECT 2, 'SUBSCRIPTION', sub.product_id, sub.product_name
      FROM subscriptions sub
     WHERE NOT s.unknown AND s.customer_id IS NOT NULL AND $4::text IS NULL
       AND sub.org_id = $1 AND sub.status = 'ACTIVE' AND sub.customer_id = s.customer_id AND sub.product_id IS NOT NULL
  ) g ON true`;

interface AccessRow {
  unknown: boolean;
  customer_id: string | null;
  customer_email: string | null;
  kind: 'ONE_TIME' | 'SUBSCRIPTION' | null;
  product_id: string | null;
  product_name: string | null;
  queried_product_name: string | null;
}

interface MeteredRow {
  prices: Array<{ components: MeteredComponent[] | null; grant: CreditGrant | null }>;
  credits: Array<{ meter_id: string; units: number | string; since: string }> | null;
  subscriptions: Array<{ id: string; start: string; end: string; components: MeteredComponent[]; segments: Array<{ start: string; end: string; components: MeteredComponent[] | null }> | null }> | null;
}

/** json_build_object's timestamps are ISO text without the zone's colon-less variants PGlite and PostgreSQL both parse with Date. */
function toMetered(value: MeteredRow | string | null): MeteredRead | null {
  if (value === null) return null;
  const row = typeof value === 'string' ? (JSON.parse(value) as MeteredRow) : value;
  return {
    prices: row.prices,
    credits: (row.credits ?? []).map((c) => ({ meterId: c.meter_id, units: Number(c.units), since: new Date(c.since) })),
    subscriptions: (row.subscriptions ?? []).map((x) => ({
      id: x.id,
      start: new Date(x.start),
      end: new Date(x.end),
      components: x.components,
      segments: (x.segments ?? []).map((g) => ({ start: new Date(g.start), end: new Date(g.end), components: g.components ?? [] })),
    })),
  };
}

export class KnexEntitlementRepository implements EntitlementRepository {
  constructor(private readonly db: Db) {}

  async customerIdByExternalId(orgId: string, externalId: string): Promise<string | undefined> {
    const row = await this.db('customers').where({ org_id: orgId, external_id: externalId }).first('id');
    return row?.id as string | undefined;
  }

  async readAccess(orgId: string, subject: { customerId?: string; email?: string; wallet?: string }, productId?: string): Promise<AccessRead> {
    const [{ rows, metered }] = (await runStatement<{ rows: AccessRow[]; metered: MeteredRow | string | null }>(this.db, READ_ACCESS_SQL, [
      orgId,
      subject.customerId ?? null,
      subject.email ?? null,
      subject.wallet ?? null,
      productId ?? null,
    ])) as [{ rows: AccessRow[]; metered: MeteredRow | string | null }];
    const first = rows[0]!;
    return {
      unknown: first.unknown,
      customer: first.customer_id === null ? null : { id: first.customer_id, email: first.customer_email! },
      grants: rows.filter((r) => r.kind !== null).map((r) => ({ type: r.kind!, productId: r.product_id!, productName: r.product_name ?? '' })),
      queriedProductName: first.queried_product_name,
      metered: toMetered(metered),
    };
  }
}
