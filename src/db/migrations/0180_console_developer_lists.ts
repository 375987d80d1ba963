/**
 * The console's developer lists (issue 29): the webhook delivery log filtered by order, the agent
 * wallet signing history per organization and per agent (keyset pages, newest first), and the
 * telemetry keys' last use.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  // `order_id` filter of the delivery log: the order an event is about (data.order.orderId).
  await db.raw(`CREATE INDEX webhook_events_order ON webhook_events (org_id, (payload #>> '{order,orderId}')) WHERE payload #>> '{order,orderId}' IS NOT NULL`);
  // The delivery log's keyset order within an organization.
  await db.raw('CREATE INDEX webhook_deliveries_org_log ON webhook_deliveries (org_id, created_at DESC, id DESC)');
  await db.raw('CREATE INDEX agent_wallet_history_org ON agent_wallet_history (org_id, created_at DESC, seq DESC)');
  await db.raw('CREATE INDEX agent_wallet_history_agent ON agent_wallet_history (agent_id, created_at DESC, seq DESC)');
  // Written once per rate-limit window in which the key is used (the window's start): a minute coarse.
  await db.raw('ALTER TABLE telemetry_api_keys ADD COLUMN last_used_at timestamptz(3)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE telemetry_api_keys DROP COLUMN last_used_at');
  await db.raw('DROP INDEX agent_wallet_history_agent');
  await db.raw('DROP INDEX agent_wallet_history_org');
  await db.raw('DROP INDEX webhook_deliveries_org_log');
  await db.raw('DROP INDEX webhook_events_order');
}
