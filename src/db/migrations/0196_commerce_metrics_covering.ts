/**
 * Covering indexes for the commerce metrics (GET /v1/metrics/commerce, the console's home page,
 * issue 30): each metric query sums a few columns over an organization's rows in a time range;
 * with those columns in the range's index (INCLUDE) the query is an index-only scan, where it
 * fetched each row from the table, one page read per row when rows are not stored in time order
 * (12 months of a 100,000-order organization: ~50,000 rows).
 *
 * Each replaces an index with the same key (so the lists and counts that used it use the new one)
 * and the same build as 0120: CREATE INDEX CONCURRENTLY on PostgreSQL (writes go on), an
 * interrupted build dropped and built again on the next run, then the replaced index dropped
 * CONCURRENTLY. Build times on an existing 1M-order database: docs/operations.md.
 */
import type { Knex } from 'knex';
import { create, drop } from './0120_list_indexes.js';

export const config = { transaction: false };

const MRR_COLUMNS = 'currency, amount_cents, billing_interval, billing_interval_count';

const NEW: Array<[string, string]> = [
  ['orders_org_created_id_metrics', 'orders (org_id, created_at, id) INCLUDE (currency, status, amount_cents, amount_refunded_cents)'],
  ['checkout_sessions_org_created_metrics', 'checkout_sessions (org_id, created_at) INCLUDE (currency, status)'],
  ['subscriptions_org_created_id_metrics', `subscriptions (org_id, created_at, id) INCLUDE (ended_at, ${MRR_COLUMNS})`],
  ['subscriptions_org_ended_metrics', `subscriptions (org_id, ended_at) INCLUDE (${MRR_COLUMNS}) WHERE ended_at IS NOT NULL`],
];
/** Same keys, without the included columns (0120's and 0004's). */
const REPLACED: Array<[string, string]> = [
  ['orders_org_created_id', 'orders (org_id, created_at, id)'],
  ['checkout_sessions_org_id_created_at_index', 'checkout_sessions (org_id, created_at)'],
  ['subscriptions_org_created_id', 'subscriptions (org_id, created_at, id)'],
];

export async function up(db: Knex): Promise<void> {
  await create(db, NEW);
  await drop(db, REPLACED);
}

export async function down(db: Knex): Promise<void> {
  await create(db, REPLACED);
  await drop(db, NEW);
}
