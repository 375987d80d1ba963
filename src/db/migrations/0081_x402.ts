/**
 * x402: what an agent wallet signature paid for (the resource URL, in the history), the relayer
 * account that submits EIP-3009 authorizations (its key sealed like wallet keys), and one row per
 * authorization Kassa settles as a facilitator: the unique (chain, token, payer, nonce) makes a
 * payload settle once, however many times or concurrently it is sent.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE agent_wallet_history ADD COLUMN resource_url text');
  await db.raw(`CREATE TABLE x402_relayers (
    id text PRIMARY KEY,
    address text NOT NULL,
    private_key_sealed text NOT NULL,
    created_at timestamptz NOT NULL
  )`);
  await db.raw(`CREATE TABLE x402_settlements (
    id text PRIMARY KEY,
    org_id text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    chain_id bigint NOT NULL,
    token text NOT NULL,
    payer text NOT NULL,
    nonce text NOT NULL,
    pay_to text NOT NULL,
    value text NOT NULL,
    payload_hash text NOT NULL,
    resource_url text,
    price_id text,
    status text NOT NULL,
    tx_hash text,
    order_id text,
    error_reason text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  )`);
  await db.raw('CREATE UNIQUE INDEX x402_settlements_authorization ON x402_settlements (chain_id, lower(token), lower(payer), lower(nonce))');
  await db.raw('CREATE INDEX x402_settlements_org ON x402_settlements (org_id, created_at)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE x402_settlements');
  await db.raw('DROP TABLE x402_relayers');
  await db.raw('ALTER TABLE agent_wallet_history DROP COLUMN resource_url');
}
