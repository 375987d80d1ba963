/**
 * Customer portal sessions: a short-lived, single-use entry link (created by the merchant's API,
 * by a paid checkout's page, or e-mailed on the buyer's request) exchanged once for a portal
 * session cookie bound to one customer of one organization. Only SHA-256 hashes of both tokens
 * are stored; the tokens themselves exist only in the URL handed out and in the buyer's cookie.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE customer_portal_sessions (
    id text PRIMARY KEY,
    org_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    customer_id text NOT NULL,
    origin text NOT NULL CHECK (origin IN ('api', 'checkout', 'email')),
    return_url text,
    allow_cancel_now boolean NOT NULL DEFAULT false,
    link_token_hash text NOT NULL UNIQUE,
    link_expires_at timestamptz NOT NULL,
    entered_at timestamptz,
    session_token_hash text UNIQUE,
    session_expires_at timestamptz,
    created_at timestamptz NOT NULL
  )`);
  await db.raw('CREATE INDEX customer_portal_sessions_expiry ON customer_portal_sessions (link_expires_at)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE customer_portal_sessions');
}
