/**
 * Coupons and promotion codes (issue 39, item 2). A coupon is percent or amount off (amount in one
 * currency), for ONCE / REPEATING (N billing periods) / FOREVER, with an optional redemption limit,
 * an expiry (`redeem_by`) and the products it applies to (null: all). A promotion code is a
 * buyer-facing code of a coupon with its own limits; `code_key` is the code lowercased, unique per
 * organization, so codes are case-insensitive.
 *
 * A redemption is one row per checkout session (unique `checkout_session_id`), claimed before the
 * card is charged together with conditional increments of `times_redeemed`; the CHECK constraints
 * keep `times_redeemed <= max_redemptions` even against a wrong writer. `once_key` (the buyer's
 * e-mail, lowercased) is set only for codes limited to once per customer, and is unique per code.
 * A checkout session keeps its discount in its pricing snapshot (jsonb, no column), as trials do.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE coupons (
    id text PRIMARY KEY,
    org_id text NOT NULL REFERENCES organizations(id),
    name text NOT NULL,
    percent_off numeric(5,2) CHECK (percent_off > 0 AND percent_off <= 100),
    amount_off bigint CHECK (amount_off > 0),
    currency text,
    duration text NOT NULL CHECK (duration IN ('ONCE', 'REPEATING', 'FOREVER')),
    duration_in_periods integer CHECK (duration_in_periods BETWEEN 1 AND 1000),
    max_redemptions integer CHECK (max_redemptions >= 1),
    times_redeemed integer NOT NULL DEFAULT 0 CHECK (times_redeemed >= 0 AND (max_redemptions IS NULL OR times_redeemed <= max_redemptions)),
    redeem_by timestamptz(3),
    product_ids jsonb,
    created_at timestamptz(3) NOT NULL,
    updated_at timestamptz(3) NOT NULL,
    CHECK ((percent_off IS NULL) <> (amount_off IS NULL)),
    CHECK ((amount_off IS NULL) = (currency IS NULL)),
    CHECK ((duration = 'REPEATING') = (duration_in_periods IS NOT NULL))
  )`);
  await db.raw('CREATE INDEX coupons_org_created ON coupons (org_id, created_at DESC, id DESC)');
  await db.raw(`CREATE TABLE promotion_codes (
    id text PRIMARY KEY,
    org_id text NOT NULL REFERENCES organizations(id),
    coupon_id text NOT NULL REFERENCES coupons(id),
    code text NOT NULL,
    code_key text NOT NULL,
    active boolean NOT NULL DEFAULT true,
    max_redemptions integer CHECK (max_redemptions >= 1),
    times_redeemed integer NOT NULL DEFAULT 0 CHECK (times_redeemed >= 0 AND (max_redemptions IS NULL OR times_redeemed <= max_redemptions)),
    expires_at timestamptz(3),
    first_time_transaction boolean NOT NULL DEFAULT false,
    once_per_customer boolean NOT NULL DEFAULT false,
    created_at timestamptz(3) NOT NULL,
    updated_at timestamptz(3) NOT NULL
  )`);
  await db.raw('CREATE UNIQUE INDEX promotion_codes_org_code ON promotion_codes (org_id, code_key)');
  await db.raw('CREATE INDEX promotion_codes_coupon ON promotion_codes (coupon_id, created_at DESC)');
  await db.raw(`CREATE TABLE discount_redemptions (
    id text PRIMARY KEY,
    org_id text NOT NULL REFERENCES organizations(id),
    coupon_id text NOT NULL REFERENCES coupons(id),
    promotion_code_id text REFERENCES promotion_codes(id),
    checkout_session_id text NOT NULL UNIQUE,
    customer_email text NOT NULL,
    once_key text,
    created_at timestamptz(3) NOT NULL
  )`);
  await db.raw('CREATE UNIQUE INDEX discount_redemptions_once ON discount_redemptions (promotion_code_id, once_key) WHERE once_key IS NOT NULL');
  await db.raw('CREATE INDEX discount_redemptions_coupon ON discount_redemptions (coupon_id, created_at DESC)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE IF EXISTS discount_redemptions');
  await db.raw('DROP TABLE IF EXISTS promotion_codes');
  await db.raw('DROP TABLE IF EXISTS coupons');
}
