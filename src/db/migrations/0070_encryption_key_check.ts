/**
 * A value sealed with the encryption key at the first start (src/encryption-key-check.ts): every
 * start opens it, so a different ENCRYPTION_KEY is refused at once instead of failing on the
 * first sealed key it needs. One row at most.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`
    CREATE TABLE encryption_key_check (
      singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
      sealed_value text NOT NULL,
      created_at timestamptz(3) NOT NULL
    )`);
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('encryption_key_check');
}
