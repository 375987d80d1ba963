/**
 * The commerce rollups' applier (migration 0260): folds the oldest queued changes
 * (commerce_metric_changes, appended by the commerce tables' triggers) into the quarter-hour, hour
 * and day rollups and deletes them, in one statement, under a transaction-level advisory lock (one
 * applier at a time; a pass that does not get it does nothing). Sums commute, so the order of the
 * changes does not matter; a reader sees a change either queued or folded, never both (one
 * statement, one snapshot). Changes of an organization that no longer exists are dropped.
 *
 * Migration 0370 adds the organization's local days (commerce_rollup_local_day, for the zone of
 * commerce_rollup_zone when 'ready'): the same statement folds the changes into them, each quarter
 * to its local date. A zone asked for ('pending': a new organization's or a changed time zone) is
 * built from the quarter rows, under the same lock, so no fold runs meanwhile: its days are then
 * exactly the quarters folded so far, and later folds add the rest.
 *
 * Migration 0440 keeps local days the same way for up to 3 other zones per organization that its
 * callers asked for (commerce_rollup_kept_zone, commerce_rollup_zone_day): built from the quarters
 * under the same lock when asked ('pending' → 'ready'), folded by the same statement afterwards.
 * Migration 0460: a zone asked while 3 are kept waits ('waiting'); under the same lock the job
 * replaces the least recently asked kept zone by it once that one is idle (not asked for more than
 * KEPT_ZONE_IDLE_DAYS), and forgets waiting zones idle as long.
 */
import type { Knex } from 'knex';
import { systemClock, type Clock } from '../kernel/clock.js';
import { FIGURES, KEPT_ZONE_IDLE_DAYS, KEPT_ZONES, utcDate } from './commerce-metrics.repository.js';

const APPLIER_LOCK = 'kassa:commerce-rollups';
const ORIGIN = "timestamptz '2000-01-01 00:00:00+00'";
const COLUMNS = FIGURES.join(', ');
const SUMS = FIGURES.map((f) => `sum(${f})::bigint AS ${f}`).join(', ');
const ADD = FIGURES.map((f) => `${f} = t.${f} + excluded.${f}`).join(', ');

const upsert = (table: string, bucket: string) => `INSERT INTO ${table} AS t (org_id, bucket, currency, ${COLUMNS})
    SELECT org_id, ${bucket}, currency, ${SUMS} FROM merged GROUP BY 1, 2, 3
    ON CONFLICT (org_id, bucket, currency) DO UPDATE SET ${ADD}`;

/** The fold of the oldest `limit` queued changes (exported for scripts/bench/kept-zone-writes.ts). */
export const APPLY = `WITH batch AS (
    DELETE FROM commerce_metric_changes WHERE id IN (SELECT id FROM commerce_metric_changes ORDER BY id LIMIT ?)
    RETURNING org_id, bucket, currency, ${COLUMNS}),
  merged AS (
    SELECT org_id, bucket, currency, ${SUMS} FROM batch
     WHERE EXISTS (SELECT 1 FROM organizations o WHERE o.id = batch.org_id) GROUP BY 1, 2, 3),
  quarter AS (${upsert('commerce_rollup_quarter', 'bucket')} RETURNING 1),
  hour AS (${upsert('commerce_rollup_hour', `date_bin('1 hour', bucket, ${ORIGIN})`)} RETURNING 1),
  day AS (${upsert('commerce_rollup_day', `date_bin('1 day', bucket, ${ORIGIN})`)} RETURNING 1),
  local_day AS (INSERT INTO commerce_rollup_local_day AS t (org_id, day, currency, ${COLUMNS})
    SELECT m.org_id, (m.bucket AT TIME ZONE z.time_zone)::date, m.currency, ${FIGURES.map((f) => `sum(m.${f})::bigint`).join(', ')}
      FROM merged m JOIN commerce_rollup_zone z ON z.org_id = m.org_id AND z.state = 'ready' GROUP BY 1, 2, 3
    ON CONFLICT (org_id, day, currency) DO UPDATE SET ${ADD} RETURNING 1),
  zone_day AS (INSERT INTO commerce_rollup_zone_day AS t (org_id, time_zone, day, currency, ${COLUMNS})
    SELECT m.org_id, z.time_zone, (m.bucket AT TIME ZONE z.time_zone)::date, m.currency, ${FIGURES.map((f) => `sum(m.${f})::bigint`).join(', ')}
      FROM merged m JOIN commerce_rollup_kept_zone z ON z.org_id = m.org_id AND z.state = 'ready' GROUP BY 1, 2, 3, 4
    ON CONFLICT (org_id, time_zone, day, currency) DO UPDATE SET ${ADD} RETURNING 1)
  SELECT (SELECT count(*) FROM batch) AS applied,
         (SELECT count(*) FROM quarter) + (SELECT count(*) FROM hour) + (SELECT count(*) FROM day) + (SELECT count(*) FROM local_day)
           + (SELECT count(*) FROM zone_day) AS written`;

