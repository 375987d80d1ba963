/**
 * Coupons and promotion codes (issue 39, item 2): creation and lists for the merchant API and the
 * console, the checks a checkout makes when a coupon or code is applied, and the redemption —
 * claimed once per checkout session before the card is charged, under conditional increments so
 * limits hold under concurrency (migration 0340's CHECKs hold them in the database too).
 */
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import { conflict, notFound, validationError } from '../kernel/errors.js';
import { formatMoney } from '../kernel/money.js';
import type { UnitOfWork } from '../kernel/unit-of-work.js';
import type { AppliedDiscount, CouponDuration } from '../commerce/discounts.js';
import { isFiatCurrency } from '../catalog/price-rules.js';
import type { Coupon, PromotionCode } from './discount.model.js';
import type { DiscountStores } from './discount.repository.js';

export interface CouponInput {
  name: string;
  percentOff?: string;
  amountOff?: number;
  currency?: string;
  duration: CouponDuration;
  durationInPeriods?: number;
  maxRedemptions?: number;
  redeemBy?: string;
  productIds?: string[];
}

export interface PromotionCodeInput {
  code: string;
  couponId: string;
  maxRedemptions?: number;
  expiresAt?: string;
  firstTimeTransaction?: boolean;
  oncePerCustomer?: boolean;
}

/** A coupon or code that cannot be used: `message` is for a human (page) and, with the field, for the API. */
export class DiscountRefusal extends Error {}

/** What a checkout buys, for the checks of a discount. */
export interface DiscountTarget {
  currency: string;
  productId: string | null;
  /** The buyer's e-mail when known (first-order and once-per-customer checks). */
  email?: string | null;
  /**
   * The code is redeemed before the buyer's e-mail can be known (a code the buyer types on the
   * Stripe rail's location step): a code limited per buyer is refused when `email` is absent.
   */
  buyerBeforeRedemption?: boolean;
}

export interface ProductDirectory {
  findProduct(orgId: string, productId: string): Promise<unknown>;
}

const LIST_LIMIT = 500;

export class DiscountService {
  constructor(
    private readonly uow: UnitOfWork<DiscountStores>,
    private readonly clock: Clock,
    private readonly products: ProductDirectory,
  ) {}

  async createCoupon(orgId: string, input: CouponInput): Promise<Coupon> {
    const now = this.clock.now();
    const name = input.name.trim();
    if (name.length === 0) throw validationError('body.name must not be blank');
    if ((input.percentOff === undefined) === (input.amountOff === undefined)) throw validationError('Give exactly one of body.percentOff and body.amountOff');
    if (input.percentOff !== undefined && !(Number(input.percentOff) > 0 && Number(input.percentOff) <= 100)) throw validationError('body.percentOff must be between 0.01 and 100');
    let currency: string | null = null;
    if (input.amountOff !== undefined) {
      if (!input.currency) throw validationError('body.currency is required with body.amountOff');
      currency = input.currency.toUpperCase();
      if (!isFiatCurrency(currency)) throw validationError(`body.currency ${currency} is not an ISO 4217 currency code`);
    } else if (input.currency !== undefined) throw validationError('body.currency goes with body.amountOff only');
    if ((input.duration === 'REPEATING') !== (input.durationInPeriods !== undefined)) throw validationError('body.durationInPeriods is required with duration REPEATING and not allowed otherwise');
    const redeemBy = input.redeemBy ? new Date(input.redeemBy) : null;
    if (redeemBy && redeemBy.getTime() <= now.getTime()) throw validationError('body.redeemBy must be in the future');
    const productIds = input.productIds ? [...new Set(input.productIds)] : null;
    for (const id of productIds ?? []) {
      if (!(await this.products.findProduct(orgId, id))) throw validationError(`body.productIds: ${id} is not a product of this organization`);
    }
    const coupon: Coupon = {
      id: newId('CPN'),
      orgId,
      name,
      percentOff: input.percentOff ?? null,
      amountOff: input.amountOff ?? null,
      currency,
      duration: input.duration,
      durationInPeriods: input.durationInPeriods ?? null,
      maxRedemptions: input.maxRedemptions ?? null,
      timesRedeemed: 0,
      redeemBy,
      productIds,
      createdAt: now,
      updatedAt: now,
    };
    await this.uow.stores.insertCoupon(coupon);
    return coupon;
  }

