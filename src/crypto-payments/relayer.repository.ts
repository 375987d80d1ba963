/**
 * Storage of the relayer's nonces (migration 0105): one row per (chain, relayer address) holding
 * the next nonce, locked (SELECT … FOR UPDATE) for as long as a nonce is chosen and its
 * transaction sent, so processes sharing the relayer key take turns; and the ledger of the
 * transactions sent and not yet known to be mined (their signed bytes, to broadcast them again).
 */
import type { Db } from '../db/knex.js';

export interface RelayerTransaction {
  nonce: number;
  txHash: `0x${string}`;
  /** The signed transaction, as broadcast. */
  raw: `0x${string}`;
  sentAt: Date;
}

/** The row of one relayer on one chain, locked for the caller until its callback returns. */
export interface LockedRelayerNonce {
  /** The nonce after the last transaction Kassa sent; null before the first one. */
  readonly nextNonce: number | null;
  /** The transactions sent with a nonce of at least `nonce`, by nonce. */
  sentFrom(nonce: number): Promise<RelayerTransaction[]>;
  /** Records a transaction sent (replacing whatever the ledger held for its nonce) and the next nonce. */
  recordSent(tx: RelayerTransaction, nextNonce: number, now: Date): Promise<void>;
  /** Forgets the transactions below `nonce` (mined: the chain counts past them). */
  forgetBelow(nonce: number): Promise<void>;
}

export interface RelayerNonceRepository {
  /**
   * Runs `fn` in one database transaction holding the relayer's row on that chain locked (the row
   * is created first when missing). Nothing `fn` recorded is kept when it throws.
   */
  withLockedNonce<T>(chainId: number, address: string, now: Date, fn: (locked: LockedRelayerNonce) => Promise<T>): Promise<T>;
}

interface TransactionRow {
  nonce: string | number;
  tx_hash: string;
  raw: string;
  sent_at: Date | string;
}

export class KnexRelayerNonceRepository implements RelayerNonceRepository {
  constructor(private readonly db: Db) {}

  withLockedNonce<T>(chainId: number, address: string, now: Date, fn: (locked: LockedRelayerNonce) => Promise<T>): Promise<T> {
    const key = { chain_id: chainId, address: address.toLowerCase() };
    return this.db.transaction(async (trx) => {
      // Two first submissions at once: one inserts, the other waits for it and inserts nothing.
      await trx('x402_relayer_nonces').insert({ ...key, next_nonce: null, updated_at: now }).onConflict(['chain_id', 'address']).ignore();
      const row = (await trx('x402_relayer_nonces').where(key).forUpdate().first('next_nonce')) as { next_nonce: string | number | null };
      const locked: LockedRelayerNonce = {
        nextNonce: row.next_nonce === null ? null : Number(row.next_nonce),
        sentFrom: async (nonce) => {
          const rows = (await trx('x402_relayer_transactions').where(key).where('nonce', '>=', nonce).orderBy('nonce')) as TransactionRow[];
          return rows.map((r) => ({ nonce: Number(r.nonce), txHash: r.tx_hash as `0x${string}`, raw: r.raw as `0x${string}`, sentAt: new Date(r.sent_at) }));
        },
        recordSent: async (tx, nextNonce, at) => {
          await trx('x402_relayer_transactions')
            .insert({ ...key, nonce: tx.nonce, tx_hash: tx.txHash, raw: tx.raw, sent_at: tx.sentAt })
            .onConflict(['chain_id', 'address', 'nonce'])
            .merge(['tx_hash', 'raw', 'sent_at']);
          await trx('x402_relayer_nonces').where(key).update({ next_nonce: nextNonce, updated_at: at });
        },
        forgetBelow: async (nonce) => {
          await trx('x402_relayer_transactions').where(key).where('nonce', '<', nonce).delete();
        },
      };
      return fn(locked);
    });
  }
}
