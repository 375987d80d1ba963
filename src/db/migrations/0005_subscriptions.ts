import type { Knex } from 'knex';

const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true, precision: 3 });

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('subscriptions', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('status').notNullable();
    t.text('provider').notNullable();
    t.text('customer_id').notNullable().references('id').inTable('customers');
    t.text('customer_email').notNullable();
    t.text('product_id');
    t.text('product_name').notNullable();
    t.text('price_id');
    t.bigInteger('amount_cents').notNullable();
    t.text('currency').notNullable();
    t.text('billing_interval').notNullable();
    t.integer('billing_interval_count').notNullable();
    ts(t, 'current_period_start').notNullable();
    ts(t, 'current_period_end').notNullable();
    // Number of the current billing period: 0 for the one paid at checkout, then 1, 2, …
    t.integer('period_number').notNullable().defaultTo(0);
    // Period ends are computed from an anchor (start of period `anchor_period`), not chained, so
    // month-end clamping never drifts (Jan 31 → Feb 28 → Mar 31). A resume after a lapsed pause re-anchors.
    ts(t, 'billing_anchor').notNullable();
    t.integer('anchor_period').notNullable().defaultTo(0);
    t.boolean('cancel_at_period_end').notNullable().defaultTo(false);
    ts(t, 'canceled_at');
    ts(t, 'ended_at');
    ts(t, 'paused_at');
    // When the scheduler next has work: the renewal (or a dunning retry, or the final end).
    ts(t, 'next_action_at').notNullable();
    t.integer('failed_attempts').notNullable().defaultTo(0);
    t.text('initial_order_id').notNullable();
    t.text('latest_order_id').notNullable();
    // One subscription per checkout session, ever.
    t.text('checkout_session_id').notNullable().unique();
    // The processor's saved payment method for renewals; never exposed.
    t.text('payment_method').notNullable();
    // Unguessable token of the buyer's manage page.
    t.text('manage_token').notNullable().unique();
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    t.index(['org_id', 'created_at']);
    t.index(['org_id', 'customer_id']);
  });
  await db.raw("CREATE INDEX subscriptions_due ON subscriptions (next_action_at) WHERE status = 'ACTIVE'");

  await db.schema.alterTable('orders', (t) => {
    // Which billing period a subscription order pays (0 = the checkout's); unique per subscription,
    // so a renewal is created at most once even with several schedulers.
    t.integer('billing_period');
    // The processor's reusable payment method of a card payment (saved for renewals); never exposed.
    t.text('payment_method');
  });
  await db.raw('CREATE UNIQUE INDEX orders_one_per_subscription_period ON orders (subscription_id, billing_period) WHERE subscription_id IS NOT NULL');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP INDEX IF EXISTS orders_one_per_subscription_period');
  await db.schema.alterTable('orders', (t) => {
    t.dropColumn('billing_period');
    t.dropColumn('payment_method');
  });
  await db.schema.dropTable('subscriptions');
}
