/** Wallets, agents, key quorums, policies, history, credit ledger and replay memory in PostgreSQL. */
import type { Knex } from 'knex';
import { runStatement, type Db } from '../db/knex.js';
import type { PolicyRule, SpendLimit } from './policy-engine.js';

export interface Wallet {
  id: string;
  orgId: string;
  name: string;
  address: string;
  providerWalletId: string;
  appId: string;
  createdAt: Date;
}

export interface WalletWithSecret extends Wallet {
  privateKeySealed: string;
}

export interface Agent {
  id: string;
  orgId: string;
  name: string;
  walletId: string | null;
  keyQuorumId: string;
  /** The quorum's current public key (standard base64 DER SPKI). */
  publicKey: string;
  createdAt: Date;
  revokedAt: Date | null;
}

export interface Policy {
  id: string;
  orgId: string;
  walletId: string;
  name: string;
  version: '1.0';
  chainType: 'ethereum';
  rules: PolicyRule[];
  spendLimits: SpendLimit[];
  createdAt: Date;
}

export type HistoryType = 'sign_typed_data' | 'transfer';
export type HistoryStatus = 'signed' | 'denied' | 'failed' | 'pending' | 'confirmed';

export interface HistoryEntry {
  id: string;
  orgId: string;
  walletId: string;
  agentId: string;
  type: HistoryType;
  status: HistoryStatus;
  destination: string | null;
  amount: string | null;
  asset: string | null;
  chainId: number | null;
  /** What the signature paid for (an x402 resource URL), when the agent said. */
  resourceUrl: string | null;
  /** Lower-case token contract of a transfer (spend limits sum per chain and contract). */
  tokenContract: string | null;
  txHash: string | null;
  explorerUrl: string | null;
  failureMessage: string | null;
  primaryType: string | null;
  typedDataHash: string | null;
  createdAt: Date;
}

export interface HistoryFilter {
  walletId?: string;
  agentId?: string;
  status?: HistoryStatus;
}

export interface CreditEntry {
  id: string;
  orgId: string;
  amount: number;
  unit: string;
  reason: string;
  createdAt: Date;
}

export type InsertAgentResult = 'ok' | 'duplicate_key';

export interface SpendWindow {
  maxValue: bigint;
  since: Date;
}

export type SpendCheck = { ok: true } | { ok: false; index: number; spent: bigint };

/** An accepted request signature to remember until it can no longer pass the timestamp check. */
export interface ReplayMark {
  replayKey: string;
  expiresAt: Date;
  now: Date;
}

/** What sign-typed-data needs: the wallet with its sealed key, and its policies in evaluation order. */
export interface SigningContext {
  wallet: WalletWithSecret | undefined;
  policies: Policy[];
}

export interface AgentAuthentication {
  agent: Agent & { quorumKeys: string[] };
  /** False when the replay key was already remembered (a replay), or the agent is revoked. */
  remembered: boolean;
  /** When asked for: the agent's wallet (of the agent's organization only) and its policies. */
  signing?: SigningContext;
}

export interface AgentWalletRepository {
  organizationExists(orgId: string): Promise<boolean>;
  /** Inserts the wallet and its first policy unless the organization already has `maxPerOrg`. */
  insertWallet(wallet: WalletWithSecret, policy: Policy, maxPerOrg: number): Promise<'ok' | 'limit'>;
  listWallets(orgId: string): Promise<Wallet[]>;
  findWallet(id: string): Promise<Wallet | undefined>;

  /** `keyCreatedBy`: `user:USR_…` when a member made the key in the console (it dies with their membership). */
  insertAgent(agent: Agent, keyCreatedBy?: string | null): Promise<InsertAgentResult>;
  findAgent(id: string): Promise<Agent | undefined>;
  listAgents(orgId: string): Promise<Agent[]>;
  setAgentWallet(id: string, walletId: string | null): Promise<void>;
  revokeAgent(id: string, now: Date): Promise<void>;
  /** Retires the quorum's current key(s) and registers `publicKey` in their place. */
  replaceKey(keyQuorumId: string, publicKey: string, now: Date, keyCreatedBy?: string | null): Promise<InsertAgentResult>;
  /** Revokes the organization's live agents whose current key `createdBy` made; those agents. */
  revokeAgentsKeyedBy(orgId: string, createdBy: string, now: Date): Promise<Array<{ id: string; name: string }>>;
  /**
   * One statement on the request path: the agent whose quorum holds `publicKey` as a current key
   * (with the quorum's current keys) and, only if that agent is not revoked, `replay` remembered
   * (false when it already was: a replay). `withSigning` also reads the agent's wallet and its
   * policies (sign-typed-data).
   */
  authenticateAgent(publicKey: string, replay: ReplayMark, withSigning: boolean): Promise<AgentAuthentication | undefined>;
  /** The wallet (of `orgId` only) with its sealed key, and its policies: one statement. */
  findSigningContext(walletId: string, orgId: string): Promise<SigningContext>;

