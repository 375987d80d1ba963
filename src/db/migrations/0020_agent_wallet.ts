import type { Knex } from 'knex';

const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true, precision: 3 });

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('agent_wallets', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('name').notNullable();
    // EIP-55 checksummed EOA address of the secp256k1 key.
    t.text('address').notNullable().unique();
    // 32-byte secp256k1 private key sealed with AES-256-GCM (ENCRYPTION_KEY, wallet id as AAD).
    t.text('private_key_sealed').notNullable();
    t.text('provider_wallet_id').notNullable().unique();
    t.text('app_id').notNullable();
    ts(t, 'created_at').notNullable();
    t.index(['org_id', 'created_at']);
  });
  await db.schema.createTable('agents', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('wallet_id').references('id').inTable('agent_wallets').onDelete('SET NULL');
    ts(t, 'created_at').notNullable();
    ts(t, 'revoked_at');
    t.index(['org_id', 'created_at']);
  });
  await db.schema.createTable('agent_key_quorums', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('agent_id').notNullable().unique().references('id').inTable('agents').onDelete('CASCADE');
    // Signatures needed for a wallet authorization; Kassa issues 1-of-n quorums.
    t.integer('threshold').notNullable().defaultTo(1);
    ts(t, 'created_at').notNullable();
  });
  await db.schema.createTable('agent_public_keys', (t) => {
    // Standard base64 of the DER SPKI, exactly as it travels in X-Agent-Pubkey: the lookup key.
    t.text('public_key').primary();
    t.text('key_quorum_id').notNullable().references('id').inTable('agent_key_quorums').onDelete('CASCADE');
    ts(t, 'created_at').notNullable();
    // Set by a key rotation; a removed key authenticates nothing but stays so it is never re-registered.
    ts(t, 'removed_at');
    t.index(['key_quorum_id']);
  });
  await db.schema.createTable('agent_wallet_policies', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('wallet_id').notNullable().references('id').inTable('agent_wallets').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('version').notNullable();
    t.text('chain_type').notNullable();
    t.jsonb('rules').notNullable();
    t.jsonb('spend_limits').notNullable().defaultTo('[]');
    ts(t, 'created_at').notNullable();
    // Creation order is evaluation order, also between policies of the same millisecond.
    t.bigIncrements('seq', { primaryKey: false });
    t.index(['wallet_id', 'created_at', 'seq']);
  });
  await db.schema.createTable('agent_wallet_history', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('wallet_id').notNullable().references('id').inTable('agent_wallets').onDelete('CASCADE');
    t.text('agent_id').notNullable().references('id').inTable('agents').onDelete('CASCADE');
    t.text('type').notNullable();
    t.text('status').notNullable();
    t.text('destination');
    // Base units as a decimal string: uint256 does not fit any SQL integer type.
    t.text('amount');
    t.text('asset');
    t.bigInteger('chain_id');
    // Lower-case token contract (domain verifyingContract) of a transfer: what spend limits group by.
    t.text('token_contract');
    t.text('tx_hash');
    t.text('explorer_url');
    t.text('failure_message');
    // Audit trail of what was (or would have been) signed.
    t.text('primary_type');
    t.text('typed_data_hash');
    ts(t, 'created_at').notNullable();
    // Insertion order: "newest first" must hold even between entries of the same millisecond.
    t.bigIncrements('seq', { primaryKey: false });
    t.index(['wallet_id', 'created_at', 'seq']);
  });
  await db.schema.createTable('credit_ledger_entries', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    // Minor units of `unit` (USDC: 6 decimals). The balance is always SUM(amount), never stored.
    t.bigInteger('amount').notNullable();
    t.text('unit').notNullable();
    t.text('reason').notNullable();
    ts(t, 'created_at').notNullable();
    t.index(['org_id', 'unit']);
  });
  await db.schema.createTable('agent_request_signatures', (t) => {
    // sha256(public key ‖ r) of an accepted request signature; refused again until it expires.
    t.text('replay_key').primary();
    ts(t, 'expires_at').notNullable();
    t.index(['expires_at']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('agent_request_signatures');
  await db.schema.dropTable('credit_ledger_entries');
  await db.schema.dropTable('agent_wallet_history');
  await db.schema.dropTable('agent_wallet_policies');
  await db.schema.dropTable('agent_public_keys');
  await db.schema.dropTable('agent_key_quorums');
  await db.schema.dropTable('agents');
  await db.schema.dropTable('agent_wallets');
}
