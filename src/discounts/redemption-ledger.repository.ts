/**
 * Giving back and taking back redemptions (issue 39, migration 0356), in the caller's transaction —
 * the checkout session's expiry or its late payment, each under the session's row lock, so the two
 * serialize per session. The claim itself is discount.service.ts `claim` (before the charge).
 */
import type { Knex } from 'knex';
import type { RedemptionLedger } from '../commerce/stores.js';

export class KnexRedemptionLedger implements RedemptionLedger {
  constructor(private readonly db: Knex | Knex.Transaction) {}

  async releaseUnpaid(checkoutSessionIds: readonly string[], now: Date): Promise<number> {
    if (checkoutSessionIds.length === 0) return 0;
    const marks = checkoutSessionIds.map(() => '?').join(', ');
    // One statement: the rows released (once: `released_at IS NULL`, re-checked after a concurrent
    // releaser's commit) and the counters lowered by exactly those rows. A session with an order that
    // is not FAILED (paid, pending, refunded) keeps its redemption: the discount was charged.
    const result = await this.db.raw(
      `WITH released AS (
         UPDATE discount_redemptions r SET released_at = ?, once_key = NULL
         WHERE r.checkout_session_id IN (${marks}) AND r.released_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.checkout_session_id = r.checkout_session_id AND o.status <> 'FAILED')
         RETURNING r.coupon_id, r.promotion_code_id
       ), coupon_counts AS (
         SELECT coupon_id AS id, count(*)::int AS n FROM released GROUP BY coupon_id
       ), code_counts AS (
         SELECT promotion_code_id AS id, count(*)::int AS n FROM released WHERE promotion_code_id IS NOT NULL GROUP BY promotion_code_id
       ), coupons_lowered AS (
         UPDATE coupons c SET times_redeemed = c.times_redeemed - k.n, updated_at = ? FROM coupon_counts k WHERE c.id = k.id RETURNING c.id
       ), codes_lowered AS (
         UPDATE promotion_codes p SET times_redeemed = p.times_redeemed - k.n, updated_at = ? FROM code_counts k WHERE p.id = k.id RETURNING p.id
       )
       SELECT (SELECT count(*) FROM released)::int AS released, (SELECT count(*) FROM coupons_lowered)::int AS coupons, (SELECT count(*) FROM codes_lowered)::int AS codes`,
      [now, ...checkoutSessionIds, now, now],
    );
    const row = (result.rows as { released: number }[])[0];
    return Number(row?.released ?? 0);
  }

  async takeBack(checkoutSessionId: string, now: Date): Promise<'held' | 'taken_back' | 'refused' | 'none'> {
    const r = await this.db('discount_redemptions').where({ checkout_session_id: checkoutSessionId }).forUpdate().first('id', 'coupon_id', 'promotion_code_id', 'released_at');
    if (!r) return 'none';
    if (r.released_at === null) return 'held';
    // The limits as a claim checks them (not the expiry: the buyer was charged the discount before it).
    const coupon = await this.db('coupons')
      .where({ id: r.coupon_id })
      .andWhere((w) => w.whereNull('max_redemptions').orWhereRaw('times_redeemed < max_redemptions'))
      .update({ times_redeemed: this.db.raw('times_redeemed + 1'), updated_at: now });
    if (coupon !== 1) return 'refused';
    if (r.promotion_code_id) {
      const code = await this.db('promotion_codes')
        .where({ id: r.promotion_code_id })
        .andWhere((w) => w.whereNull('max_redemptions').orWhereRaw('times_redeemed < max_redemptions'))
        .update({ times_redeemed: this.db.raw('times_redeemed + 1'), updated_at: now });
      if (code !== 1) {
        // The coupon's row is locked by the increment above: undo it exactly.
        await this.db('coupons').where({ id: r.coupon_id }).update({ times_redeemed: this.db.raw('times_redeemed - 1'), updated_at: now });
        return 'refused';
      }
    }
    await this.db('discount_redemptions').where({ id: r.id }).update({ released_at: null });
    return 'taken_back';
  }
}
