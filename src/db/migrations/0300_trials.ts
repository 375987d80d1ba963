/**
 * Free trials (issue 39, item 1). A SUBSCRIPTION price may carry `trial_days` (1-730, Stripe's
 * bound for `trial_period_days`); a checkout session keeps its trial in its pricing snapshot (jsonb,
 * no column). A subscription in its trial has `trial_end` (its first period, period 0, ends then);
 * `trial_will_end_sent_at` records that `subscription.trial_will_end` was emitted for that trial:
 * it is written only by a conditional UPDATE (… WHERE trial_will_end_sent_at IS NULL), never by the
 * whole-row writes of the subscription repository, so a stale read never clears it. The partial
 * index holds the trials still owed their reminder: small, and the reminder job's scan.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE prices ADD COLUMN trial_days integer CHECK (trial_days BETWEEN 1 AND 730)');
  await db.raw("ALTER TABLE prices ADD CONSTRAINT prices_trial_subscription_only CHECK (trial_days IS NULL OR pricing_type = 'SUBSCRIPTION')");
  await db.raw('ALTER TABLE subscriptions ADD COLUMN trial_end timestamptz(3)');
  await db.raw('ALTER TABLE subscriptions ADD COLUMN trial_will_end_sent_at timestamptz(3)');
  await db.raw(
    "CREATE INDEX subscriptions_trial_reminders ON subscriptions (trial_end) WHERE trial_end IS NOT NULL AND trial_will_end_sent_at IS NULL AND status = 'ACTIVE'",
  );
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP INDEX IF EXISTS subscriptions_trial_reminders');
  await db.raw('ALTER TABLE subscriptions DROP COLUMN IF EXISTS trial_will_end_sent_at');
  await db.raw('ALTER TABLE subscriptions DROP COLUMN IF EXISTS trial_end');
  await db.raw('ALTER TABLE prices DROP CONSTRAINT IF EXISTS prices_trial_subscription_only');
  await db.raw('ALTER TABLE prices DROP COLUMN IF EXISTS trial_days');
}
