/** Storage of the crypto rail: receiving wallets, quotes, amount reservations, seen transfers, chain cursors. */
import type { Knex } from 'knex';
import type { AmountKey, CryptoQuote } from '../commerce/model.js';
import type { CryptoQuoteRepository } from '../commerce/stores.js';

export interface ReceivingWallet {
  orgId: string;
  chainId: number;
  /** EIP-55. */
  address: `0x${string}`;
  createdAt: Date;
  updatedAt: Date;
}


export type TransferStatus = 'PENDING' | 'CONFIRMED' | 'REMOVED' | 'IGNORED';

export interface CryptoTransfer {
  id: string;
  chainId: number;
  txHash: `0x${string}`;
  logIndex: number;
  blockNumber: number;
  blockHash: `0x${string}`;
  blockTime: Date;
  tokenSymbol: 'USDC' | 'USDT';
  tokenAddress: `0x${string}`;
  fromAddress: `0x${string}`;
  toAddress: `0x${string}`;
  value: bigint;
  status: TransferStatus;
  checkoutSessionId: string | null;
  orgId: string | null;
  orderId: string | null;
  /** Why a transfer was ignored or how it was matched (operator-facing). */
  note: string | null;
  confirmations: number;
  seenAt: Date;
  updatedAt: Date;
}

export interface ChainCursor {
  chainId: number;
  /** The next block to scan; null before the first pass. */
  nextBlock: number | null;
  /** Hash of block nextBlock - 1 when it was scanned: a different hash later means a reorg. */
  lastBlockHash: string | null;
}

export interface CryptoRepository extends CryptoQuoteRepository {
  upsertWallet(wallet: ReceivingWallet): Promise<ReceivingWallet>;
  listWallets(orgId: string): Promise<ReceivingWallet[]>;
  findWallet(orgId: string, chainId: number): Promise<ReceivingWallet | undefined>;
  deleteWallet(orgId: string, chainId: number): Promise<boolean>;
  /** Receiving addresses to watch on a chain: every org's wallet, plus recipients of quotes still reserved (a replaced wallet still gets its late payments). */
  watchedAddresses(chainId: number, now: Date): Promise<`0x${string}`[]>;

  /** The quote of exactly this amount whose window [issuedAt - skew, reservedUntil] holds `at`. */
  findExactQuote(key: AmountKey, amountUnits: bigint, at: Date, skewMs: number): Promise<CryptoQuote | undefined>;
  /** Issued quotes in [min, max] whose window holds `at` and whose session has no order but a FAILED one. */
  findOpenQuotesBetween(key: AmountKey, min: bigint, max: bigint, at: Date, skewMs: number): Promise<CryptoQuote[]>;

  /** Inserts the transfer unless (chain, tx, log index) is known; returns the stored row either way. */
  recordTransfer(transfer: CryptoTransfer): Promise<{ transfer: CryptoTransfer; inserted: boolean }>;
  /**
   * Writes the transfer only while its stored status is still `expectedStatus` (compare-and-set):
   * false when another worker moved the transfer on since it was read.
   */
  updateTransfer(transfer: CryptoTransfer, expectedStatus: TransferStatus): Promise<boolean>;
  /** The transfer of this transaction that pays a session (one at most). */
  findPayingTransfer(chainId: number, txHash: string): Promise<CryptoTransfer | undefined>;
  /** Transfers still to follow: PENDING ones, and REMOVED ones changed after `removedSince` (re-inclusion). */
  transfersToFollow(chainId: number, removedSince: Date, limit: number): Promise<CryptoTransfer[]>;
  latestTransferOfSession(checkoutSessionId: string): Promise<CryptoTransfer | undefined>;
  listTransfers(filter: { orgId?: string; chainId?: number; status?: TransferStatus }, page: { offset: number; limit: number }): Promise<{ records: CryptoTransfer[]; total: number }>;

