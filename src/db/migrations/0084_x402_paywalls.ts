/**
 * Kassa's own x402 paywalls: a catalog price a merchant exposed at `{base_url}/x402/prices/{id}`
 * (and where a paid request is sent next, if anywhere). One row per price; removing the row turns
 * the paywall off. The settlements index serves the job that finishes settlements left SUBMITTED.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE x402_paywalls (
    price_id text PRIMARY KEY,
    org_id text NOT NULL,
    content_url text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    FOREIGN KEY (org_id, price_id) REFERENCES prices (org_id, id) ON DELETE CASCADE
  )`);
  await db.raw('CREATE INDEX x402_settlements_status ON x402_settlements (status, updated_at)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP INDEX x402_settlements_status');
  await db.raw('DROP TABLE x402_paywalls');
}
