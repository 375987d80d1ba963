/**
 * The session and user rollups (0210) applied off the ingest path: ingest (and retention) append
 * one row per batch holding that batch's trace changes, in its own transaction, and the worker's
 * `telemetry-group-changes` job applies the oldest rows in id order, many batches merged into one
 * upsert per table (src/telemetry/groups.repository.ts). `changes` is compact JSON (text: written
 * once, read once, never queried). Rows of a deleted project go with it (cascade).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE telemetry_group_changes (
    id bigserial PRIMARY KEY,
    project_id text COLLATE "C" NOT NULL REFERENCES telemetry_projects(id) ON DELETE CASCADE,
    changes text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`);
  await db.raw('CREATE INDEX telemetry_group_changes_project ON telemetry_group_changes (project_id)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE telemetry_group_changes');
}
