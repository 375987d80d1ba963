/**
 * Commerce metrics by whole days (issue 40, item 1): the rollups of 0260 served a range by hours
 * (plus quarter hours where a local midnight cuts an hour), so 12 months read ~8,800 rows per
 * currency at 1M orders and fewer for a small merchant whose hours are partly empty (49 ms, 2.9×
 * the 10k figure); 12 months by day in Asia/Kolkata read 366 cut hours by quarter (81–109 ms).
 *
 * - UTC: commerce_rollup_day (0260) already holds UTC days; the reader takes them directly.
 * - The organization's own time zone (organizations.time_zone, what the console's home page
 *   passes): commerce_rollup_local_day holds per (org, local date in that zone, currency) the
 *   figures of the rows whose instant falls on that local date. A quarter hour never straddles a
 *   local midnight (every zone's offset since 1972 is a whole number of quarter hours), so each
 *   quarter row of 0260 belongs to one local day: the day rows are the quarter rows grouped by
 *   `(bucket AT TIME ZONE zone)::date`, which is how the commerce-rollups job folds the queue into
 *   them and how it builds them.
 * - commerce_rollup_zone: which zone an organization's local days are kept in, and whether they are
 *   complete ('ready'), to be built ('pending': the job builds them from the quarter rows under the
 *   applier's lock) or the zone is unknown to this database ('unknown': never built, never read).
 *   A row trigger on organizations keeps it: a new zone is 'pending' and the old zone's day rows
 *   are deleted in the same transaction; 'UTC' needs no row. A reader checks 'ready' for the zone it
 *   is asked in, in the same statement as it reads the days (one snapshot); any other zone is read
 *   from hours and quarters as before.
 *
 * Existing installs: each organization not in UTC gets a 'pending' row; the job builds its days
 * from the quarter rows (a GROUP BY over the organization's quarter rows: ~0.3 s for 2 years of a
 * 1M-order organization, measured by bench:growth when it reuses a loaded database).
 */
import type { Knex } from 'knex';
import { FIGURES } from './0260_commerce_rollups.js';

const COLUMNS = FIGURES.map((f) => `${f} bigint NOT NULL DEFAULT 0`).join(',\n    ');

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE commerce_rollup_zone (
    org_id text PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
    time_zone text NOT NULL,
    state text NOT NULL CHECK (state IN ('pending', 'ready', 'unknown')),
    requested_at timestamptz NOT NULL DEFAULT now())`);
  await db.raw("CREATE INDEX commerce_rollup_zone_pending ON commerce_rollup_zone (requested_at) WHERE state = 'pending'");
  await db.raw(`CREATE TABLE commerce_rollup_local_day (
    org_id text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    day date NOT NULL,
    currency text NOT NULL,
    ${COLUMNS},
    PRIMARY KEY (org_id, day, currency))`);
  // The zone row first, then the day rows: the job's build locks them in the same order.
  await db.raw(`CREATE OR REPLACE FUNCTION commerce_org_time_zone_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    IF TG_OP = 'UPDATE' AND OLD.time_zone IS NOT DISTINCT FROM NEW.time_zone THEN
      RETURN NULL;
    END IF;
    IF NEW.time_zone = 'UTC' THEN
      DELETE FROM commerce_rollup_zone WHERE org_id = NEW.id;
    ELSE
      INSERT INTO commerce_rollup_zone (org_id, time_zone, state, requested_at) VALUES (NEW.id, NEW.time_zone, 'pending', now())
        ON CONFLICT (org_id) DO UPDATE SET time_zone = excluded.time_zone, state = 'pending', requested_at = excluded.requested_at;
    END IF;
    DELETE FROM commerce_rollup_local_day WHERE org_id = NEW.id;
    RETURN NULL;
  END $fn$`);
  await db.raw('CREATE TRIGGER organizations_commerce_time_zone AFTER INSERT OR UPDATE OF time_zone ON organizations FOR EACH ROW EXECUTE FUNCTION commerce_org_time_zone_changed()');
  await db.raw("INSERT INTO commerce_rollup_zone (org_id, time_zone, state) SELECT id, time_zone, 'pending' FROM organizations WHERE time_zone <> 'UTC'");
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TRIGGER IF EXISTS organizations_commerce_time_zone ON organizations');
  await db.raw('DROP FUNCTION IF EXISTS commerce_org_time_zone_changed()');
  await db.raw('DROP TABLE IF EXISTS commerce_rollup_local_day, commerce_rollup_zone');
}
