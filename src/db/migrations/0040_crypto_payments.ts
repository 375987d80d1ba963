import type { Knex } from 'knex';

const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true, precision: 3 });

export async function up(db: Knex): Promise<void> {
  // Where an organization receives crypto payments, one address per chain (EIP-55 form).
  await db.schema.createTable('org_receiving_wallets', (t) => {
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.integer('chain_id').notNullable();
    t.text('address').notNullable();
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    t.primary(['org_id', 'chain_id']);
    t.index(['chain_id', 'address']);
  });

  // The payment instructions of a crypto session. `amount_units` is null until the quote is
  // issued (only once the session has a customer, so every matched transfer has one).
  await db.schema.createTable('crypto_quotes', (t) => {
    t.text('checkout_session_id').primary().references('id').inTable('checkout_sessions').onDelete('CASCADE');
    t.text('org_id').notNullable();
    t.integer('chain_id').notNullable();
    t.text('token_symbol').notNullable();
    t.text('token_address').notNullable();
    t.text('recipient').notNullable();
    t.bigInteger('price_units').notNullable();
    t.bigInteger('amount_units');
    ts(t, 'issued_at');
    ts(t, 'reserved_until');
    ts(t, 'created_at').notNullable();
    t.index(['chain_id', 'token_address', 'recipient', 'amount_units']);
  });

  // One row per (chain, token, recipient, exact amount): the primary key is what makes a quoted
  // amount identify one session. A row whose `reserved_until` has passed may be taken over.
  await db.schema.createTable('crypto_amount_reservations', (t) => {
    t.integer('chain_id').notNullable();
    t.text('token_address').notNullable();
    t.text('recipient').notNullable();
    t.bigInteger('amount_units').notNullable();
    t.text('checkout_session_id').notNullable();
    ts(t, 'reserved_until').notNullable();
    t.primary(['chain_id', 'token_address', 'recipient', 'amount_units']);
  });

  // Every ERC-20 Transfer log to a receiving wallet the watcher saw, matched or not.
  await db.schema.createTable('crypto_transfers', (t) => {
    t.text('id').primary();
    t.integer('chain_id').notNullable();
    t.text('tx_hash').notNullable();
    t.integer('log_index').notNullable();
    t.bigInteger('block_number').notNullable();
    t.text('block_hash').notNullable();
    ts(t, 'block_time').notNullable();
    t.text('token_symbol').notNullable();
    t.text('token_address').notNullable();
    t.text('from_address').notNullable();
    t.text('to_address').notNullable();
    // uint256: may exceed bigint; only matched transfers (≤ a quote + tolerance) are ever numbers.
    t.decimal('value', 78, 0).notNullable();
    // PENDING (waiting for confirmations), CONFIRMED, REMOVED (reorganized away), IGNORED (no session).
    t.text('status').notNullable();
    t.text('checkout_session_id');
    t.text('org_id');
    t.text('order_id');
    t.text('note');
    t.integer('confirmations').notNullable().defaultTo(0);
    ts(t, 'seen_at').notNullable();
    ts(t, 'updated_at').notNullable();
    t.unique(['chain_id', 'tx_hash', 'log_index']);
    t.index(['chain_id', 'status']);
  });
  // A transaction pays at most one session, ever.
  await db.raw("CREATE UNIQUE INDEX crypto_transfers_one_payment_per_tx ON crypto_transfers (chain_id, tx_hash) WHERE checkout_session_id IS NOT NULL AND status <> 'IGNORED'");
  await db.raw('CREATE UNIQUE INDEX orders_chain_tx_hash ON orders (chain, tx_hash) WHERE tx_hash IS NOT NULL');

  await db.schema.alterTable('orders', (t) => {
    // Crypto orders: what the transfer actually carried (under/overpayment stay visible).
    t.bigInteger('amount_received_cents');
  });

  // The watcher's position per chain; the lease keeps two workers from scanning the same chain.
  await db.schema.createTable('crypto_chain_cursors', (t) => {
    t.integer('chain_id').primary();
    t.bigInteger('next_block');
    t.text('last_block_hash');
    ts(t, 'leased_until');
    t.text('lease_owner');
    ts(t, 'updated_at').notNullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('crypto_chain_cursors');
  await db.schema.alterTable('orders', (t) => t.dropColumn('amount_received_cents'));
  await db.raw('DROP INDEX orders_chain_tx_hash');
  await db.schema.dropTable('crypto_transfers');
  await db.schema.dropTable('crypto_amount_reservations');
  await db.schema.dropTable('crypto_quotes');
  await db.schema.dropTable('org_receiving_wallets');
}
