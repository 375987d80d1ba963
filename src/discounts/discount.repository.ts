/** Storage of coupons, promotion codes and redemptions (migration 0340). The only knex user of src/discounts. */
import type { Knex } from 'knex';
import type { Coupon, PromotionCode, Redemption } from './discount.model.js';
import { codeKey } from './discount.model.js';

interface CouponRow {
  id: string;
  org_id: string;
  name: string;
  percent_off: string | number | null;
  amount_off: string | number | null;
  currency: string | null;
  duration: Coupon['duration'];
  duration_in_periods: number | null;
  max_redemptions: number | null;
  times_redeemed: number;
  redeem_by: Date | null;
  product_ids: string[] | string | null;
  created_at: Date;
  updated_at: Date;
}

interface PromotionCodeRow {
  id: string;
  org_id: string;
  coupon_id: string;
  code: string;
  code_key: string;
  active: boolean;
  max_redemptions: number | null;
  times_redeemed: number;
  expires_at: Date | null;
  first_time_transaction: boolean;
  once_per_customer: boolean;
  created_at: Date;
  updated_at: Date;
}

/** "20.00" → "20", "12.50" → "12.5". */
const percentText = (v: string | number | null): string | null => {
  if (v === null) return null;
  const text = typeof v === 'number' ? String(v) : v;
  return text.includes('.') ? text.replace(/0+$/, '').replace(/\.$/, '') : text;
};

