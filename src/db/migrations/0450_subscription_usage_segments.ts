/**
 * Usage segments of a metered subscription's period (issue 39, docs/plan-changes.md "Metered
 * prices"): a plan change that moves a subscription to another price at once, when either price
 * has metered components, records the part of the current period billed on the price it leaves,
 * [start_at, end_at) at `price_id`. The renewal that closes the period bills each segment's usage
 * at its price's rates, then [the last segment's end, the period's end) at the current price.
 * Written under the subscription's row lock with the change; `seq` numbers a period's segments.
 * Rows of past periods are kept (the renewal order says what they billed; they are small).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE subscription_usage_segments (
    subscription_id text NOT NULL REFERENCES subscriptions(id) ON DELETE CASCADE,
    period_number integer NOT NULL,
    seq integer NOT NULL,
    org_id text NOT NULL,
    price_id text NULL,
    product_name text NOT NULL,
    start_at timestamptz NOT NULL,
    end_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (subscription_id, period_number, seq),
    CHECK (end_at >= start_at)
  )`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE IF EXISTS subscription_usage_segments');
}
