/** webhook_events by age, for the retention job (it deletes settled events oldest first). */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('CREATE INDEX webhook_events_created ON webhook_events (created_at)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP INDEX webhook_events_created');
}