  insertPolicy(policy: Policy): Promise<void>;
  listPolicies(walletId: string): Promise<Policy[]>;
  /** Deletes the policy (with `orgId`: only that organization's). */
  deletePolicy(id: string, orgId?: string): Promise<Policy | undefined>;
  /**
   * The organization's history newest first (created_at, seq), optionally of one wallet, one
   * agent, one status, after the entry `after`; `limit + 1` rows read to tell `hasMore`.
   */
  listHistoryPage(orgId: string, filter: HistoryFilter, after: string | undefined, limit: number): Promise<{ records: HistoryEntry[]; hasMore: boolean; cursorFound: boolean }>;

  insertHistory(entry: HistoryEntry): Promise<void>;
  /**
   * Inserts a `signed` transfer entry unless, for one of `windows`, the wallet's signed entries on
   * the same chain and token since `window.since` plus `value` exceed `window.maxValue`. Entries
   * of one wallet are checked one at a time (row lock), so concurrent requests cannot overrun.
   */
  insertSignedWithinLimits(entry: HistoryEntry, value: bigint, windows: SpendWindow[]): Promise<SpendCheck>;
  markHistoryFailed(id: string, failureMessage: string): Promise<void>;
  listHistory(walletId: string, limit: number): Promise<HistoryEntry[]>;

  insertCreditEntry(entry: CreditEntry): Promise<void>;
  /** SUM of the organization's ledger entries in `unit`, in minor units. */
  creditBalance(orgId: string, unit: string): Promise<bigint>;

  deleteExpiredSignatures(now: Date): Promise<number>;
}

interface WalletRow {
  id: string;
  org_id: string;
  name: string;
  address: string;
  private_key_sealed: string;
  provider_wallet_id: string;
  app_id: string;
  created_at: Date;
}

interface AgentRow {
  id: string;
  org_id: string;
  name: string;
  wallet_id: string | null;
  created_at: Date;
  revoked_at: Date | null;
  key_quorum_id: string;
  public_key: string;
}

interface PolicyRow {
  id: string;
  org_id: string;
  wallet_id: string;
  name: string;
  version: string;
  chain_type: string;
  rules: PolicyRule[] | string;
  spend_limits: SpendLimit[] | string;
  created_at: Date;
}

interface HistoryRow {
  id: string;
  org_id: string;
  wallet_id: string;
  agent_id: string;
  type: string;
  status: string;
  destination: string | null;
  amount: string | null;
  asset: string | null;
  chain_id: number | string | null;
  resource_url: string | null;
  token_contract: string | null;
  tx_hash: string | null;
  explorer_url: string | null;
  failure_message: string | null;
  primary_type: string | null;
  typed_data_hash: string | null;
  created_at: Date;
}

const toWallet = (row: WalletRow): WalletWithSecret => ({
  id: row.id,
  orgId: row.org_id,
  name: row.name,
  address: row.address,
  privateKeySealed: row.private_key_sealed,
  providerWalletId: row.provider_wallet_id,
  appId: row.app_id,
  createdAt: new Date(row.created_at),
});

const withoutSecret = ({ privateKeySealed: _sealed, ...wallet }: WalletWithSecret): Wallet => wallet;

const toAgent = (row: AgentRow): Agent => ({
  id: row.id,
  orgId: row.org_id,
  name: row.name,
  walletId: row.wallet_id,
  keyQuorumId: row.key_quorum_id,
  publicKey: row.public_key,
  createdAt: new Date(row.created_at),
  revokedAt: row.revoked_at ? new Date(row.revoked_at) : null,
});

const toPolicy = (row: PolicyRow): Policy => ({
  id: row.id,
  orgId: row.org_id,
  walletId: row.wallet_id,
  name: row.name,
  version: row.version as Policy['version'],
  chainType: row.chain_type as Policy['chainType'],
  rules: typeof row.rules === 'string' ? (JSON.parse(row.rules) as PolicyRule[]) : row.rules,
  spendLimits: typeof row.spend_limits === 'string' ? (JSON.parse(row.spend_limits) as SpendLimit[]) : row.spend_limits,
  createdAt: new Date(row.created_at),
});

