/**
 * What the orphan-claim sweep reads and writes (stripe-redemption-sweep.ts): redemptions claimed
 * for a checkout session Kassa never stored (the process died between the claim and the store).
 */
import type { Knex } from 'knex';
import { KnexRedemptionLedger } from '../discounts/redemption-ledger.repository.js';

export interface HeldClaim {
  id: string;
  orgId: string;
  checkoutSessionId: string;
  createdAt: Date;
}

export class KnexRedemptionSweepRepository {
  constructor(private readonly db: Knex) {}

  /** Claims still counted, made in [after, before), whose session row does not exist; oldest first. */
  async heldWithoutSession(after: Date, before: Date, limit: number): Promise<HeldClaim[]> {
    const rows = await this.db('discount_redemptions as r')
      .whereNull('r.released_at')
      .whereNull('r.orphan_kept_at')
      .where('r.created_at', '>=', after)
      .where('r.created_at', '<', before)
      .whereNotExists((q) => q.select(this.db.raw('1')).from('checkout_sessions as s').whereRaw('s.id = r.checkout_session_id'))
      .orderBy('r.created_at')
      .limit(limit)
      .select('r.id', 'r.org_id', 'r.checkout_session_id', 'r.created_at');
    return rows.map((r: { id: string; org_id: string; checkout_session_id: string; created_at: Date }) => ({ id: r.id, orgId: r.org_id, checkoutSessionId: r.checkout_session_id, createdAt: new Date(r.created_at) }));
  }

  /** Stripe's session for this claim was paid: the redemption stays counted and is not looked at again. */
  async keep(id: string, now: Date): Promise<void> {
    await this.db('discount_redemptions').where({ id }).whereNull('released_at').update({ orphan_kept_at: now });
  }

  /**
   * Gives the claim back unless its session was stored meanwhile: the redemption row is locked
   * first (a create storing its session late locks it too, checkout-session.service.ts
   * `storeClaimed`), then the session's existence is read by a statement of its own, which sees
   * a store committed while this waited for the lock. True when it was given back.
   */
  async releaseIfNoSession(checkoutSessionId: string, now: Date): Promise<boolean> {
    return this.db.transaction(async (trx) => {
      const row = await trx('discount_redemptions').where({ checkout_session_id: checkoutSessionId }).whereNull('released_at').whereNull('orphan_kept_at').forUpdate().first('id');
      if (!row) return false;
      const stored = await trx('checkout_sessions').where({ id: checkoutSessionId }).first('id');
      if (stored) return false;
      return (await new KnexRedemptionLedger(trx).releaseUnpaid([checkoutSessionId], now)) === 1;
    });
  }
}
