/**
 * Plan changes and seats (issue 39, item 3).
 *  - subscriptions.quantity: the seats the recurring amount charges (amount_cents = unit × quantity).
 *    Backfilled from the first order's single PRICE line (its quantity, when it divides the amount;
 *    a free trial's line at unit 0 keeps the checkout's quantity too); otherwise 1.
 *  - subscriptions.scheduled_change: a change that takes effect at the period's end (a downgrade,
 *    or any change asked `effective: PERIOD_END`): the price, product and amount the next renewal
 *    charges. Written and cleared only under the subscription's row lock.
 *  - customer_portal_sessions.plan_change_price_ids / allow_quantity_change: what the merchant lets
 *    the buyer change in that portal session (Stripe's billing portal `subscription_update` feature:
 *    a list of prices, and whether the quantity may change). Null / false: no change offered.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE subscriptions ADD COLUMN quantity integer NOT NULL DEFAULT 1 CHECK (quantity >= 1)');
  await db.raw('ALTER TABLE subscriptions ADD COLUMN scheduled_change jsonb');
  await db.raw(`UPDATE subscriptions s SET quantity = l.quantity::integer
                  FROM order_lines l
                 WHERE l.order_id = s.initial_order_id AND l.position = 0 AND l.kind = 'PRICE'
                   AND l.quantity IS NOT NULL AND l.quantity >= 1 AND l.quantity = trunc(l.quantity)
                   AND s.amount_cents % l.quantity::bigint = 0
                   AND NOT EXISTS (SELECT 1 FROM order_lines o WHERE o.order_id = s.initial_order_id AND o.position > 0)`);
  await db.raw('ALTER TABLE customer_portal_sessions ADD COLUMN plan_change_price_ids jsonb');
  await db.raw('ALTER TABLE customer_portal_sessions ADD COLUMN allow_quantity_change boolean NOT NULL DEFAULT false');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE customer_portal_sessions DROP COLUMN IF EXISTS allow_quantity_change');
  await db.raw('ALTER TABLE customer_portal_sessions DROP COLUMN IF EXISTS plan_change_price_ids');
  await db.raw('ALTER TABLE subscriptions DROP COLUMN IF EXISTS scheduled_change');
  await db.raw('ALTER TABLE subscriptions DROP COLUMN IF EXISTS quantity');
}