const toHistory = (row: HistoryRow): HistoryEntry => ({
  id: row.id,
  orgId: row.org_id,
  walletId: row.wallet_id,
  agentId: row.agent_id,
  type: row.type as HistoryType,
  status: row.status as HistoryStatus,
  destination: row.destination,
  amount: row.amount,
  asset: row.asset,
  chainId: row.chain_id === null ? null : Number(row.chain_id),
  resourceUrl: row.resource_url ?? null,
  tokenContract: row.token_contract,
  txHash: row.tx_hash,
  explorerUrl: row.explorer_url,
  failureMessage: row.failure_message,
  primaryType: row.primary_type,
  typedDataHash: row.typed_data_hash,
  createdAt: new Date(row.created_at),
});

const isUniqueViolation = (err: unknown): boolean => (err as { code?: string }).code === '23505';

/** The quorum's current keys, oldest first (`q` is the agent's key quorum). */
const QUORUM_KEYS_SQL =
  'ARRAY(SELECT k2.public_key FROM agent_public_keys k2 WHERE k2.key_quorum_id = q.id AND k2.removed_at IS NULL ORDER BY k2.created_at) AS quorum_keys';

/** Columns of wallet `w` (prefixed `w_`) and its policies as one JSON array in evaluation order. */
const SIGNING_COLUMNS_SQL = `w.id AS w_id, w.org_id AS w_org_id, w.name AS w_name, w.address AS w_address,
  w.private_key_sealed AS w_private_key_sealed, w.provider_wallet_id AS w_provider_wallet_id, w.app_id AS w_app_id,
  w.created_at AS w_created_at,
  (SELECT COALESCE(json_agg(json_build_object(
      'id', p.id, 'org_id', p.org_id, 'wallet_id', p.wallet_id, 'name', p.name, 'version', p.version,
      'chain_type', p.chain_type, 'rules', p.rules, 'spend_limits', p.spend_limits, 'created_at', p.created_at
    ) ORDER BY p.created_at, p.seq), '[]'::json)
     FROM agent_wallet_policies p WHERE p.wallet_id = w.id) AS w_policies`;

type SigningRow = { [K in keyof WalletRow as `w_${K}`]: WalletRow[K] | null } & { w_policies: PolicyRow[] | string };

function toSigningContext(row: SigningRow): SigningContext {
  const policies = typeof row.w_policies === 'string' ? (JSON.parse(row.w_policies) as PolicyRow[]) : row.w_policies;
  return {
    wallet:
      row.w_id === null
        ? undefined
        : toWallet({
            id: row.w_id,
            org_id: row.w_org_id!,
            name: row.w_name!,
            address: row.w_address!,
            private_key_sealed: row.w_private_key_sealed!,
            provider_wallet_id: row.w_provider_wallet_id!,
            app_id: row.w_app_id!,
            created_at: row.w_created_at!,
          }),
    policies: row.w_id === null ? [] : policies.map(toPolicy),
  };
}

/**
 * The statements of the request path, with numbered parameters: they run on a pooled connection
 * directly (runStatement in src/db/knex.ts), without knex building or rewriting them on every request.
 */
const authenticateSql = (withSigning: boolean) => `WITH agent AS (
    SELECT a.id, a.org_id, a.name, a.wallet_id, a.created_at, a.revoked_at, q.id AS key_quorum_id, k.public_key, ${QUORUM_KEYS_SQL}
      FROM agent_public_keys k
      JOIN agent_key_quorums q ON q.id = k.key_quorum_id
      JOIN agents a ON a.id = q.agent_id
     WHERE k.public_key = $1 AND k.removed_at IS NULL
  ), remembered AS (
    -- A replay row that has expired no longer protects anything: taking it over is the lazy cleanup.
    INSERT INTO agent_request_signatures (replay_key, expires_at)
    SELECT $2::text, $3::timestamptz FROM agent WHERE agent.revoked_at IS NULL
    ON CONFLICT (replay_key) DO UPDATE SET expires_at = EXCLUDED.expires_at
     WHERE agent_request_signatures.expires_at <= $4::timestamptz
    RETURNING 1
  )
  SELECT agent.*, EXISTS (SELECT FROM remembered) AS remembered${withSigning ? `, ${SIGNING_COLUMNS_SQL}` : ''}
    FROM agent${withSigning ? ' LEFT JOIN agent_wallets w ON w.id = agent.wallet_id AND w.org_id = agent.org_id' : ''}`;
