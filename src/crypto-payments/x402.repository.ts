/**
 * x402 facilitator storage: the relayer account (its key sealed) and the settlements. A
 * settlement row is the claim on one EIP-3009 authorization (chain, token, payer, nonce): whoever
 * inserts it submits the transaction; everyone else reads its outcome.
 */
import type { Db } from '../db/knex.js';

/** REMOVED: settled, then its transaction left the canonical chain (a reorganization); SETTLED again if it comes back. */
export type X402SettlementStatus = 'SUBMITTING' | 'SUBMITTED' | 'SETTLED' | 'REMOVED' | 'FAILED';

export interface X402Relayer {
  id: string;
  address: `0x${string}`;
  privateKeySealed: string;
  createdAt: Date;
}

export interface X402Settlement {
  id: string;
  orgId: string;
  chainId: number;
  token: string;
  payer: string;
  nonce: string;
  payTo: string;
  value: string;
  payloadHash: string;
  resourceUrl: string | null;
  priceId: string | null;
  status: X402SettlementStatus;
  txHash: string | null;
  orderId: string | null;
  errorReason: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** A catalog price exposed as Kassa's own x402 resource (`{base_url}/x402/prices/{priceId}`). */
export interface X402Paywall {
  priceId: string;
  orgId: string;
  /** Where a paid request is redirected (303); null: Kassa answers with a signed receipt. */
  contentUrl: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface X402Repository {
  /** Creates the paywall or changes its content URL; the stored row. */
  upsertPaywall(paywall: X402Paywall): Promise<X402Paywall>;
  findPaywall(priceId: string): Promise<X402Paywall | undefined>;
  /** The organization's paywalls on these prices, by price id. */
  listPaywalls(orgId: string, priceIds: string[]): Promise<X402Paywall[]>;
  /** False when the organization has no paywall on that price. */
  deletePaywall(orgId: string, priceId: string): Promise<boolean>;
  findRelayer(): Promise<X402Relayer | undefined>;
  /** False when a relayer exists already (nothing written). */
  insertRelayer(relayer: X402Relayer): Promise<boolean>;
  /** Inserts the claim; undefined when the authorization already has a settlement row. */
  claim(settlement: X402Settlement): Promise<X402Settlement | undefined>;
  findByAuthorization(chainId: number, token: string, payer: string, nonce: string): Promise<X402Settlement | undefined>;
  /**
   * Up to `limit` settlements in `status` last updated before `before`, each leased by moving its
   * `updated_at` to `now` (rows another worker is leasing are skipped): nobody else takes them
   * until they are stale again.
   */
  leaseStale(status: X402SettlementStatus, before: Date, now: Date, limit: number): Promise<X402Settlement[]>;
  /** SETTLED and REMOVED settlements last updated at or after `since` (the reorganization window), oldest first. */
  settledSince(since: Date, limit: number): Promise<X402Settlement[]>;
  /** Writes `patch` only while the row is still in `expected` (and, when given, last updated at `updatedAt`). */
  transition(
    id: string,
    expected: X402SettlementStatus,
    patch: Partial<Pick<X402Settlement, 'status' | 'txHash' | 'orderId' | 'errorReason' | 'priceId'>> & { updatedAt: Date },
    expectedUpdatedAt?: Date,
  ): Promise<boolean>;
}

interface SettlementRow {
  id: string;
  org_id: string;
  chain_id: string | number;
  token: string;
  payer: string;
  nonce: string;
  pay_to: string;
  value: string;
  payload_hash: string;
  resource_url: string | null;
  price_id: string | null;
  status: string;
  tx_hash: string | null;
  order_id: string | null;
  error_reason: string | null;
  created_at: Date | string;
  updated_at: Date | string;
}

const toSettlement = (r: SettlementRow): X402Settlement => ({
  id: r.id,
  orgId: r.org_id,
  chainId: Number(r.chain_id),
  token: r.token,
  payer: r.payer,
  nonce: r.nonce,
  payTo: r.pay_to,
  value: r.value,
  payloadHash: r.payload_hash,
  resourceUrl: r.resource_url,
  priceId: r.price_id,
  status: r.status as X402SettlementStatus,
  txHash: r.tx_hash,
  orderId: r.order_id,
  errorReason: r.error_reason,
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

interface PaywallRow {
  price_id: string;
  org_id: string;
  content_url: string | null;
  created_at: Date | string;
  updated_at: Date | string;
}

const toPaywall = (r: PaywallRow): X402Paywall => ({
  priceId: r.price_id,
  orgId: r.org_id,
  contentUrl: r.content_url,
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

export class KnexX402Repository implements X402Repository {
  constructor(private readonly db: Db) {}

  async upsertPaywall(p: X402Paywall): Promise<X402Paywall> {
    const rows = (await this.db('x402_paywalls')
      .insert({ price_id: p.priceId, org_id: p.orgId, content_url: p.contentUrl, created_at: p.createdAt, updated_at: p.updatedAt })
      .onConflict('price_id')
      .merge(['content_url', 'updated_at'])
      .returning('*')) as PaywallRow[];
    return toPaywall(rows[0]!);
  }

  async findPaywall(priceId: string): Promise<X402Paywall | undefined> {
    const row = (await this.db('x402_paywalls').where({ price_id: priceId }).first()) as PaywallRow | undefined;
    return row ? toPaywall(row) : undefined;
  }

  async listPaywalls(orgId: string, priceIds: string[]): Promise<X402Paywall[]> {
    if (priceIds.length === 0) return [];
    const rows = (await this.db('x402_paywalls').where({ org_id: orgId }).whereIn('price_id', priceIds).orderBy('price_id')) as PaywallRow[];
    return rows.map(toPaywall);
  }

  async deletePaywall(orgId: string, priceId: string): Promise<boolean> {
    const rows = await this.db('x402_paywalls').where({ org_id: orgId, price_id: priceId }).delete().returning('price_id');
    return rows.length === 1;
  }

  async findRelayer(): Promise<X402Relayer | undefined> {
    const row = await this.db('x402_relayers').where({ id: 'default' }).first();
    return row
      ? { id: row.id, address: row.address, privateKeySealed: row.private_key_sealed, createdAt: new Date(row.created_at) }
      : undefined;
  }

  async insertRelayer(relayer: X402Relayer): Promise<boolean> {
    const rows = await this.db('x402_relayers')
      .insert({ id: relayer.id, address: relayer.address, private_key_sealed: relayer.privateKeySealed, created_at: relayer.createdAt })
      .onConflict('id')
      .ignore()
      .returning('id');
    return rows.length === 1;
  }

  async claim(s: X402Settlement): Promise<X402Settlement | undefined> {
    // ON CONFLICT without a target: the unique expression index on the authorization decides.
    const result = await this.db.raw(
      `INSERT INTO x402_settlements (id, org_id, chain_id, token, payer, nonce, pay_to, value, payload_hash, resource_url, price_id,
         status, tx_hash, order_id, error_reason, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, ?, ?)
       ON CONFLICT DO NOTHING RETURNING *`,
      [s.id, s.orgId, s.chainId, s.token, s.payer, s.nonce, s.payTo, s.value, s.payloadHash, s.resourceUrl, s.priceId, s.status, s.createdAt, s.updatedAt],
    );
    const row = (result.rows as SettlementRow[])[0];
    return row ? toSettlement(row) : undefined;
  }

  async findByAuthorization(chainId: number, token: string, payer: string, nonce: string): Promise<X402Settlement | undefined> {
    const row = await this.db<SettlementRow>('x402_settlements')
      .where({ chain_id: chainId })
      .whereRaw('lower(token) = lower(?) AND lower(payer) = lower(?) AND lower(nonce) = lower(?)', [token, payer, nonce])
      .first();
    return row ? toSettlement(row as SettlementRow) : undefined;
  }

  async leaseStale(status: X402SettlementStatus, before: Date, now: Date, limit: number): Promise<X402Settlement[]> {
    const result = await this.db.raw(
      `UPDATE x402_settlements SET updated_at = ?
       WHERE id IN (SELECT id FROM x402_settlements WHERE status = ? AND tx_hash IS NOT NULL AND updated_at < ?
                    ORDER BY updated_at LIMIT ? FOR UPDATE SKIP LOCKED)
         AND status = ? AND updated_at < ?
       RETURNING *`,
      [now, status, before, limit, status, before],
    );
    return (result.rows as SettlementRow[]).map(toSettlement);
  }

  async settledSince(since: Date, limit: number): Promise<X402Settlement[]> {
    const rows = await this.db<SettlementRow>('x402_settlements')
      .whereIn('status', ['SETTLED', 'REMOVED'])
      .where('updated_at', '>=', since)
      .whereNotNull('tx_hash')
      .orderBy('updated_at')
      .limit(limit);
    return (rows as SettlementRow[]).map(toSettlement);
  }

  async transition(
    id: string,
    expected: X402SettlementStatus,
    patch: Partial<Pick<X402Settlement, 'status' | 'txHash' | 'orderId' | 'errorReason' | 'priceId'>> & { updatedAt: Date },
    expectedUpdatedAt?: Date,
  ): Promise<boolean> {
    const columns: Record<string, unknown> = { updated_at: patch.updatedAt };
    if (patch.status !== undefined) columns.status = patch.status;
    if (patch.txHash !== undefined) columns.tx_hash = patch.txHash;
    if (patch.orderId !== undefined) columns.order_id = patch.orderId;
    if (patch.errorReason !== undefined) columns.error_reason = patch.errorReason;
    if (patch.priceId !== undefined) columns.price_id = patch.priceId;
    const query = this.db('x402_settlements').where({ id, status: expected });
    if (expectedUpdatedAt) query.where({ updated_at: expectedUpdatedAt });
    return (await query.update(columns)) === 1;
  }
}
