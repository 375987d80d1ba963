import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('organizations', (t) => {
    t.text('id').primary();
    t.text('name').notNullable();
    t.boolean('frozen').notNullable().defaultTo(false);
    t.boolean('card_verified').notNullable().defaultTo(true);
    t.boolean('card_account_enabled').notNullable().defaultTo(true);
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable();
  });
  await db.schema.createTable('api_keys', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('name').notNullable();
    // SHA-256 of the key: the key itself is never stored.
    t.text('key_hash').notNullable().unique();
    t.text('prefix').notNullable();
    t.specificType('permissions', 'text[]').notNullable();
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('revoked_at', { useTz: true, precision: 3 });
    t.index(['org_id', 'created_at']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('api_keys');
  await db.schema.dropTable('organizations');
}