const AUTHENTICATE_SQL = authenticateSql(false);
const AUTHENTICATE_WITH_SIGNING_SQL = authenticateSql(true);
const SIGNING_CONTEXT_SQL = `SELECT ${SIGNING_COLUMNS_SQL} FROM agent_wallets w WHERE w.id = $1 AND w.org_id = $2`;
const HISTORY_INSERT_SQL = `INSERT INTO agent_wallet_history
  (id, org_id, wallet_id, agent_id, type, status, destination, amount, asset, chain_id, token_contract,
   tx_hash, explorer_url, failure_message, primary_type, typed_data_hash, created_at, resource_url)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`;

const historyValues = (entry: HistoryEntry): Knex.Value[] => [
  entry.id,
  entry.orgId,
  entry.walletId,
  entry.agentId,
  entry.type,
  entry.status,
  entry.destination,
  entry.amount,
  entry.asset,
  entry.chainId,
  entry.tokenContract,
  entry.txHash,
  entry.explorerUrl,
  entry.failureMessage,
  entry.primaryType,
  entry.typedDataHash,
  entry.createdAt.toISOString(),
  entry.resourceUrl,
];

export class KnexAgentWalletRepository implements AgentWalletRepository {
  constructor(private readonly db: Db) {}

  /**
   * Runs a request-path statement ($1, $2, … parameters) on a connection of knex's pool: the same
   * connections, type parsers and timeouts as knex's own queries, without knex's per-query work.
   */
  private query<R>(text: string, values: unknown[]): Promise<R[]> {
    return runStatement<R>(this.db, text, values);
  }

  async organizationExists(orgId: string): Promise<boolean> {
    return (await this.db('organizations').where({ id: orgId }).first('id')) !== undefined;
  }

  async insertWallet(wallet: WalletWithSecret, policy: Policy, maxPerOrg: number): Promise<'ok' | 'limit'> {
    return this.db.transaction(async (trx) => {
      // Serializes wallet creation per organization, so two concurrent creations cannot both see 4.
      await trx('organizations').where({ id: wallet.orgId }).forUpdate().first('id');
      const row = await trx('agent_wallets').where({ org_id: wallet.orgId }).count<{ count: number | string }[]>({ count: '*' }).first();
      if (Number(row?.count ?? 0) >= maxPerOrg) return 'limit';
      await trx('agent_wallets').insert({
        id: wallet.id,
        org_id: wallet.orgId,
        name: wallet.name,
        address: wallet.address,
        private_key_sealed: wallet.privateKeySealed,
        provider_wallet_id: wallet.providerWalletId,
        app_id: wallet.appId,
        created_at: wallet.createdAt,
      });
      await this.insertPolicyWith(trx, policy);
      return 'ok';
    });
  }

  async listWallets(orgId: string): Promise<Wallet[]> {
    const rows = await this.db<WalletRow>('agent_wallets').where({ org_id: orgId }).orderBy([
      { column: 'created_at', order: 'asc' },
      { column: 'id', order: 'asc' },
    ]);
    return rows.map((row) => withoutSecret(toWallet(row)));
  }

  async findWallet(id: string): Promise<Wallet | undefined> {
    const row = await this.db<WalletRow>('agent_wallets').where({ id }).first();
    return row ? withoutSecret(toWallet(row)) : undefined;
  }

  private agentQuery(db: Knex | Knex.Transaction = this.db) {
    return db('agents as a')
      .join('agent_key_quorums as q', 'q.agent_id', 'a.id')
      .leftJoin('agent_public_keys as k', (join) => {
        join.on('k.key_quorum_id', '=', 'q.id').andOnNull('k.removed_at');
      })
      .select<AgentRow[]>('a.id', 'a.org_id', 'a.name', 'a.wallet_id', 'a.created_at', 'a.revoked_at', 'q.id as key_quorum_id', 'k.public_key');
  }

  async insertAgent(agent: Agent, keyCreatedBy: string | null = null): Promise<InsertAgentResult> {
    try {
      await this.db.transaction(async (trx) => {
        await trx('agents').insert({
          id: agent.id,
          org_id: agent.orgId,
          name: agent.name,
          wallet_id: agent.walletId,
          created_at: agent.createdAt,
          revoked_at: agent.revokedAt,
        });
        await trx('agent_key_quorums').insert({
          id: agent.keyQuorumId,
          org_id: agent.orgId,
          agent_id: agent.id,
          threshold: 1,
          created_at: agent.createdAt,
        });
        await trx('agent_public_keys').insert({
          public_key: agent.publicKey,
          key_quorum_id: agent.keyQuorumId,
          created_at: agent.createdAt,
          removed_at: null,
          created_by: keyCreatedBy,
        });
      });
      return 'ok';
    } catch (err) {
      if (isUniqueViolation(err)) return 'duplicate_key';
      throw err;
    }
  }

