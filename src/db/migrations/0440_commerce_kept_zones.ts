/**
 * Commerce metrics in a zone other than the organization's (issue 40, item 1): an API key asking
 * 12 months by day in Asia/Kathmandu of an organization keeping its books in Asia/Kolkata read the
 * UTC days and moved the hours and quarters each local midnight cuts off them (0370's reader with
 * 0404's indexes): ~7,600 rollup rows summed in PostgreSQL and the moves worked out per day in
 * Node, ~90 ms of CPU per request at 1M orders against ~29 ms in the organization's own zone.
 *
 * Now local days are also kept for a few other zones an organization's callers ask for
 * (at most 3 besides its own, first asked first kept):
 * - commerce_rollup_kept_zone: (organization, zone) asked for, 'pending' until the
 *   commerce-rollups job has built its days from the quarter rows (under the applier's lock, as
 *   0370's build), then 'ready'; 'unknown' for a name this database's zone table does not know.
 *   The reader inserts the row the first time a zone is asked for (that answer, and every one
 *   until the row is 'ready', is read from the hours and quarters as before).
 * - commerce_rollup_zone_day: per organization, kept zone, local date and currency, the figures of
 *   the rows whose instant falls on that date; the applier folds each queued quarter into the days
 *   of every ready kept zone of its organization, in the same statement as the other rollups.
 * Both go with the organization (ON DELETE CASCADE). Nothing to backfill: a zone is built when asked.
 */
import type { Knex } from 'knex';
import { FIGURES } from './0260_commerce_rollups.js';
import { TAX_FIGURES } from './0372_commerce_tax_figures.js';

const COLUMNS = [...FIGURES, ...TAX_FIGURES].map((f) => `${f} bigint NOT NULL DEFAULT 0`).join(',\n    ');

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE commerce_rollup_kept_zone (
    org_id text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    time_zone text NOT NULL,
    state text NOT NULL CHECK (state IN ('pending', 'ready', 'unknown')),
    requested_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, time_zone))`);
  await db.raw("CREATE INDEX commerce_rollup_kept_zone_pending ON commerce_rollup_kept_zone (requested_at) WHERE state = 'pending'");
  await db.raw(`CREATE TABLE commerce_rollup_zone_day (
    org_id text NOT NULL,
    time_zone text NOT NULL,
    day date NOT NULL,
    currency text NOT NULL,
    ${COLUMNS},
    PRIMARY KEY (org_id, time_zone, day, currency),
    FOREIGN KEY (org_id, time_zone) REFERENCES commerce_rollup_kept_zone (org_id, time_zone) ON DELETE CASCADE)`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE IF EXISTS commerce_rollup_zone_day, commerce_rollup_kept_zone');
}
