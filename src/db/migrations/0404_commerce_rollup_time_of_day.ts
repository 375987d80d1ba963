/**
 * Commerce metrics in another zone than the organization's (issue 40, item 1): the reader of
 * 0370 counts each UTC day whole in one local bucket and moves the hours and quarters a local
 * midnight cuts off it (Asia/Kathmandu: the hour at 18:00 less its first quarter, and 19:00–24:00,
 * every day). It read them as ~730 runs, one probe of the rollups' keys each, and fetched each row
 * from the table (10,561 buffers for 12 months by day at 1M orders).
 *
 * The moved hours and quarters are the same times of day on every day of a zone without daylight
 * saving (two sets with it): keyed by (organization, time of day, instant) they are a few
 * consecutive ranges, one per time of day, and carrying the figures the reads are index-only.
 * The time of day is `bucket - date_bin('1 day', bucket, origin)` (an interval; immutable, so it
 * can be indexed; the reader writes the same expression).
 *
 * Built CONCURRENTLY on PostgreSQL (writes go on); the applier keeps them like any index (its
 * upserts of these two tables are no longer HOT updates).
 */
import type { Knex } from 'knex';
import { create, drop } from './0120_list_indexes.js';
import { FIGURES } from './0260_commerce_rollups.js';
import { TAX_FIGURES } from './0372_commerce_tax_figures.js';

export const config = { transaction: false };

/** The instant's time of day in UTC, as the reader writes it (same expression, or the index is not used). */
export const timeOfDay = (column: string) => `(${column} - date_bin('1 day', ${column}, timestamptz '2000-01-01 00:00:00+00'))`;

const INCLUDED = `currency, ${[...FIGURES, ...TAX_FIGURES].join(', ')}`;

const INDEXES: Array<[string, string]> = [
  ['commerce_rollup_hour_time_of_day', `commerce_rollup_hour (org_id, ${timeOfDay('bucket')}, bucket) INCLUDE (${INCLUDED})`],
  ['commerce_rollup_quarter_time_of_day', `commerce_rollup_quarter (org_id, ${timeOfDay('bucket')}, bucket) INCLUDE (${INCLUDED})`],
];

export async function up(db: Knex): Promise<void> {
  await create(db, INDEXES);
}

export async function down(db: Knex): Promise<void> {
  await drop(db, INDEXES);
}
