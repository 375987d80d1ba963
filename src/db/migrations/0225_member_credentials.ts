/**
 * Who made a telemetry key or an agent's key in the console (issue 37, item 7): `user:USR_…` for
 * a member, null for the operator (admin API / CLI). A member's credentials die with their
 * membership; the operator's belong to no member. api_keys.created_by exists since 0150; its
 * partial index finds a member's live keys when they are removed.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE telemetry_api_keys ADD COLUMN created_by text');
  await db.raw('ALTER TABLE agent_public_keys ADD COLUMN created_by text');
  await db.raw('CREATE INDEX api_keys_created_by_live ON api_keys (org_id, created_by) WHERE revoked_at IS NULL AND created_by IS NOT NULL');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP INDEX api_keys_created_by_live');
  await db.raw('ALTER TABLE agent_public_keys DROP COLUMN created_by');
  await db.raw('ALTER TABLE telemetry_api_keys DROP COLUMN created_by');
}
