/**
 * The sweep of redemptions whose checkout session was never stored (issue 39; docs/discounts.md
 * "Stripe rail", "Crash between the claim and the session"): a claim is written before Stripe's
 * Checkout Session is opened and the Kassa session is stored after it, so a process that dies in
 * between leaves a counted redemption without a session.
 *  - discount_redemptions.orphan_kept_at: the sweep found Stripe's session for that claim paid
 *    (the orphan path refunds it, the redemption stays counted) and looks at it no more.
 *  - an index of the claims still held, oldest first: what the sweep reads.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE discount_redemptions ADD COLUMN orphan_kept_at timestamptz(3)');
  await db.raw('CREATE INDEX discount_redemptions_held ON discount_redemptions (created_at) WHERE released_at IS NULL AND orphan_kept_at IS NULL');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP INDEX IF EXISTS discount_redemptions_held');
  await db.raw('ALTER TABLE discount_redemptions DROP COLUMN IF EXISTS orphan_kept_at');
}