  async findAgent(id: string): Promise<Agent | undefined> {
    const row = await this.agentQuery().where('a.id', id).first();
    return row ? toAgent(row) : undefined;
  }

  async listAgents(orgId: string): Promise<Agent[]> {
    const rows = await this.agentQuery().where('a.org_id', orgId).orderBy([
      { column: 'a.created_at', order: 'asc' },
      { column: 'a.id', order: 'asc' },
    ]);
    return rows.map(toAgent);
  }

  async setAgentWallet(id: string, walletId: string | null): Promise<void> {
    await this.db('agents').where({ id }).update({ wallet_id: walletId });
  }

  async revokeAgent(id: string, now: Date): Promise<void> {
    await this.db('agents').where({ id }).whereNull('revoked_at').update({ revoked_at: now });
  }

  async revokeAgentsKeyedBy(orgId: string, createdBy: string, now: Date): Promise<Array<{ id: string; name: string }>> {
    const rows = await this.db('agents')
      .where({ org_id: orgId })
      .whereNull('revoked_at')
      .whereIn('id', (q) =>
        q.select('q.agent_id').from('agent_key_quorums as q').join('agent_public_keys as k', 'k.key_quorum_id', 'q.id').whereNull('k.removed_at').where('k.created_by', createdBy),
      )
      .update({ revoked_at: now })
      .returning(['id', 'name']);
    return (rows as Array<{ id: string; name: string }>).map((r) => ({ id: r.id, name: r.name }));
  }

  async replaceKey(keyQuorumId: string, publicKey: string, now: Date, keyCreatedBy: string | null = null): Promise<InsertAgentResult> {
    try {
      await this.db.transaction(async (trx) => {
        await trx('agent_public_keys').where({ key_quorum_id: keyQuorumId }).whereNull('removed_at').update({ removed_at: now });
        await trx('agent_public_keys').insert({ public_key: publicKey, key_quorum_id: keyQuorumId, created_at: now, removed_at: null, created_by: keyCreatedBy });
      });
      return 'ok';
    } catch (err) {
      if (isUniqueViolation(err)) return 'duplicate_key';
      throw err;
    }
  }

  async authenticateAgent(publicKey: string, replay: ReplayMark, withSigning: boolean): Promise<AgentAuthentication | undefined> {
    const [row] = await this.query<AgentRow & { quorum_keys: string[]; remembered: boolean } & SigningRow>(
      withSigning ? AUTHENTICATE_WITH_SIGNING_SQL : AUTHENTICATE_SQL,
      // ISO strings: pg's own Date formatting (local time zone) is slower and means the same.
      [publicKey, replay.replayKey, replay.expiresAt.toISOString(), replay.now.toISOString()],
    );
    if (!row) return undefined;
    return {
      agent: { ...toAgent(row), quorumKeys: row.quorum_keys },
      remembered: row.remembered,
      ...(withSigning ? { signing: toSigningContext(row) } : {}),
    };
  }

  async findSigningContext(walletId: string, orgId: string): Promise<SigningContext> {
    const [row] = await this.query<SigningRow>(SIGNING_CONTEXT_SQL, [walletId, orgId]);
    return row ? toSigningContext(row) : { wallet: undefined, policies: [] };
  }

  private async insertPolicyWith(db: Knex | Knex.Transaction, policy: Policy): Promise<void> {
    await db('agent_wallet_policies').insert({
      id: policy.id,
      org_id: policy.orgId,
      wallet_id: policy.walletId,
      name: policy.name,
      version: policy.version,
      chain_type: policy.chainType,
      rules: JSON.stringify(policy.rules),
      spend_limits: JSON.stringify(policy.spendLimits),
      created_at: policy.createdAt,
    });
  }

  insertPolicy(policy: Policy): Promise<void> {
    return this.insertPolicyWith(this.db, policy);
  }

  async listPolicies(walletId: string): Promise<Policy[]> {
    const rows = await this.db<PolicyRow>('agent_wallet_policies').where({ wallet_id: walletId }).orderBy([
      { column: 'created_at', order: 'asc' },
      { column: 'seq', order: 'asc' },
    ]);
    return rows.map(toPolicy);
  }