const toCoupon = (r: CouponRow): Coupon => ({
  id: r.id,
  orgId: r.org_id,
  name: r.name,
  percentOff: percentText(r.percent_off),
  amountOff: r.amount_off === null ? null : Number(r.amount_off),
  currency: r.currency,
  duration: r.duration,
  durationInPeriods: r.duration_in_periods,
  maxRedemptions: r.max_redemptions,
  timesRedeemed: r.times_redeemed,
  redeemBy: r.redeem_by ? new Date(r.redeem_by) : null,
  productIds: typeof r.product_ids === 'string' ? (JSON.parse(r.product_ids) as string[]) : r.product_ids,
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

const toPromotionCode = (r: PromotionCodeRow): PromotionCode => ({
  id: r.id,
  orgId: r.org_id,
  couponId: r.coupon_id,
  code: r.code,
  active: r.active,
  maxRedemptions: r.max_redemptions,
  timesRedeemed: r.times_redeemed,
  expiresAt: r.expires_at ? new Date(r.expires_at) : null,
  firstTimeTransaction: r.first_time_transaction,
  oncePerCustomer: r.once_per_customer,
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

export interface DiscountStores {
  insertCoupon(c: Coupon): Promise<void>;
  findCoupon(orgId: string, id: string): Promise<Coupon | undefined>;
  listCoupons(orgId: string, limit: number): Promise<Coupon[]>;
  /** False (nothing written) when the organization has the code already, in any case. */
  insertPromotionCode(p: PromotionCode): Promise<boolean>;
  findPromotionCodeByCode(orgId: string, code: string): Promise<PromotionCode | undefined>;
  listPromotionCodes(orgId: string, couponId: string | undefined, limit: number): Promise<PromotionCode[]>;
  /** Whether the organization has any order of a customer with this e-mail (any case). */
  hasOrders(orgId: string, email: string): Promise<boolean>;
  /** Whether this e-mail (lowercased) already redeemed the promotion code. */
  hasRedeemed(promotionCodeId: string, onceKey: string): Promise<boolean>;
  findRedemption(checkoutSessionId: string): Promise<Redemption | undefined>;
  /** Inserts the redemption unless one exists for its session or (once per customer) its e-mail: false then. */
  insertRedemption(r: Redemption): Promise<boolean>;
  /** times_redeemed + 1 while under the limit and not past redeem_by: false when refused (nothing written). */
  incrementCoupon(id: string, now: Date): Promise<boolean>;
  /** times_redeemed + 1 while active, under the limit and not expired: false when refused. */
  incrementPromotionCode(id: string, now: Date): Promise<boolean>;
  /** Deletes the session's redemption and returns it; undefined when it has none or it was released already (migration 0356's `released_at`: its counters are down). */
  deleteRedemption(checkoutSessionId: string): Promise<Redemption | undefined>;
  /**
   * Locks a checkout session's row (FOR UPDATE) and reads the ids of its discount: null without
   * one, undefined when the session does not exist or is no longer open (CREATED).
   */
  lockSessionDiscount(checkoutSessionId: string): Promise<{ couponId: string; promotionCodeId: string | null } | null | undefined>;
  /** Locks coupon rows, then promotion code rows, each in id order (FOR UPDATE). */
  lockCounters(couponIds: readonly string[], promotionCodeIds: readonly string[]): Promise<void>;
  /** Deletes the session's redemption that was given back already (its counters are down): nothing else changes. */
  deleteReleasedRedemption(checkoutSessionId: string): Promise<void>;
  /** times_redeemed − 1 (never below 0): a redemption given back. */
  decrementCoupon(id: string, now: Date): Promise<void>;
  decrementPromotionCode(id: string, now: Date): Promise<void>;
}

export class KnexDiscountRepository implements DiscountStores {
  constructor(private readonly db: Knex) {}

  async insertCoupon(c: Coupon): Promise<void> {
    await this.db('coupons').insert({
      id: c.id,
      org_id: c.orgId,
      name: c.name,
      percent_off: c.percentOff,
      amount_off: c.amountOff,
      currency: c.currency,
      duration: c.duration,
      duration_in_periods: c.durationInPeriods,
      max_redemptions: c.maxRedemptions,
      times_redeemed: c.timesRedeemed,
      redeem_by: c.redeemBy,
      product_ids: c.productIds === null ? null : JSON.stringify(c.productIds),
      created_at: c.createdAt,
      updated_at: c.updatedAt,
    });
  }

  async findCoupon(orgId: string, id: string): Promise<Coupon | undefined> {
    const row = await this.db<CouponRow>('coupons').where({ org_id: orgId, id }).first();
    return row ? toCoupon(row) : undefined;
  }

  async listCoupons(orgId: string, limit: number): Promise<Coupon[]> {
    const rows = await this.db<CouponRow>('coupons').where({ org_id: orgId }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(limit);
    return rows.map(toCoupon);
  }

  async insertPromotionCode(p: PromotionCode): Promise<boolean> {
    const rows = await this.db('promotion_codes')
      .insert({
        id: p.id,
        org_id: p.orgId,
        coupon_id: p.couponId,
        code: p.code,
        code_key: codeKey(p.code),
        active: p.active,
        max_redemptions: p.maxRedemptions,
        times_redeemed: p.timesRedeemed,
        expires_at: p.expiresAt,
        first_time_transaction: p.firstTimeTransaction,
        once_per_customer: p.oncePerCustomer,
        created_at: p.createdAt,
        updated_at: p.updatedAt,
      })
      .onConflict(['org_id', 'code_key'])
      .ignore()
      .returning('id');
    return rows.length === 1;
  }

  async findPromotionCodeByCode(orgId: string, code: string): Promise<PromotionCode | undefined> {
    const row = await this.db<PromotionCodeRow>('promotion_codes').where({ org_id: orgId, code_key: codeKey(code) }).first();
    return row ? toPromotionCode(row) : undefined;
  }

  async listPromotionCodes(orgId: string, couponId: string | undefined, limit: number): Promise<PromotionCode[]> {
    const q = this.db<PromotionCodeRow>('promotion_codes').where({ org_id: orgId });
    if (couponId) q.andWhere({ coupon_id: couponId });
    const rows = await q.orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(limit);
    return rows.map(toPromotionCode);
  }

  async hasOrders(orgId: string, email: string): Promise<boolean> {
    const row = await this.db('orders as o')
      .join('customers as c', 'c.id', 'o.customer_id')
      .where('o.org_id', orgId)
      .whereRaw('lower(c.email) = lower(?)', [email])
      .first(this.db.raw('1 as one'));
    return row !== undefined;
  }

  async hasRedeemed(promotionCodeId: string, onceKey: string): Promise<boolean> {
    const row = await this.db('discount_redemptions').where({ promotion_code_id: promotionCodeId, once_key: onceKey }).first('id');
    return row !== undefined;
  }

  async findRedemption(checkoutSessionId: string): Promise<Redemption | undefined> {
    const r = await this.db('discount_redemptions').where({ checkout_session_id: checkoutSessionId }).first();
    return r ? toRedemption(r as RedemptionRow) : undefined;
  }

  async insertRedemption(r: Redemption): Promise<boolean> {
    // ON CONFLICT without a target: the session's unique key and the once-per-customer index alike.
    const rows = await this.db('discount_redemptions')
      .insert({
        id: r.id,
        org_id: r.orgId,
        coupon_id: r.couponId,
        promotion_code_id: r.promotionCodeId,
        checkout_session_id: r.checkoutSessionId,
        customer_email: r.customerEmail,
        once_key: r.onceKey,
        created_at: r.createdAt,
      })
      .onConflict()
      .ignore()
      .returning('id');
    return rows.length === 1;
  }

  async incrementCoupon(id: string, now: Date): Promise<boolean> {
    const n = await this.db('coupons')
      .where({ id })
      .andWhere((w) => w.whereNull('max_redemptions').orWhereRaw('times_redeemed < max_redemptions'))
      .andWhere((w) => w.whereNull('redeem_by').orWhere('redeem_by', '>', now))
      .update({ times_redeemed: this.db.raw('times_redeemed + 1'), updated_at: now });
    return n === 1;
  }

  async deleteRedemption(checkoutSessionId: string): Promise<Redemption | undefined> {
    const rows = (await this.db('discount_redemptions').where({ checkout_session_id: checkoutSessionId }).whereNull('released_at').delete().returning('*')) as RedemptionRow[];
    return rows[0] ? toRedemption(rows[0]) : undefined;
  }

  async lockSessionDiscount(checkoutSessionId: string): Promise<{ couponId: string; promotionCodeId: string | null } | null | undefined> {
    // The checkout's table, read here so the redemption and the session's discount change under one lock (the location step, issue 39).
    const row = (await this.db('checkout_sessions').where({ id: checkoutSessionId, status: 'CREATED' }).forUpdate().first('pricing')) as { pricing: unknown } | undefined;
    if (!row) return undefined;
    const pricing = (typeof row.pricing === 'string' ? JSON.parse(row.pricing) : row.pricing) as { discount?: { couponId: string; promotionCodeId?: string | null } };
    return pricing.discount ? { couponId: pricing.discount.couponId, promotionCodeId: pricing.discount.promotionCodeId ?? null } : null;
  }

  async lockCounters(couponIds: readonly string[], promotionCodeIds: readonly string[]): Promise<void> {
    if (couponIds.length > 0) await this.db('coupons').whereIn('id', [...new Set(couponIds)]).orderBy('id').forUpdate().select('id');
    if (promotionCodeIds.length > 0) await this.db('promotion_codes').whereIn('id', [...new Set(promotionCodeIds)]).orderBy('id').forUpdate().select('id');
  }

  async deleteReleasedRedemption(checkoutSessionId: string): Promise<void> {
    await this.db('discount_redemptions').where({ checkout_session_id: checkoutSessionId }).whereNotNull('released_at').delete();
  }

  async decrementCoupon(id: string, now: Date): Promise<void> {
    await this.db('coupons').where({ id }).andWhere('times_redeemed', '>', 0).update({ times_redeemed: this.db.raw('times_redeemed - 1'), updated_at: now });
  }

  async decrementPromotionCode(id: string, now: Date): Promise<void> {
    await this.db('promotion_codes').where({ id }).andWhere('times_redeemed', '>', 0).update({ times_redeemed: this.db.raw('times_redeemed - 1'), updated_at: now });
  }

  async incrementPromotionCode(id: string, now: Date): Promise<boolean> {
    const n = await this.db('promotion_codes')
      .where({ id, active: true })
      .andWhere((w) => w.whereNull('max_redemptions').orWhereRaw('times_redeemed < max_redemptions'))
      .andWhere((w) => w.whereNull('expires_at').orWhere('expires_at', '>', now))
      .update({ times_redeemed: this.db.raw('times_redeemed + 1'), updated_at: now });
    return n === 1;
  }
}

interface RedemptionRow {
  id: string;
  org_id: string;
  coupon_id: string;
  promotion_code_id: string | null;
  checkout_session_id: string;
  customer_email: string;
  once_key: string | null;
  created_at: Date;
  released_at?: Date | null;
}

const toRedemption = (r: RedemptionRow): Redemption => ({
  id: r.id,
  orgId: r.org_id,
  couponId: r.coupon_id,
  promotionCodeId: r.promotion_code_id,
  checkoutSessionId: r.checkout_session_id,
  customerEmail: r.customer_email,
  onceKey: r.once_key,
  createdAt: new Date(r.created_at),
  releasedAt: r.released_at ? new Date(r.released_at) : null,
});
