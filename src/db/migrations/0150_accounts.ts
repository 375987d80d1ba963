/**
 * People, not only keys (issue 29): users, their memberships of organizations with a role,
 * server-side console sessions, single-use links (invites, password resets, sign-in links), the
 * sign-in failure counters that throttle password guessing, and the append-only audit log.
 * Every token (session, invite, reset, sign-in link) is stored as its SHA-256 only.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE users (
    id text PRIMARY KEY,
    email text NOT NULL,
    name text,
    password_hash text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  )`);
  // E-mail addresses are compared lower-cased: one account per address whatever its spelling.
  await db.raw('CREATE UNIQUE INDEX users_email ON users (lower(email))');
  await db.raw(`CREATE TABLE memberships (
    org_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'support', 'viewer')),
    created_at timestamptz NOT NULL,
    role_changed_at timestamptz NOT NULL,
    PRIMARY KEY (org_id, user_id)
  )`);
  await db.raw('CREATE INDEX memberships_user ON memberships (user_id)');
  await db.raw(`CREATE TABLE console_sessions (
    id text PRIMARY KEY,
    token_hash text NOT NULL UNIQUE,
    user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    org_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    client_address text
  )`);
  await db.raw('CREATE INDEX console_sessions_user ON console_sessions (user_id) WHERE revoked_at IS NULL');
  await db.raw(`CREATE TABLE account_links (
    id text PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('invite', 'password_reset', 'sign_in')),
    token_hash text NOT NULL UNIQUE,
    org_id text REFERENCES organizations (id) ON DELETE CASCADE,
    user_id text REFERENCES users (id) ON DELETE CASCADE,
    email text NOT NULL,
    role text CHECK (role IN ('owner', 'admin', 'developer', 'support', 'viewer')),
    created_by text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    revoked_at timestamptz
  )`);
  await db.raw('CREATE INDEX account_links_org ON account_links (org_id, kind, created_at DESC)');
  await db.raw(`CREATE TABLE sign_in_failures (
    throttle_key text PRIMARY KEY,
    window_started_at timestamptz NOT NULL,
    failures integer NOT NULL
  )`);
  // Who made a key (a member's key never exceeds the permissions they had) and when it was last used (coarse: at most once a minute per process).
  await db.raw('ALTER TABLE api_keys ADD COLUMN created_by text, ADD COLUMN last_used_at timestamptz');
  await db.raw(`CREATE TABLE audit_log (
    id text PRIMARY KEY,
    org_id text,
    actor_type text NOT NULL CHECK (actor_type IN ('user', 'api_key', 'operator', 'system')),
    actor_id text,
    action text NOT NULL,
    target_type text,
    target_id text,
    summary text NOT NULL,
    client_address text,
    created_at timestamptz NOT NULL
  )`);
  await db.raw('CREATE INDEX audit_log_org ON audit_log (org_id, created_at DESC, id DESC)');
  // Append-only: rows are never changed, and removed only once past the retention period
  // (docs/operations.md), by the retention job.
  await db.raw(`CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' AND OLD.created_at < now() - interval '400 days' THEN RETURN OLD; END IF;
      RAISE EXCEPTION 'audit_log is append-only';
    END $$`);
  await db.raw(`CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE audit_log');
  await db.raw('DROP FUNCTION audit_log_append_only()');
  await db.raw('ALTER TABLE api_keys DROP COLUMN created_by, DROP COLUMN last_used_at');
  await db.raw('DROP TABLE sign_in_failures');
  await db.raw('DROP TABLE account_links');
  await db.raw('DROP TABLE console_sessions');
  await db.raw('DROP TABLE memberships');
  await db.raw('DROP TABLE users');
}
