import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('webhook_signing_keys', (t) => {
    t.text('id').primary();
    // Raw 32-byte Ed25519 public key, base64.
    t.text('public_key').notNullable();
    // PKCS#8 private key sealed with AES-256-GCM (ENCRYPTION_KEY); never stored in the clear.
    t.text('private_key_sealed').notNullable();
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable();
    // Set when a newer key takes over; the key is still published (and signs) until publish_until.
    t.timestamp('retired_at', { useTz: true, precision: 3 });
    t.timestamp('publish_until', { useTz: true, precision: 3 });
  });
  // At most one current key, even when two processes start at once.
  await db.raw('CREATE UNIQUE INDEX webhook_signing_keys_one_current ON webhook_signing_keys ((true)) WHERE retired_at IS NULL');
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('webhook_signing_keys');
}