  async deletePolicy(id: string, orgId?: string): Promise<Policy | undefined> {
    const [row] = await this.db<PolicyRow>('agent_wallet_policies')
      .where({ id, ...(orgId !== undefined ? { org_id: orgId } : {}) })
      .delete()
      .returning('*');
    return row ? toPolicy(row as PolicyRow) : undefined;
  }

  async listHistoryPage(orgId: string, filter: HistoryFilter, after: string | undefined, limit: number) {
    let position: { created_at: Date; seq: number | string } | undefined;
    if (after !== undefined) {
      position = await this.db('agent_wallet_history').where({ id: after, org_id: orgId }).first('created_at', 'seq');
      if (!position) return { records: [], hasMore: false, cursorFound: false };
    }
    // The indexes of migration 0180: by organization, or by agent (wallets have theirs since 0020).
    const q = this.db<HistoryRow>('agent_wallet_history').where({ org_id: orgId });
    if (filter.walletId) q.andWhere({ wallet_id: filter.walletId });
    if (filter.agentId) q.andWhere({ agent_id: filter.agentId });
    if (filter.status) q.andWhere({ status: filter.status });
    if (position) q.andWhereRaw('(created_at, seq) < (?::timestamptz, ?::bigint)', [new Date(position.created_at).toISOString(), String(position.seq)]);
    const rows = await q
      .orderBy([
        { column: 'created_at', order: 'desc' },
        { column: 'seq', order: 'desc' },
      ])
      .limit(limit + 1);
    return { records: rows.slice(0, limit).map(toHistory), hasMore: rows.length > limit, cursorFound: true };
  }

  async insertHistory(entry: HistoryEntry): Promise<void> {
    await this.query(HISTORY_INSERT_SQL, historyValues(entry));
  }

  async insertSignedWithinLimits(entry: HistoryEntry, value: bigint, windows: SpendWindow[]): Promise<SpendCheck> {
    if (windows.length === 0) {
      await this.insertHistory(entry);
      return { ok: true };
    }
    return this.db.transaction(async (trx) => {
      await trx('agent_wallets').where({ id: entry.walletId }).forUpdate().first('id');
      for (const [index, window] of windows.entries()) {
        // amount is a decimal string (uint256 fits no SQL integer); numeric sums it exactly.
        const row = await trx('agent_wallet_history')
          .where({ wallet_id: entry.walletId, type: 'sign_typed_data', status: 'signed', chain_id: entry.chainId, token_contract: entry.tokenContract })
          .where('created_at', '>', window.since)
          .first<{ spent: string }>(trx.raw('COALESCE(SUM(amount::numeric), 0)::text AS spent'));
        const spent = BigInt(row?.spent ?? '0');
        if (spent + value > window.maxValue) return { ok: false, index, spent };
      }
      await runStatement(trx, HISTORY_INSERT_SQL, historyValues(entry)); // on the transaction's connection
      return { ok: true };
    });
  }

  async markHistoryFailed(id: string, failureMessage: string): Promise<void> {
    await this.db('agent_wallet_history').where({ id, status: 'signed' }).update({ status: 'failed', failure_message: failureMessage });
  }

  async listHistory(walletId: string, limit: number): Promise<HistoryEntry[]> {
    const rows = await this.db<HistoryRow>('agent_wallet_history')
      .where({ wallet_id: walletId })
      .orderBy([
        { column: 'created_at', order: 'desc' },
        { column: 'seq', order: 'desc' },
      ])
      .limit(limit);
    return rows.map(toHistory);
  }

  async insertCreditEntry(entry: CreditEntry): Promise<void> {
    await this.db('credit_ledger_entries').insert({
      id: entry.id,
      org_id: entry.orgId,
      amount: entry.amount,
      unit: entry.unit,
      reason: entry.reason,
      created_at: entry.createdAt,
    });
  }

  async creditBalance(orgId: string, unit: string): Promise<bigint> {
    // SUM(bigint) is numeric: read it as text so no precision is lost on the way.
    const row = await this.db('credit_ledger_entries')
      .where({ org_id: orgId, unit })
      .first<{ total: string | null }>(this.db.raw('COALESCE(SUM(amount), 0)::text AS total'));
    return BigInt(row?.total ?? '0');
  }

  async deleteExpiredSignatures(now: Date): Promise<number> {
    return this.db('agent_request_signatures').where('expires_at', '<=', now).delete();
  }
}