  async getCoupon(orgId: string, id: string): Promise<Coupon> {
    const coupon = await this.uow.stores.findCoupon(orgId, id);
    if (!coupon) throw notFound('Coupon');
    return coupon;
  }

  listCoupons(orgId: string): Promise<Coupon[]> {
    return this.uow.stores.listCoupons(orgId, LIST_LIMIT);
  }

  /** Valid: neither past `redeemBy` nor fully redeemed. */
  isValid(coupon: Coupon): boolean {
    const now = this.clock.now().getTime();
    return (coupon.redeemBy === null || coupon.redeemBy.getTime() > now) && (coupon.maxRedemptions === null || coupon.timesRedeemed < coupon.maxRedemptions);
  }

  async createPromotionCode(orgId: string, input: PromotionCodeInput): Promise<PromotionCode> {
    const now = this.clock.now();
    const coupon = await this.uow.stores.findCoupon(orgId, input.couponId);
    if (!coupon) throw validationError(`body.couponId ${input.couponId} is not a coupon of this organization`);
    const expiresAt = input.expiresAt ? new Date(input.expiresAt) : null;
    if (expiresAt && expiresAt.getTime() <= now.getTime()) throw validationError('body.expiresAt must be in the future');
    const code: PromotionCode = {
      id: newId('PROMO'),
      orgId,
      couponId: coupon.id,
      code: input.code.trim(),
      active: true,
      maxRedemptions: input.maxRedemptions ?? null,
      timesRedeemed: 0,
      expiresAt,
      firstTimeTransaction: input.firstTimeTransaction ?? false,
      oncePerCustomer: input.oncePerCustomer ?? false,
      createdAt: now,
      updatedAt: now,
    };
    if (!(await this.uow.stores.insertPromotionCode(code))) throw conflict(`The promotion code ${code.code} exists already in this organization (codes are case-insensitive)`);
    return code;
  }

  listPromotionCodes(orgId: string, couponId?: string): Promise<PromotionCode[]> {
    return this.uow.stores.listPromotionCodes(orgId, couponId, LIST_LIMIT);
  }

