/**
 * The wallet filter's index carries the address itself (INCLUDE), so that a list's capped count
 * by wallet (`GET /v1/orders?from_address=…`, src/db/list-page.ts) is an index-only scan of at most
 * the bound's entries. The index of 0120 keys on `lower(from_address)`, an expression: PostgreSQL
 * plans an index-only scan only when every column the query names is in the index, and the filter
 * names `from_address`; so the count fetched each of its 1,001 rows from the table (issue 32: 63 ms
 * at 1M orders, against 1 ms for the other filters' counts).
 *
 * Built like 0120 (CREATE INDEX CONCURRENTLY on PostgreSQL, an interrupted build dropped and built
 * again on the next run), then the index it replaces is dropped the same way. Measured on an
 * existing 1M-order database: docs/benchmarks.md (bench:growth, indexCosts) and docs/operations.md.
 */
import type { Knex } from 'knex';
import { create, drop } from './0120_list_indexes.js';

export const config = { transaction: false };

const NEW: Array<[string, string]> = [
  ['orders_org_wallet_created_id_incl', 'orders (org_id, lower(from_address), created_at, id) INCLUDE (from_address) WHERE from_address IS NOT NULL'],
];
const REPLACED: Array<[string, string]> = [
  ['orders_org_wallet_created_id', 'orders (org_id, lower(from_address), created_at, id) WHERE from_address IS NOT NULL'],
];

export async function up(db: Knex): Promise<void> {
  await create(db, NEW);
  await drop(db, REPLACED);
}

export async function down(db: Knex): Promise<void> {
  await create(db, REPLACED);
  await drop(db, NEW);
}
