/**
 * Honest list totals beyond the exact bound (issue 40): `total` past 1,000 rows is the planner's
 * estimate of the filtered rows, and the planner multiplied the organization's share of the table
 * by the filter's share, as if independent: a product, customer or subscription belongs to one
 * organization, so a filtered list of a tenant holding 1 % of the orders was estimated at 1 % of
 * its size (clamped to 1,001). Extended statistics teach it the columns' dependence (functional
 * dependencies for the ids, most-common combinations for status and rail), and a larger sample
 * of `org_id` (300,000 rows instead of 30,000) pins each organization's share: measured errors in
 * docs/benchmarks.md (issue 40). ANALYZE runs once here so the estimates hold at once; autovacuum
 * keeps them after.
 */
import type { Knex } from 'knex';

const STATISTICS: Array<[name: string, definition: string]> = [
  ['orders_org_keys', '(dependencies) ON org_id, product_id, customer_id, subscription_id FROM orders'],
  ['orders_org_kinds', '(mcv) ON org_id, status, provider FROM orders'],
  ['subscriptions_org_kinds', '(dependencies, mcv) ON org_id, status, customer_id FROM subscriptions'],
];
const TABLES = ['orders', 'customers', 'subscriptions'];

export async function up(db: Knex): Promise<void> {
  for (const [name, definition] of STATISTICS) await db.raw(`CREATE STATISTICS IF NOT EXISTS ${name} ${definition}`);
  for (const table of TABLES) await db.raw(`ALTER TABLE ${table} ALTER COLUMN org_id SET STATISTICS 1000`);
  await db.raw(`ANALYZE ${TABLES.join(', ')}`);
}

export async function down(db: Knex): Promise<void> {
  for (const [name] of STATISTICS) await db.raw(`DROP STATISTICS IF EXISTS ${name}`);
  for (const table of TABLES) await db.raw(`ALTER TABLE ${table} ALTER COLUMN org_id SET STATISTICS -1`);
}
