/**
 * Giving back a redemption (issue 39): a promotion code or coupon redeemed by a checkout session
 * that expires unpaid is given back once — `released_at` set, the coupon's and the code's
 * `times_redeemed` lowered in the same statement, under the session's row lock (the expiry's
 * transaction). The row stays (the session's unique key; the record of what happened); its
 * `once_key` is cleared, so a once-per-customer code is free for that buyer again. A late payment
 * of that session takes it back (`released_at` null again) when the limits still allow it.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE discount_redemptions ADD COLUMN released_at timestamptz(3)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE discount_redemptions DROP COLUMN IF EXISTS released_at');
}
