/** Coupons, promotion codes and redemptions (issue 39, item 2; migration 0340). */
import type { CouponDuration } from '../commerce/discounts.js';

export interface Coupon {
  id: string;
  orgId: string;
  name: string;
  percentOff: string | null;
  amountOff: number | null;
  currency: string | null;
  duration: CouponDuration;
  durationInPeriods: number | null;
  maxRedemptions: number | null;
  timesRedeemed: number;
  redeemBy: Date | null;
  productIds: string[] | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface PromotionCode {
  id: string;
  orgId: string;
  couponId: string;
  code: string;
  active: boolean;
  maxRedemptions: number | null;
  timesRedeemed: number;
  expiresAt: Date | null;
  firstTimeTransaction: boolean;
  oncePerCustomer: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export interface Redemption {
  id: string;
  orgId: string;
  couponId: string;
  promotionCodeId: string | null;
  checkoutSessionId: string;
  customerEmail: string;
  /** The buyer's e-mail lowercased, for codes limited to once per customer; else null. */
  onceKey: string | null;
  createdAt: Date;
  /** When it was given back (migration 0356: counters lowered, no longer counted); absent or null while counted. */
  releasedAt?: Date | null;
}

/** The case-insensitive key of a promotion code. */
export const codeKey = (code: string): string => code.trim().toLowerCase();
