/**
 * The name buyers see on hosted pages (whom they pay). NULL follows the organization's `name`,
 * so existing organizations show their name until a display name is set.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE organizations ADD COLUMN display_name text');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE organizations DROP COLUMN display_name');
}
