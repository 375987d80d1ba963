/**
 * Kept zones replaced when idle (issue 40, item 1; migration 0440 kept the first 3 other zones an
 * organization's callers asked for, forever, so a fourth zone asked by anyone was read the slow
 * exact way from hours and quarters for good):
 * - commerce_rollup_kept_zone.last_asked_on: the UTC date a request last read the zone (written at
 *   most once a day, on the primary, only when it changes); existing rows start at their request's date.
 * - state 'waiting': a zone asked while the organization keeps 3 (at most 3 waiting). The
 *   commerce-rollups job replaces the least recently asked kept zone by the most recently asked
 *   waiting one when the kept one was not asked for more than 7 days (src/commerce-metrics/rollups.repository.ts).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE commerce_rollup_kept_zone ADD COLUMN last_asked_on date');
  await db.raw("UPDATE commerce_rollup_kept_zone SET last_asked_on = (requested_at AT TIME ZONE 'UTC')::date");
  await db.raw('ALTER TABLE commerce_rollup_kept_zone ALTER COLUMN last_asked_on SET NOT NULL');
  await db.raw('ALTER TABLE commerce_rollup_kept_zone DROP CONSTRAINT commerce_rollup_kept_zone_state_check');
  await db.raw("ALTER TABLE commerce_rollup_kept_zone ADD CONSTRAINT commerce_rollup_kept_zone_state_check CHECK (state IN ('pending', 'ready', 'unknown', 'waiting'))");
  await db.raw("CREATE INDEX commerce_rollup_kept_zone_waiting ON commerce_rollup_kept_zone (org_id) WHERE state = 'waiting'");
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP INDEX IF EXISTS commerce_rollup_kept_zone_waiting');
  await db.raw("DELETE FROM commerce_rollup_kept_zone WHERE state = 'waiting'");
  await db.raw('ALTER TABLE commerce_rollup_kept_zone DROP CONSTRAINT commerce_rollup_kept_zone_state_check');
  await db.raw("ALTER TABLE commerce_rollup_kept_zone ADD CONSTRAINT commerce_rollup_kept_zone_state_check CHECK (state IN ('pending', 'ready', 'unknown'))");
  await db.raw('ALTER TABLE commerce_rollup_kept_zone DROP COLUMN last_asked_on');
}
