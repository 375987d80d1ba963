/**
 * Issue 37 §2 and §6: what a customer portal session may see and change.
 *  - checkout_sessions.customer_named: the merchant named the customer (`customerId`) when creating
 *    the session. Only then does the paid page's "Your orders and receipts" open the customer's
 *    whole history; otherwise a typed address would open another buyer's portal. Existing rows
 *    start false (the narrower portal; the paid page's entry lasts an hour anyway).
 *  - customer_portal_sessions.scope_order_id: a session opened from a checkout page shows that
 *    checkout's order (and its subscription) only.
 *  - customer_portal_sessions.can_change_subscriptions and created_by: a merchant-created session
 *    may cancel or keep subscriptions only when its creator holds `subscriptions:manage`; portal
 *    changes are audited with the creator (`key:KEY_…`, `user:USR_…`, or null: the buyer alone).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE checkout_sessions ADD COLUMN customer_named boolean NOT NULL DEFAULT false');
  await db.raw('ALTER TABLE customer_portal_sessions ADD COLUMN scope_order_id text');
  await db.raw('ALTER TABLE customer_portal_sessions ADD COLUMN can_change_subscriptions boolean NOT NULL DEFAULT true');
  await db.raw('ALTER TABLE customer_portal_sessions ADD COLUMN created_by text');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE customer_portal_sessions DROP COLUMN created_by');
  await db.raw('ALTER TABLE customer_portal_sessions DROP COLUMN can_change_subscriptions');
  await db.raw('ALTER TABLE customer_portal_sessions DROP COLUMN scope_order_id');
  await db.raw('ALTER TABLE checkout_sessions DROP COLUMN customer_named');
}
