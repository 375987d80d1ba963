import type { Knex } from 'knex';

const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true, precision: 3 });

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('products', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('description');
    t.text('status').notNullable();
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    // Target of the (org_id, product_id) foreign keys below: a price can only hang off a product
    // of its own organization, whatever the code above the database gets wrong.
    t.unique(['org_id', 'id']);
  });
  await db.raw(`ALTER TABLE products ADD CONSTRAINT products_status CHECK (status IN ('PUBLISHED', 'DRAFT', 'ARCHIVED'))`);
  // The merchant list: one organization, one status, newest first.
  await db.raw('CREATE INDEX products_org_status_created ON products (org_id, status, created_at DESC, id DESC)');

  await db.schema.createTable('prices', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('product_id').notNullable();
    t.bigInteger('amount').notNullable();
    t.text('currency').notNullable();
    t.text('pricing_type').notNullable();
    t.text('billing_interval');
    t.integer('billing_interval_count').notNullable();
    t.text('pricing_name').notNullable();
    t.boolean('flexible_amount').notNullable();
    t.bigInteger('min_amount');
    t.bigInteger('max_amount');
    t.text('provider').notNullable();
    t.boolean('active').notNullable().defaultTo(true);
    ts(t, 'created_at').notNullable();
    t.foreign(['org_id', 'product_id']).references(['org_id', 'id']).inTable('products').onDelete('CASCADE');
    t.unique(['org_id', 'id']);
    t.index(['org_id', 'product_id', 'created_at']);
  });
  // The service checks these rules with messages naming the field; the constraints make sure no
  // other writer (a later migration, a hand-written fix) stores a price a checkout cannot honour.
  await db.raw(`
    ALTER TABLE prices
      ADD CONSTRAINT prices_amount CHECK (amount >= 0 AND amount <= 9007199254740991),
      ADD CONSTRAINT prices_currency CHECK (currency ~ '^[A-Z]{3,5}$'),
      ADD CONSTRAINT prices_pricing_type CHECK (pricing_type IN ('ONE_TIME', 'SUBSCRIPTION')),
      ADD CONSTRAINT prices_interval CHECK (
        (pricing_type = 'ONE_TIME' AND billing_interval IS NULL AND billing_interval_count = 1)
        OR (pricing_type = 'SUBSCRIPTION' AND billing_interval IN ('DAY', 'MONTH', 'YEAR')
            AND billing_interval_count BETWEEN 1 AND 365)),
      ADD CONSTRAINT prices_flexible CHECK (
        (flexible_amount AND (min_amount IS NULL OR max_amount IS NULL OR min_amount <= max_amount))
        OR (NOT flexible_amount AND min_amount IS NULL AND max_amount IS NULL)),
      ADD CONSTRAINT prices_provider CHECK (
        (provider = 'CRYPTO' AND currency IN ('USDC', 'USDT') AND pricing_type = 'ONE_TIME')
        OR (provider = 'STRIPE' AND currency NOT IN ('USDC', 'USDT')))
  `);

  await db.schema.createTable('payment_links', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('price_id').notNullable();
    t.text('name').notNullable();
    t.boolean('is_active').notNullable().defaultTo(true);
    // The public /pay/<token> path segment. Not a credential: the URL is meant to be shared and is
    // shown again on every product read, so it is stored as is (unique, so it resolves to one link).
    t.text('token').notNullable().unique();
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    t.foreign(['org_id', 'price_id']).references(['org_id', 'id']).inTable('prices').onDelete('CASCADE');
    t.index(['org_id', 'price_id', 'created_at']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('payment_links');
  await db.schema.dropTable('prices');
  await db.schema.dropTable('products');
}
