/**
 * The transaction-hash filter of the orders list (`GET /v1/orders?tx_hash=…`, issue 30: the
 * console's search finds an order by its tx hash). Keyed like every list index of 0120
 * (`(org_id, filter, created_at, id)`, src/db/list-page.ts), on `lower(tx_hash)` since the filter
 * compares case-insensitively (hashes are hexadecimal; a block explorer may show either case).
 * Partial: card orders (most of them) have no hash. A hash names at most one order per chain, so
 * a page, a cursor's page and the capped count each read one or a few entries (and as many table
 * rows) whatever the organization's size. Unlike 0195's wallet index it does not INCLUDE the
 * column: the count's heap fetches are the one or two matching rows, and the hash carried twice
 * made the index about a third larger.
 *
 * Built like 0120 and 0195: CREATE INDEX CONCURRENTLY on PostgreSQL (writes to orders go on; an
 * interrupted build is dropped and built again on the next run), plainly on PGlite.
 */
import type { Knex } from 'knex';
import { create, drop } from './0120_list_indexes.js';

export const config = { transaction: false };

const INDEXES: Array<[string, string]> = [
  ['orders_org_tx_hash_created_id', 'orders (org_id, lower(tx_hash), created_at, id) WHERE tx_hash IS NOT NULL'],
];

export async function up(db: Knex): Promise<void> {
  await create(db, INDEXES);
}

export async function down(db: Knex): Promise<void> {
  await drop(db, INDEXES);
}
