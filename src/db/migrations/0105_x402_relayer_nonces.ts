/**
 * The x402 relayer's transaction nonces, allocated under a row lock so that concurrent settles,
 * in one process or in several `--role api` processes sharing the relayer key, never sign two
 * transactions with one nonce (issue 27). One row per relayer address and chain holds the next
 * nonce; the ledger keeps each transaction the relayer sent until it is mined, so that one the
 * node lost (dropped from its mempool, a restarted node) can be broadcast again, byte for byte.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE x402_relayer_nonces (
    chain_id bigint NOT NULL,
    address text NOT NULL,
    next_nonce bigint,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (chain_id, address)
  )`);
  await db.raw(`CREATE TABLE x402_relayer_transactions (
    chain_id bigint NOT NULL,
    address text NOT NULL,
    nonce bigint NOT NULL,
    tx_hash text NOT NULL,
    raw text NOT NULL,
    sent_at timestamptz NOT NULL,
    PRIMARY KEY (chain_id, address, nonce)
  )`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE x402_relayer_transactions');
  await db.raw('DROP TABLE x402_relayer_nonces');
}