  ensureCursor(chainId: number, now: Date): Promise<void>;
  /** Leases the chain's cursor to `owner` until `until` unless another live lease holds it. */
  leaseCursor(chainId: number, owner: string, now: Date, until: Date): Promise<ChainCursor | undefined>;
  /**
   * Extends `owner`'s lease to `until` while `owner` still holds it (compare-and-set on the owner):
   * false once another worker took the cursor over.
   */
  renewCursorLease(chainId: number, owner: string, until: Date): Promise<boolean>;
  /** Moves the cursor only while `owner` holds its lease; false when another worker took it over. */
  saveCursor(chainId: number, owner: string, nextBlock: number, lastBlockHash: string, now: Date): Promise<boolean>;
  releaseCursor(chainId: number, owner: string): Promise<void>;
}


interface QuoteRow {
  checkout_session_id: string;
  org_id: string;
  chain_id: number;
  token_symbol: 'USDC' | 'USDT';
  token_address: `0x${string}`;
  recipient: `0x${string}`;
  price_units: string | number;
  amount_units: string | number | null;
  issued_at: Date | null;
  reserved_until: Date | null;
  created_at: Date;
}

const toQuote = (r: QuoteRow): CryptoQuote => ({
  checkoutSessionId: r.checkout_session_id,
  orgId: r.org_id,
  chainId: Number(r.chain_id),
  tokenSymbol: r.token_symbol,
  tokenAddress: r.token_address,
  recipient: r.recipient,
  priceUnits: Number(r.price_units),
  amountUnits: r.amount_units === null ? null : Number(r.amount_units),
  issuedAt: r.issued_at ? new Date(r.issued_at) : null,
  reservedUntil: r.reserved_until ? new Date(r.reserved_until) : null,
  createdAt: new Date(r.created_at),
});

interface TransferRow {
  id: string;
  chain_id: number;
  tx_hash: `0x${string}`;
  log_index: number;
  block_number: string | number;
  block_hash: `0x${string}`;
  block_time: Date;
  token_symbol: 'USDC' | 'USDT';
  token_address: `0x${string}`;
  from_address: `0x${string}`;
  to_address: `0x${string}`;
  value: string;
  status: TransferStatus;
  checkout_session_id: string | null;
  org_id: string | null;
  order_id: string | null;
  note: string | null;
  confirmations: number;
  seen_at: Date;
  updated_at: Date;
}

const toTransfer = (r: TransferRow): CryptoTransfer => ({
  id: r.id,
  chainId: Number(r.chain_id),
  txHash: r.tx_hash,
  logIndex: Number(r.log_index),
  blockNumber: Number(r.block_number),
  blockHash: r.block_hash,
  blockTime: new Date(r.block_time),
  tokenSymbol: r.token_symbol,
  tokenAddress: r.token_address,
  fromAddress: r.from_address,
  toAddress: r.to_address,
  value: BigInt(String(r.value).split('.')[0]!),
  status: r.status,
  checkoutSessionId: r.checkout_session_id,
  orgId: r.org_id,
  orderId: r.order_id,
  note: r.note,
  confirmations: Number(r.confirmations),
  seenAt: new Date(r.seen_at),
  updatedAt: new Date(r.updated_at),
});

const transferRow = (t: CryptoTransfer) => ({
  id: t.id,
  chain_id: t.chainId,
  tx_hash: t.txHash,
  log_index: t.logIndex,
  block_number: t.blockNumber,
  block_hash: t.blockHash,
  block_time: t.blockTime,
  token_symbol: t.tokenSymbol,
  token_address: t.tokenAddress,
  from_address: t.fromAddress,
  to_address: t.toAddress,
  value: t.value.toString(),
  status: t.status,
  checkout_session_id: t.checkoutSessionId,
  org_id: t.orgId,
  order_id: t.orderId,
  note: t.note,
  confirmations: t.confirmations,
  seen_at: t.seenAt,
  updated_at: t.updatedAt,
});