/** A pending zone's local days, from every quarter folded so far (the old days deleted first). */
const BUILD = `INSERT INTO commerce_rollup_local_day (org_id, day, currency, ${COLUMNS})
    SELECT org_id, (bucket AT TIME ZONE ?)::date, currency, ${SUMS} FROM commerce_rollup_quarter WHERE org_id = ? GROUP BY 1, 2, 3`;

/** A kept zone's local days (migration 0440), from every quarter folded so far. */
const BUILD_KEPT = `INSERT INTO commerce_rollup_zone_day (org_id, time_zone, day, currency, ${COLUMNS})
    SELECT org_id, ?::text, (bucket AT TIME ZONE ?)::date, currency, ${SUMS} FROM commerce_rollup_quarter WHERE org_id = ? GROUP BY 1, 2, 3, 4`;

/** The queue's applier, for the job (src/commerce-metrics/rollups.job.ts). */
export interface CommerceRollupRepository {
  /** One chunk: the number of queued changes applied, -1 when another applier holds the lock. */
  applyQueued(limit: number): Promise<number>;
  /** Builds the local days of up to `limit` organizations whose zone is pending: the number built or found unknown, -1 when another applier holds the lock. */
  buildZones(limit: number): Promise<number>;
  /** Builds up to `limit` pending kept zones (another zone an organization's callers asked for, migration 0440): the number built or found unknown, -1 when another applier holds the lock. */
  buildKeptZones(limit: number): Promise<number>;
  /**
   * Admits waiting zones (migration 0460) of up to `limit` organizations that have room or an idle
   * kept zone, replacing the least recently asked idle ones: the number of organizations, -1 when
   * another applier holds the lock.
   */
  admitWaitingZones(limit: number): Promise<number>;
  /** Everything queued now, and every pending zone (tests, data generators). */
  drain(chunk: number): Promise<number>;
}

/** A name Intl accepted but this database's time zone table does not know: never built, never read (tried in a savepoint). */
function zoneKnown(trx: Knex.Transaction, timeZone: string): Promise<boolean> {
  return trx
    .transaction(async (sp) => {
      await sp.raw("SELECT timestamptz '2000-01-01 00:00:00+00' AT TIME ZONE ?", [timeZone]);
      return true;
    })
    .catch(() => false);
}

export class KnexCommerceRollupRepository implements CommerceRollupRepository {
  /** `clock`: today, against which a kept zone's last ask is idle. */
  constructor(private readonly db: Knex, private readonly clock: Clock = systemClock) {}

  applyQueued(limit: number): Promise<number> {
    return this.db.transaction(async (trx) => {
      const locked = await trx.raw('SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS ok', [APPLIER_LOCK]);
      if (!(locked.rows as Array<{ ok: boolean }>)[0]?.ok) return -1;
      const { rows } = await trx.raw(APPLY, [limit]);
      return Number((rows as Array<{ applied: string | number }>)[0]?.applied ?? 0);
    });
  }

  buildZones(limit: number): Promise<number> {
    return this.db.transaction(async (trx) => {
      const locked = await trx.raw('SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS ok', [APPLIER_LOCK]);
      if (!(locked.rows as Array<{ ok: boolean }>)[0]?.ok) return -1;
      // The zone row is locked first (the organizations trigger takes it before the day rows too).
      const { rows } = await trx.raw(
        "SELECT org_id, time_zone FROM commerce_rollup_zone WHERE state = 'pending' ORDER BY requested_at LIMIT ? FOR UPDATE SKIP LOCKED",
        [limit],
      );
      for (const zone of rows as Array<{ org_id: string; time_zone: string }>) {
        const known = await zoneKnown(trx, zone.time_zone);
        await trx.raw('DELETE FROM commerce_rollup_local_day WHERE org_id = ?', [zone.org_id]);
        if (known) await trx.raw(BUILD, [zone.time_zone, zone.org_id]);
        await trx('commerce_rollup_zone').where({ org_id: zone.org_id }).update({ state: known ? 'ready' : 'unknown' });
      }
      return rows.length as number;
    });
  }

