/**
 * Passkeys (WebAuthn) for the people of an organization (issue 29): the credentials a user
 * registered, the challenges of registration and sign-in ceremonies (server-side, single-use,
 * short-lived; kept as the SHA-256 of their id, which a browser holds), and an organization's
 * "require a second factor" switch.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE passkeys (
    id text PRIMARY KEY,
    user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    credential_id text NOT NULL UNIQUE,
    public_key text NOT NULL,
    counter bigint NOT NULL CHECK (counter >= 0),
    transports text NOT NULL,
    device_type text NOT NULL CHECK (device_type IN ('singleDevice', 'multiDevice')),
    backed_up boolean NOT NULL,
    name text NOT NULL,
    created_at timestamptz NOT NULL,
    last_used_at timestamptz
  )`);
  await db.raw('CREATE INDEX passkeys_user ON passkeys (user_id, created_at)');
  await db.raw(`CREATE TABLE webauthn_challenges (
    id_hash text PRIMARY KEY,
    purpose text NOT NULL CHECK (purpose IN ('registration', 'sign_in', 'second_factor')),
    challenge text NOT NULL,
    user_id text REFERENCES users (id) ON DELETE CASCADE,
    org_id text REFERENCES organizations (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
  )`);
  await db.raw('CREATE INDEX webauthn_challenges_expires ON webauthn_challenges (expires_at)');
  await db.raw(`CREATE TABLE organization_security (
    org_id text PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    require_second_factor boolean NOT NULL,
    updated_at timestamptz NOT NULL,
    updated_by text NOT NULL
  )`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE organization_security');
  await db.raw('DROP TABLE webauthn_challenges');
  await db.raw('DROP TABLE passkeys');
}
