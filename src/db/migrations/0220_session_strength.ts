/**
 * How each console session was authenticated (issue 37 item 1): `password`, `password_passkey`,
 * `passkey`, `link` (a one-time link: sign-in link or invite) or `link_passkey` (a link session
 * that then enrolled the account's first passkey). Places that require a second factor
 * (an organization's requirement, switching into it, accepting an invite into it) read it.
 * Sessions started before this migration are recorded as `password`, the weakest claim they can
 * have made: in an organization that requires a second factor they sign in again.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`ALTER TABLE console_sessions ADD COLUMN strength text NOT NULL DEFAULT 'password'
    CHECK (strength IN ('password', 'password_passkey', 'passkey', 'link', 'link_passkey'))`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE console_sessions DROP COLUMN strength');
}
