/** The merchant API's coupons and promotion codes (issue 39): `/v1/coupons`, `/v1/promotion-codes`. */
import type { MerchantHandlers } from '../handler-maps.js';
import { iso } from '../kernel/present.js';
import type { Coupon, PromotionCode } from './discount.model.js';
import type { DiscountService } from './discount.service.js';

type DiscountHandlers = Pick<MerchantHandlers, 'listCoupons' | 'createCoupon' | 'getCoupon' | 'listPromotionCodes' | 'createPromotionCode'>;

export const presentCoupon = (discounts: DiscountService) => (c: Coupon) => ({
  id: c.id,
  name: c.name,
  percentOff: c.percentOff,
  amountOff: c.amountOff,
  currency: c.currency,
  duration: c.duration,
  durationInPeriods: c.durationInPeriods,
  maxRedemptions: c.maxRedemptions,
  timesRedeemed: c.timesRedeemed,
  redeemBy: c.redeemBy ? iso(c.redeemBy) : null,
  productIds: c.productIds,
  valid: discounts.isValid(c),
  createdAt: iso(c.createdAt),
});

export const presentPromotionCode = (p: PromotionCode) => ({
  id: p.id,
  code: p.code,
  couponId: p.couponId,
  active: p.active,
  maxRedemptions: p.maxRedemptions,
  timesRedeemed: p.timesRedeemed,
  expiresAt: p.expiresAt ? iso(p.expiresAt) : null,
  firstTimeTransaction: p.firstTimeTransaction,
  oncePerCustomer: p.oncePerCustomer,
  createdAt: iso(p.createdAt),
});

export function createDiscountHandlers(discounts: DiscountService): DiscountHandlers {
  const coupon = presentCoupon(discounts);
  return {
    listCoupons: async ({ auth }) => ({ status: 200, body: { success: true, message: 'OK', data: { records: (await discounts.listCoupons(auth.orgId)).map(coupon) } } }),
    createCoupon: async ({ auth, body }) => ({ status: 201, body: { success: true, message: 'Coupon created', data: coupon(await discounts.createCoupon(auth.orgId, body)) } }),
    getCoupon: async ({ auth, params }) => ({ status: 200, body: { success: true, message: 'OK', data: coupon(await discounts.getCoupon(auth.orgId, params.id)) } }),
    listPromotionCodes: async ({ auth, query }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: { records: (await discounts.listPromotionCodes(auth.orgId, query.couponId)).map(presentPromotionCode) } },
    }),
    createPromotionCode: async ({ auth, body }) => ({
      status: 201,
      body: { success: true, message: 'Promotion code created', data: presentPromotionCode(await discounts.createPromotionCode(auth.orgId, body)) },
    }),
  };
}