  /**
   * The discount a coupon id or a promotion code gives this purchase, checked now (the same
   * checks run again when it is redeemed). Throws DiscountRefusal with a human message.
   */
  async resolve(orgId: string, ref: { coupon?: string; promotionCode?: string }, target: DiscountTarget): Promise<AppliedDiscount> {
    const now = this.clock.now().getTime();
    let promotion: PromotionCode | undefined;
    let coupon: Coupon | undefined;
    if (ref.promotionCode !== undefined) {
      promotion = await this.uow.stores.findPromotionCodeByCode(orgId, ref.promotionCode);
      // The same words for a code that does not exist and one that is switched off: nothing to learn by guessing.
      if (!promotion || !promotion.active) throw new DiscountRefusal(`The promotion code ${ref.promotionCode.trim()} is not valid.`);
      if (promotion.expiresAt && promotion.expiresAt.getTime() <= now) throw new DiscountRefusal(`The promotion code ${promotion.code} has expired.`);
      if (promotion.maxRedemptions !== null && promotion.timesRedeemed >= promotion.maxRedemptions) throw new DiscountRefusal(`The promotion code ${promotion.code} has been used up.`);
      coupon = await this.uow.stores.findCoupon(orgId, promotion.couponId);
    } else {
      coupon = await this.uow.stores.findCoupon(orgId, ref.coupon ?? '');
      if (!coupon) throw new DiscountRefusal(`${ref.coupon} is not a coupon of this organization.`);
    }
    if (!coupon) throw new DiscountRefusal('This promotion code is not valid.');
    const label = promotion ? `The promotion code ${promotion.code}` : `The coupon ${coupon.name}`;
    if (coupon.redeemBy && coupon.redeemBy.getTime() <= now) throw new DiscountRefusal(`${label} has expired.`);
    if (coupon.maxRedemptions !== null && coupon.timesRedeemed >= coupon.maxRedemptions) throw new DiscountRefusal(`${label} has been used up.`);
    if (coupon.productIds !== null && (target.productId === null || !coupon.productIds.includes(target.productId))) throw new DiscountRefusal(`${label} does not apply to this product.`);
    if (coupon.currency !== null && coupon.currency !== target.currency.toUpperCase()) {
      throw new DiscountRefusal(`${label} is ${formatMoney(coupon.amountOff!, coupon.currency)} off, in ${coupon.currency}; this price is in ${target.currency.toUpperCase()}.`);
    }
    if (promotion && target.email) await this.checkBuyer(orgId, promotion, target.email);
    else if (promotion && target.buyerBeforeRedemption && (promotion.firstTimeTransaction || promotion.oncePerCustomer)) {
      throw new DiscountRefusal(`The promotion code ${promotion.code} is limited per customer and cannot be used on this checkout: ask the merchant for a checkout in your name.`);
    }
    return {
      couponId: coupon.id,
      name: coupon.name,
      promotionCodeId: promotion?.id ?? null,
      code: promotion?.code ?? null,
      percentOff: coupon.percentOff,
      amountOff: coupon.amountOff,
      currency: coupon.currency,
      duration: coupon.duration,
      durationInPeriods: coupon.durationInPeriods,
      productIds: coupon.productIds,
    };
  }

  private async checkBuyer(orgId: string, promotion: PromotionCode, email: string, stores: DiscountStores = this.uow.stores): Promise<void> {
    if (promotion.firstTimeTransaction && (await stores.hasOrders(orgId, email))) throw new DiscountRefusal(`The promotion code ${promotion.code} is for a first order only.`);
    if (promotion.oncePerCustomer && (await stores.hasRedeemed(promotion.id, email.trim().toLowerCase()))) throw new DiscountRefusal(`You have already used the promotion code ${promotion.code}.`);
  }

  /**
   * Gives back the redemption of a checkout session that will never be paid (on Stripe: its
   * Checkout Session expired unpaid, or Kassa could not hand it to Stripe): the row is deleted and
   * the coupon's and the code's counters go down, in one transaction. The delete is the guard: a
   * second call (a redelivered event) finds nothing and changes nothing. True when one was given back.
   */
  async release(checkoutSessionId: string): Promise<boolean> {
    const now = this.clock.now();
    return this.uow.transaction(async (tx) => {
      const redemption = await tx.deleteRedemption(checkoutSessionId);
      if (!redemption) return false;
      await tx.decrementCoupon(redemption.couponId, now);
      if (redemption.promotionCodeId) await tx.decrementPromotionCode(redemption.promotionCodeId, now);
      return true;
    });
  }

  /**
   * Redeems the session's discount before its payment: one redemption per session (a retry of
   * the same session finds its own), counted on the coupon and the code by conditional increments
   * in one transaction — a limit reached meanwhile (a concurrent buyer took the last one), an
   * expiry passed or a buyer check failing refuses it, with nothing written.
   */
  async claim(orgId: string, checkoutSessionId: string, discount: AppliedDiscount, email: string): Promise<void> {
    await this.uow.transaction(async (tx) => {
      const own = await tx.findRedemption(checkoutSessionId);
      if (own) return;
      await this.redeem(tx, orgId, checkoutSessionId, discount, email);
    });
  }

