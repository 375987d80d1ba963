/**
 * `GET /v1/orders?merchant_reference=…` (issue 40): a contains-match (ILIKE '%term%'), which no
 * b-tree serves: it read every order of the organization (27× slower at 1M orders than at 10k).
 * A trigram GIN index (pg_trgm) finds the orders whose reference contains the term's trigrams; the
 * page is then sorted from those few. Terms shorter than 3 characters have no trigram and still
 * scan, as do terms most orders match (the planner then walks the list's created_at index instead,
 * which stops after a page).
 *
 * Without GIN's pending list (`fastupdate = off`): each insert puts its reference's trigrams in
 * the index at once, where a pending list would be read whole by every search until a vacuum.
 *
 * PostgreSQL only, built CONCURRENTLY (0120's build: writes go on; an interrupted build is rebuilt
 * on the next run). pg_trgm is a trusted extension (PostgreSQL 13+: the database owner may create
 * it); where it is not installed or cannot be created the index is left out and the filter scans,
 * as before. Embedded PGlite installs (small by design) do without.
 */
import type { Knex } from 'knex';
import { create, drop } from './0120_list_indexes.js';
import { isEmbedded } from '../dialect.js';

export const config = { transaction: false };

const INDEX: Array<[string, string]> = [['orders_merchant_reference_trgm', 'orders USING gin (merchant_reference gin_trgm_ops) WITH (fastupdate = off)']];

async function trigramsAvailable(db: Knex): Promise<boolean> {
  const { rows } = await db.raw("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'");
  if (rows.length === 0) return false;
  try {
    await db.raw('CREATE EXTENSION IF NOT EXISTS pg_trgm');
    return true;
  } catch {
    return false;
  }
}

export async function up(db: Knex): Promise<void> {
  if (isEmbedded(db) || !(await trigramsAvailable(db))) return;
  await create(db, INDEX);
}

export async function down(db: Knex): Promise<void> {
  if (isEmbedded(db)) return;
  await drop(db, INDEX);
}
