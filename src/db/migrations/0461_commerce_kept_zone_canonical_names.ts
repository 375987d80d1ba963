/**
 * Kept zones under one spelling (issue 40): commerce metrics now read a requested zone under its
 * canonical spelling (src/kernel/time-zone.ts, the one organizations' zones are stored under), so
 * a kept zone recorded under an alias or another letter case (`Asia/Kolkata` where Node 20's Intl
 * says `Asia/Calcutta`, `europe/paris`) would never be read again while holding one of the
 * organization's places. Such rows are removed with their days (ON DELETE CASCADE): kept days are
 * derived from the orders, and the zone is kept again under its canonical name when next asked.
 * Organizations' own zones need nothing: the settings service has always stored the canonical one.
 */
import type { Knex } from 'knex';
import { canonicalTimeZone } from '../../kernel/time-zone.js';

export async function up(db: Knex): Promise<void> {
  const names = ((await db.raw('SELECT DISTINCT time_zone FROM commerce_rollup_kept_zone')).rows as Array<{ time_zone: string }>).map((r) => r.time_zone);
  const stale = names.filter((name) => canonicalTimeZone(name) !== name);
  for (const name of stale) await db.raw('DELETE FROM commerce_rollup_kept_zone WHERE time_zone = ?', [name]);
}

export async function down(): Promise<void> {
  // Nothing to restore: the removed zones are kept again when asked.
}