  /**
   * Makes the session's redemption the one of `discount` (none: no redemption), in one
   * transaction: a redemption of the same coupon and code is kept (counted once however often the
   * buyer goes back and forth); one of another discount is given back (deleted, counters down) and
   * the new one claimed as `claim` does, with its checks. The Stripe rail's location step, before
   * each Stripe Checkout Session it opens (issue 39, docs/discounts.md). DiscountRefusal when the
   * new one is refused: the transaction is rolled back, the old redemption stays as it was.
   */
  async reclaim(orgId: string, checkoutSessionId: string, discount: AppliedDiscount | null, email: string): Promise<'kept' | 'changed'> {
    const now = this.clock.now();
    return this.uow.transaction(async (tx) => {
      // Under the checkout session's row lock, and only while it still has the discount read: a
      // step that read an older discount (the code changed in another tab) touches nothing.
      const current = await tx.lockSessionDiscount(checkoutSessionId);
      if (current === undefined || (current?.couponId ?? null) !== (discount?.couponId ?? null) || (current?.promotionCodeId ?? null) !== (discount?.promotionCodeId ?? null)) return 'changed';
      const own = await tx.findRedemption(checkoutSessionId);
      if (own && !own.releasedAt && discount && own.couponId === discount.couponId && own.promotionCodeId === discount.promotionCodeId) return 'kept';
      // The counters this may lower and raise, locked in one order (coupons, then codes, each by id):
      // two buyers swapping codes the opposite way at once never wait on each other in a cycle.
      await tx.lockCounters([own?.couponId, discount?.couponId].filter((id): id is string => Boolean(id)), [own?.promotionCodeId, discount?.promotionCodeId].filter((id): id is string => Boolean(id)));
      if (own) {
        // Deleted whether counted or given back already (a given-back row's counters are down).
        const counted = await tx.deleteRedemption(checkoutSessionId);
        if (counted) {
          await tx.decrementCoupon(counted.couponId, now);
          if (counted.promotionCodeId) await tx.decrementPromotionCode(counted.promotionCodeId, now);
        } else {
          await tx.deleteReleasedRedemption(checkoutSessionId);
        }
      }
      if (discount) await this.redeem(tx, orgId, checkoutSessionId, discount, email);
      return 'kept';
    });
  }

  /** The claim's checks and counted insert, in the caller's transaction. */
  private async redeem(tx: DiscountStores, orgId: string, checkoutSessionId: string, discount: AppliedDiscount, email: string): Promise<void> {
    const now = this.clock.now();
    let onceKey: string | null = null;
    if (discount.promotionCodeId) {
      const promotion = await tx.findPromotionCodeByCode(orgId, discount.code ?? '');
      if (!promotion || promotion.id !== discount.promotionCodeId) throw new DiscountRefusal(`The promotion code ${discount.code} is not valid.`);
      // No e-mail yet (a Stripe checkout without customerEmail): a code limited per buyer cannot be checked.
      if (!email.trim() && (promotion.firstTimeTransaction || promotion.oncePerCustomer)) {
        throw new DiscountRefusal(`The promotion code ${promotion.code} is limited per buyer (${promotion.firstTimeTransaction ? 'first order only' : 'once per customer'}); on the Stripe card processor it needs the buyer's e-mail (customerEmail or customerId), because Stripe's page asks for it after Kassa has redeemed the code.`);
      }
      await this.checkBuyer(orgId, promotion, email, tx);
      if (promotion.oncePerCustomer) onceKey = email.trim().toLowerCase();
    }
    const inserted = await tx.insertRedemption({
      id: newId('RDM'),
      orgId,
      couponId: discount.couponId,
      promotionCodeId: discount.promotionCodeId,
      checkoutSessionId,
      customerEmail: email.trim(),
      onceKey,
      createdAt: now,
    });
    if (!inserted) {
      if (await tx.findRedemption(checkoutSessionId)) return;
      throw new DiscountRefusal(`You have already used the promotion code ${discount.code}.`);
    }
    const label = discount.code ? `The promotion code ${discount.code}` : `The coupon ${discount.name}`;
    if (!(await tx.incrementCoupon(discount.couponId, now))) throw new DiscountRefusal(`${label} has been used up or has expired.`);
    if (discount.promotionCodeId && !(await tx.incrementPromotionCode(discount.promotionCodeId, now))) throw new DiscountRefusal(`${label} has been used up or has expired.`);
  }
}