  buildKeptZones(limit: number): Promise<number> {
    return this.db.transaction(async (trx) => {
      const locked = await trx.raw('SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS ok', [APPLIER_LOCK]);
      if (!(locked.rows as Array<{ ok: boolean }>)[0]?.ok) return -1;
      const { rows } = await trx.raw(
        "SELECT org_id, time_zone FROM commerce_rollup_kept_zone WHERE state = 'pending' ORDER BY requested_at LIMIT ? FOR UPDATE SKIP LOCKED",
        [limit],
      );
      for (const zone of rows as Array<{ org_id: string; time_zone: string }>) {
        const known = await zoneKnown(trx, zone.time_zone);
        await trx('commerce_rollup_zone_day').where({ org_id: zone.org_id, time_zone: zone.time_zone }).del();
        if (known) await trx.raw(BUILD_KEPT, [zone.time_zone, zone.time_zone, zone.org_id]);
        await trx('commerce_rollup_kept_zone').where({ org_id: zone.org_id, time_zone: zone.time_zone }).update({ state: known ? 'ready' : 'unknown' });
      }
      return rows.length as number;
    });
  }

  admitWaitingZones(limit: number): Promise<number> {
    return this.db.transaction(async (trx) => {
      const locked = await trx.raw('SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS ok', [APPLIER_LOCK]);
      if (!(locked.rows as Array<{ ok: boolean }>)[0]?.ok) return -1;
      const today = utcDate(this.clock.now());
      // Idle: last asked before this date (asked on a Monday, still kept all the next Monday).
      const idleBefore = utcDate(new Date(Date.parse(`${today}T00:00:00Z`) - KEPT_ZONE_IDLE_DAYS * 86_400_000));
      await trx.raw("DELETE FROM commerce_rollup_kept_zone WHERE state = 'waiting' AND last_asked_on < ?::date", [idleBefore]);
      const { rows: orgs } = await trx.raw(
        `SELECT DISTINCT w.org_id FROM commerce_rollup_kept_zone w
          WHERE w.state = 'waiting'
            AND ((SELECT count(*) FROM commerce_rollup_kept_zone k WHERE k.org_id = w.org_id AND k.state <> 'waiting') < ?
                 OR EXISTS (SELECT 1 FROM commerce_rollup_kept_zone k WHERE k.org_id = w.org_id AND k.state <> 'waiting' AND k.last_asked_on < ?::date))
          ORDER BY 1 LIMIT ?`,
        [KEPT_ZONES, idleBefore, limit],
      );
      for (const { org_id: orgId } of orgs as Array<{ org_id: string }>) {
        // The readers' lock on the organization's zones (they count them before asking for one).
        await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`kassa:commerce-kept-zones:${orgId}`]);
        const { rows: zones } = await trx.raw(
          "SELECT time_zone, state, to_char(last_asked_on, 'YYYY-MM-DD') AS asked FROM commerce_rollup_kept_zone WHERE org_id = ? ORDER BY time_zone COLLATE \"C\" FOR UPDATE",
          [orgId],
        );
        const all = zones as Array<{ time_zone: string; state: string; asked: string }>;
        // Kept, least recently asked first; waiting, most recently asked first (a day's ties by name).
        const kept = all.filter((z) => z.state !== 'waiting').sort((a, b) => (a.asked < b.asked ? -1 : a.asked > b.asked ? 1 : 0));
        const waiting = all.filter((z) => z.state === 'waiting').sort((a, b) => (a.asked > b.asked ? -1 : a.asked < b.asked ? 1 : 0));
        for (const zone of waiting) {
          if (kept.length >= KEPT_ZONES) {
            if (!(kept[0]!.asked < idleBefore)) break;
            // Its days go with it (ON DELETE CASCADE); no fold runs meanwhile (the applier's lock).
            await trx('commerce_rollup_kept_zone').where({ org_id: orgId, time_zone: kept.shift()!.time_zone }).del();
          }
          // Admitted counts as asked today: a slot changes at most once per idle period.
          await trx.raw("UPDATE commerce_rollup_kept_zone SET state = 'pending', last_asked_on = ?::date, requested_at = now() WHERE org_id = ? AND time_zone = ?", [
            today, orgId, zone.time_zone,
          ]);
          kept.push({ ...zone, state: 'pending', asked: today });
        }
      }
      return orgs.length as number;
    });
  }

  async drain(chunk: number): Promise<number> {
    let total = 0;
    const retry = () => new Promise((resolve) => setTimeout(resolve, 20));
    for (;;) {
      const n = await this.applyQueued(chunk);
      if (n === -1) {
        await retry();
        continue;
      }
      total += n;
      if (n < chunk) break;
    }
    for (;;) {
      const z = await this.buildZones(10);
      if (z === -1) await retry();
      else if (z === 0) break;
    }
    for (;;) {
      const z = await this.admitWaitingZones(10);
      if (z === -1) await retry();
      else if (z === 0) break;
    }
    for (;;) {
      const z = await this.buildKeptZones(10);
      if (z === -1) await retry();
      else if (z === 0) return total;
    }
  }
}
