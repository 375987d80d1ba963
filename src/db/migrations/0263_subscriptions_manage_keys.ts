/**
 * Issue 37 §6: `subscriptions:manage` becomes an API-key permission (a customer portal session a
 * key opens may cancel and keep subscriptions only when the key holds it), and portal changes are
 * audited with the buyer as a `customer` actor when nobody else opened the session.
 *
 * Existing keys: until now `checkout:write` alone let a key open portals that cancel. A key made by
 * the operator (created_by null: the admin API, the demo key) or by a member who is an owner or
 * admin now — people who hold `subscriptions:manage` themselves — and holding `checkout:write`
 * gets `subscriptions:manage`, so live integrations keep working (no `403` on `allowCancelNow`, the
 * buttons stay): such a key can do nothing it could not do yesterday, and nothing beyond its
 * creator's authority. Keys made by developers (or members whose role lacks the permission) do
 * not get it: that is the hole closed. Each key changed gets an audit entry (`system`,
 * `api_key.permission_added`), so the change is not silent. docs/accounts.md says so.
 */
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** An `AUD_…` id like src/kernel/ids.ts newId makes (migrations import nothing of the application). */
const auditId = () => `AUD_${[...randomBytes(24)].map((b) => BASE62[b % 62]).join('')}`;

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE audit_log DROP CONSTRAINT audit_log_actor_type_check');
  await db.raw(`ALTER TABLE audit_log ADD CONSTRAINT audit_log_actor_type_check CHECK (actor_type IN ('user', 'api_key', 'operator', 'system', 'customer'))`);
  const widened = (
    await db.raw(`UPDATE api_keys k SET permissions = array_append(k.permissions, 'subscriptions:manage')
      WHERE k.revoked_at IS NULL
        AND 'checkout:write' = ANY (k.permissions)
        AND NOT ('subscriptions:manage' = ANY (k.permissions))
        AND (k.created_by IS NULL
          OR EXISTS (SELECT 1 FROM memberships m WHERE m.org_id = k.org_id AND k.created_by = 'user:' || m.user_id AND m.role IN ('owner', 'admin')))
      RETURNING k.id, k.org_id`)
  ).rows as Array<{ id: string; org_id: string }>;
  if (widened.length === 0) return;
  const now = new Date();
  await db.batchInsert(
    'audit_log',
    widened.map((k) => ({
      id: auditId(),
      org_id: k.org_id,
      actor_type: 'system',
      actor_id: null,
      action: 'api_key.permission_added',
      target_type: 'api_key',
      target_id: k.id,
      summary: 'subscriptions:manage added (migration 0263): the key held checkout:write, which let its customer portal sessions cancel subscriptions until now; remove it by making a key without it',
      client_address: null,
      created_at: now,
    })),
    500,
  );
}

export async function down(db: Knex): Promise<void> {
  await db.raw(`UPDATE api_keys SET permissions = array_remove(permissions, 'subscriptions:manage') WHERE 'subscriptions:manage' = ANY (permissions)`);
  await db.raw('ALTER TABLE audit_log DROP CONSTRAINT audit_log_actor_type_check');
  await db.raw(`ALTER TABLE audit_log ADD CONSTRAINT audit_log_actor_type_check CHECK (actor_type IN ('user', 'api_key', 'operator', 'system')) NOT VALID`);
}
