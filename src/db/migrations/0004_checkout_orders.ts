import type { Knex } from 'knex';

const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true, precision: 3 });

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('customers', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('email').notNullable();
    ts(t, 'created_at').notNullable();
  });
  // One customer per e-mail address per organization, whatever its case, even under concurrent checkouts.
  await db.raw('CREATE UNIQUE INDEX customers_org_email ON customers (org_id, lower(email))');

  await db.schema.createTable('checkout_sessions', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('status').notNullable();
    t.text('provider').notNullable();
    t.bigInteger('amount').notNullable();
    t.text('currency').notNullable();
    t.integer('quantity').notNullable();
    // The purchase snapshot: later catalog edits never change what this session quotes.
    t.jsonb('pricing').notNullable();
    t.jsonb('product').notNullable();
    t.text('price_id');
    t.text('customer_id');
    t.text('customer_email');
    t.text('merchant_reference');
    t.jsonb('metadata');
    t.text('success_url');
    t.text('cancel_url');
    t.text('payment_link_id');
    // Unguessable token of the hosted page URL; the session id alone never opens the page.
    t.text('page_token').notNullable().unique();
    t.jsonb('last_error');
    ts(t, 'expires_at').notNullable();
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    t.index(['org_id', 'created_at']);
  });
  await db.raw("CREATE INDEX checkout_sessions_open_by_expiry ON checkout_sessions (expires_at) WHERE status = 'CREATED'");

  await db.schema.createTable('idempotency_keys', (t) => {
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('key').notNullable();
    // SHA-256 of the canonical request: the same key with other parameters is a 409.
    t.text('request_hash').notNullable();
    t.text('checkout_session_id').notNullable();
    ts(t, 'created_at').notNullable();
    t.primary(['org_id', 'key']);
  });

  await db.schema.createTable('orders', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('status').notNullable();
    t.text('provider').notNullable();
    t.bigInteger('amount_cents').notNullable();
    t.bigInteger('amount_refunded_cents').notNullable().defaultTo(0);
    t.text('currency').notNullable();
    t.text('customer_id').notNullable().references('id').inTable('customers');
    t.text('customer_email').notNullable();
    t.text('product_id');
    t.text('product_name');
    t.text('payment_link_id');
    // One order per checkout session: duplicate payment results can never create a second one.
    t.text('checkout_session_id').unique();
    t.text('subscription_id');
    t.text('original_order_id');
    t.text('merchant_reference');
    t.jsonb('merchant_metadata');
    t.text('note');
    t.boolean('disputed').notNullable().defaultTo(false);
    ts(t, 'settled_available_on');
    t.text('chain');
    t.text('from_address');
    t.text('tx_hash');
    // The processor's payment id: kept for reconciliation, never exposed by the API.
    t.text('processor_payment_id');
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    t.index(['org_id', 'created_at']);
    t.index(['org_id', 'customer_id']);
    t.index(['org_id', 'subscription_id']);
  });

  // Sandbox card processor: payments whose result arrives later (asynchronous test cards).
  await db.schema.createTable('sandbox_payments', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable();
    t.text('checkout_session_id').notNullable();
    // What an asynchronous payment will settle to: 'succeeded' or 'failed'.
    t.text('outcome').notNullable();
    t.text('card_last4').notNullable();
    t.text('state').notNullable();
    ts(t, 'settle_at');
    ts(t, 'created_at').notNullable();
  });
  await db.raw("CREATE INDEX sandbox_payments_due ON sandbox_payments (settle_at) WHERE state = 'pending'");
  // Like a processor's payment intent: at most one accepted payment per checkout session, so a
  // double-clicked Pay button can never charge the buyer twice.
  await db.raw("CREATE UNIQUE INDEX sandbox_payments_one_accepted ON sandbox_payments (checkout_session_id) WHERE state IN ('pending', 'succeeded')");
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('sandbox_payments');
  await db.schema.dropTable('orders');
  await db.schema.dropTable('idempotency_keys');
  await db.schema.dropTable('checkout_sessions');
  await db.schema.dropTable('customers');
}