const toWallet = (r: { org_id: string; chain_id: number; address: `0x${string}`; created_at: Date; updated_at: Date }): ReceivingWallet => ({
  orgId: r.org_id,
  chainId: Number(r.chain_id),
  address: r.address,
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

export class KnexCryptoRepository implements CryptoRepository {
  constructor(private readonly db: Knex) {}

  async upsertWallet(w: ReceivingWallet): Promise<ReceivingWallet> {
    const result = await this.db.raw(
      `INSERT INTO org_receiving_wallets (org_id, chain_id, address, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (org_id, chain_id) DO UPDATE SET address = excluded.address, updated_at = excluded.updated_at
       RETURNING *`,
      [w.orgId, w.chainId, w.address, w.createdAt, w.updatedAt],
    );
    return toWallet(result.rows[0]);
  }

  async listWallets(orgId: string): Promise<ReceivingWallet[]> {
    return (await this.db('org_receiving_wallets').where({ org_id: orgId }).orderBy('chain_id')).map(toWallet);
  }

  async findWallet(orgId: string, chainId: number): Promise<ReceivingWallet | undefined> {
    const row = await this.db('org_receiving_wallets').where({ org_id: orgId, chain_id: chainId }).first();
    return row ? toWallet(row) : undefined;
  }

  async deleteWallet(orgId: string, chainId: number): Promise<boolean> {
    const deleted = await this.db('org_receiving_wallets').where({ org_id: orgId, chain_id: chainId }).delete().returning('chain_id');
    return deleted.length > 0;
  }

  async watchedAddresses(chainId: number, now: Date): Promise<`0x${string}`[]> {
    const result = await this.db.raw(
      `SELECT address FROM org_receiving_wallets WHERE chain_id = ?
       UNION SELECT recipient AS address FROM crypto_quotes WHERE chain_id = ? AND reserved_until > ?
       ORDER BY address`,
      [chainId, chainId, now],
    );
    return (result.rows as { address: `0x${string}` }[]).map((r) => r.address);
  }

  async insertQuote(q: CryptoQuote): Promise<void> {
    await this.db('crypto_quotes').insert({
      checkout_session_id: q.checkoutSessionId,
      org_id: q.orgId,
      chain_id: q.chainId,
      token_symbol: q.tokenSymbol,
      token_address: q.tokenAddress,
      recipient: q.recipient,
      price_units: q.priceUnits,
      amount_units: q.amountUnits,
      issued_at: q.issuedAt,
      reserved_until: q.reservedUntil,
      created_at: q.createdAt,
    });
  }

  async findQuote(checkoutSessionId: string): Promise<CryptoQuote | undefined> {
    const row = await this.db<QuoteRow>('crypto_quotes').where({ checkout_session_id: checkoutSessionId }).first();
    return row ? toQuote(row) : undefined;
  }

  async reservedAmounts(key: AmountKey, from: number, to: number, now: Date): Promise<Set<number>> {
    const rows = await this.db('crypto_amount_reservations')
      .select('amount_units')
      .where({ chain_id: key.chainId, token_address: key.tokenAddress, recipient: key.recipient })
      .andWhere('amount_units', '>=', from)
      .andWhere('amount_units', '<', to)
      .andWhere('reserved_until', '>', now);
    return new Set(rows.map((r: { amount_units: string | number }) => Number(r.amount_units)));
  }

  async reserveAmount(key: AmountKey, amountUnits: number, checkoutSessionId: string, reservedUntil: Date, now: Date): Promise<boolean> {
    const result = await this.db.raw(
      `INSERT INTO crypto_amount_reservations (chain_id, token_address, recipient, amount_units, checkout_session_id, reserved_until)
       VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (chain_id, token_address, recipient, amount_units) DO UPDATE
         SET checkout_session_id = excluded.checkout_session_id, reserved_until = excluded.reserved_until
         WHERE crypto_amount_reservations.reserved_until <= ?
       RETURNING checkout_session_id`,
      [key.chainId, key.tokenAddress, key.recipient, amountUnits, checkoutSessionId, reservedUntil, now],
    );
    return (result.rows as unknown[]).length === 1;
  }

  async markQuoteIssued(checkoutSessionId: string, amountUnits: number, issuedAt: Date, reservedUntil: Date): Promise<boolean> {
    const written = await this.db('crypto_quotes')
      .where({ checkout_session_id: checkoutSessionId })
      .whereNull('amount_units')
      .update({ amount_units: amountUnits, issued_at: issuedAt, reserved_until: reservedUntil });
    return written === 1;
  }

  async lockLinkHolds(key: AmountKey): Promise<void> {
    await this.db.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`crypto-link-holds:${key.chainId}:${key.tokenAddress}:${key.recipient}`]);
  }

  async linkHolds(key: AmountKey, from: number, to: number, now: Date): Promise<{ count: number; firstEndsAt: Date | null }> {
    const row = await this.db('crypto_amount_reservations as r')
      .join('checkout_sessions as s', 's.id', 'r.checkout_session_id')
      .where({ 'r.chain_id': key.chainId, 'r.token_address': key.tokenAddress, 'r.recipient': key.recipient })
      .andWhere('r.amount_units', '>=', from)
      .andWhere('r.amount_units', '<', to)
      .andWhere('r.reserved_until', '>', now)
      .whereNotNull('s.payment_link_id')
      .first(this.db.raw('count(*) AS n'), this.db.raw('min(r.reserved_until) AS first_ends_at'));
    const firstEndsAt = row?.first_ends_at ? new Date(row.first_ends_at) : null;
    return { count: Number(row?.n ?? 0), firstEndsAt };
  }

  private quotesOn(key: AmountKey, at: Date, skewMs: number) {
    return this.db('crypto_quotes as q')
      .where({ 'q.chain_id': key.chainId, 'q.token_address': key.tokenAddress, 'q.recipient': key.recipient })
      .whereNotNull('q.amount_units')
      .andWhere('q.issued_at', '<=', new Date(at.getTime() + skewMs))
      .andWhere('q.reserved_until', '>=', at);
  }

  async findExactQuote(key: AmountKey, amountUnits: bigint, at: Date, skewMs: number): Promise<CryptoQuote | undefined> {
    const row = await this.quotesOn(key, at, skewMs).andWhere('q.amount_units', amountUnits.toString()).select('q.*').orderBy('q.issued_at', 'desc').first();
    return row ? toQuote(row as QuoteRow) : undefined;
  }

  async findOpenQuotesBetween(key: AmountKey, min: bigint, max: bigint, at: Date, skewMs: number): Promise<CryptoQuote[]> {
    const rows = await this.quotesOn(key, at, skewMs)
      .andWhere('q.amount_units', '>=', min.toString())
      .andWhere('q.amount_units', '<=', max.toString())
      .whereNotExists((sub) =>
        sub.select(this.db.raw('1')).from('orders as o').whereRaw('o.checkout_session_id = q.checkout_session_id').andWhereNot('o.status', 'FAILED'),
      )
      .select('q.*')
      .limit(10);
    return (rows as QuoteRow[]).map(toQuote);
  }

  async recordTransfer(t: CryptoTransfer): Promise<{ transfer: CryptoTransfer; inserted: boolean }> {
    const result = await this.db.raw(
      `INSERT INTO crypto_transfers (${Object.keys(transferRow(t)).join(', ')}) VALUES (${Object.keys(transferRow(t)).map(() => '?').join(', ')})
       ON CONFLICT (chain_id, tx_hash, log_index) DO NOTHING RETURNING *`,
      Object.values(transferRow(t)),
    );
    if ((result.rows as unknown[]).length === 1) return { transfer: toTransfer(result.rows[0]), inserted: true };
    const row = await this.db<TransferRow>('crypto_transfers').where({ chain_id: t.chainId, tx_hash: t.txHash, log_index: t.logIndex }).first();
    return { transfer: toTransfer(row!), inserted: false };
  }

  async updateTransfer(t: CryptoTransfer, expectedStatus: TransferStatus): Promise<boolean> {
    const { id, ...changes } = transferRow(t);
    return (await this.db('crypto_transfers').where({ id, status: expectedStatus }).update(changes)) === 1;
  }

  async findPayingTransfer(chainId: number, txHash: string): Promise<CryptoTransfer | undefined> {
    const row = await this.db('crypto_transfers')
      .where({ chain_id: chainId, tx_hash: txHash })
      .whereNotNull('checkout_session_id')
      .whereNot('status', 'IGNORED')
      .first();
    return row ? toTransfer(row as TransferRow) : undefined;
  }

  async transfersToFollow(chainId: number, removedSince: Date, limit: number): Promise<CryptoTransfer[]> {
    const rows = await this.db<TransferRow>('crypto_transfers')
      .where({ chain_id: chainId })
      .whereNotNull('checkout_session_id')
      .andWhere((q) => q.where('status', 'PENDING').orWhere((r) => r.where('status', 'REMOVED').andWhere('updated_at', '>=', removedSince)))
      .orderBy([{ column: 'block_number' }, { column: 'log_index' }])
      .limit(limit);
    return rows.map(toTransfer);
  }

  async latestTransferOfSession(checkoutSessionId: string): Promise<CryptoTransfer | undefined> {
    const row = await this.db<TransferRow>('crypto_transfers')
      .where({ checkout_session_id: checkoutSessionId })
      .whereNot('status', 'IGNORED')
      .orderBy('seen_at', 'desc')
      .first();
    return row ? toTransfer(row) : undefined;
  }

  async listTransfers(filter: { orgId?: string; chainId?: number; status?: TransferStatus }, page: { offset: number; limit: number }) {
    const base = () => {
      const q = this.db<TransferRow>('crypto_transfers');
      if (filter.orgId) q.where('org_id', filter.orgId);
      if (filter.chainId) q.where('chain_id', filter.chainId);
      if (filter.status) q.where('status', filter.status);
      return q;
    };
    const rows = await base()
      .orderBy([{ column: 'seen_at', order: 'desc' }, { column: 'id', order: 'desc' }])
      .offset(page.offset)
      .limit(page.limit);
    const counted = await base().count<{ count: number }[]>({ count: '*' }).first();
    return { records: rows.map(toTransfer), total: Number(counted?.count ?? 0) };
  }

  async ensureCursor(chainId: number, now: Date): Promise<void> {
    await this.db.raw('INSERT INTO crypto_chain_cursors (chain_id, updated_at) VALUES (?, ?) ON CONFLICT (chain_id) DO NOTHING', [chainId, now]);
  }

  async leaseCursor(chainId: number, owner: string, now: Date, until: Date): Promise<ChainCursor | undefined> {
    const result = await this.db.raw(
      `UPDATE crypto_chain_cursors SET leased_until = ?, lease_owner = ?
       WHERE chain_id = ? AND (leased_until IS NULL OR leased_until <= ? OR lease_owner = ?)
       RETURNING chain_id, next_block, last_block_hash`,
      [until, owner, chainId, now, owner],
    );
    const row = result.rows[0] as { chain_id: number; next_block: string | number | null; last_block_hash: string | null } | undefined;
    return row ? { chainId: Number(row.chain_id), nextBlock: row.next_block === null ? null : Number(row.next_block), lastBlockHash: row.last_block_hash } : undefined;
  }

  async renewCursorLease(chainId: number, owner: string, until: Date): Promise<boolean> {
    // A compare-and-set on the owner alone: a worker taking a lapsed lease over sets itself as
    // owner in one statement (row lock, re-checked after the wait), so the old holder's renewal
    // either lands first (and the lease is live again) or finds another owner. A lapsed lease
    // nobody took is still the holder's to renew: nothing happened to the chain meanwhile.
    const renewed = await this.db('crypto_chain_cursors').where({ chain_id: chainId, lease_owner: owner }).update({ leased_until: until });
    return renewed === 1;
  }

  async saveCursor(chainId: number, owner: string, nextBlock: number, lastBlockHash: string, now: Date): Promise<boolean> {
    const saved = await this.db('crypto_chain_cursors')
      .where({ chain_id: chainId, lease_owner: owner })
      .update({ next_block: nextBlock, last_block_hash: lastBlockHash, updated_at: now });
    return saved === 1;
  }

  async releaseCursor(chainId: number, owner: string): Promise<void> {
    await this.db('crypto_chain_cursors').where({ chain_id: chainId, lease_owner: owner }).update({ leased_until: null, lease_owner: null });
  }
}
