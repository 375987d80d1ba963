/**
 * Honest totals of the wallet filter (issue 40, item 3): `GET /v1/orders?from_address=…` beyond the
 * exact bound reported the planner's estimate, which multiplied the organization's share of the
 * table by the wallet's share of all orders (as if independent): on the growth bench's data, 5,004
 * for 15,037 orders of a 1M-order organization's 1 % wallet (−66.7 %). Most-common-value statistics
 * on (org_id, lower(from_address)) — the filter's own expression — teach the planner the pair:
 * 14,841 (−1.3 %) on the same data. ANALYZE runs once here (as 0262) so the estimate holds at once.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('CREATE STATISTICS IF NOT EXISTS orders_org_wallet (mcv) ON org_id, lower(from_address) FROM orders');
  await db.raw('ANALYZE orders');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP STATISTICS IF EXISTS orders_org_wallet');
}
