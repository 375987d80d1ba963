/**
 * Agent wallet management (admin API): wallets, agents and their key quorums, policies, credit.
 */
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { conflict, notFound, validationError } from '../kernel/errors.js';
import type { Clock } from '../kernel/clock.js';
import { newId, randomToken } from '../kernel/ids.js';
import type { SecretBox } from '../kernel/secrets.js';
import type { Agent, AgentWalletRepository, HistoryFilter, Policy, Wallet, WalletWithSecret } from './agent-wallet.repository.js';
import { DEFAULT_CHAINS, type ChainConfig } from './chains.js';
import { readCreditBalance, type CreditBalance, type CreditUnit } from './credit.js';
import { DEFAULT_POLICY_NAME, defaultPolicyRules } from './default-policy.js';
import { p256PublicKey, generateP256KeyPair } from './p256.js';
import { PolicyValidationError, validatePolicyRules, validateSpendLimits, type PolicyRule, type SpendLimit } from './policy-engine.js';
import { encodeAgentWalletKey } from './protocol.js';

export const MAX_WALLETS_PER_ORG = 5;

/** Kassa's custody identifier of a wallet: 24 lowercase base-36 characters, like a cuid. */
function providerWalletId(): string {
  return randomToken(24).toLowerCase();
}

export class AgentWalletAdminService {
  private readonly chains: readonly ChainConfig[];

  constructor(
    private readonly repo: AgentWalletRepository,
    private readonly box: SecretBox,
    private readonly clock: Clock,
    options: { chains?: readonly ChainConfig[] } = {},
  ) {
    this.chains = options.chains ?? DEFAULT_CHAINS;
  }

  private async requireOrg(orgId: string): Promise<void> {
    if (!(await this.repo.organizationExists(orgId))) throw notFound('Organization');
  }

  private async requireWalletOf(orgId: string, walletId: string): Promise<Wallet> {
    const wallet = await this.repo.findWallet(walletId);
    if (!wallet || wallet.orgId !== orgId) throw notFound('Wallet');
    return wallet;
  }

  /** With `orgId` (a member's door) another organization's agent is the same 404 as an unknown one. */
  private async requireAgent(agentId: string, orgId?: string): Promise<Agent> {
    const agent = await this.repo.findAgent(agentId);
    if (!agent || (orgId !== undefined && agent.orgId !== orgId)) throw notFound('Agent');
    return agent;
  }

  /** A wallet of any organization (the operator) or, with `orgId`, of that organization only. */
  private async requireWallet(walletId: string, orgId?: string): Promise<Wallet> {
    const wallet = await this.repo.findWallet(walletId);
    if (!wallet || (orgId !== undefined && wallet.orgId !== orgId)) throw notFound('Wallet');
    return wallet;
  }

  /** The chains a wallet signs for: its one EVM address is its address on each. */
  walletChains(): readonly ChainConfig[] {
    return this.chains;
  }

  async createWallet(orgId: string, input: { name?: string }): Promise<Wallet> {
    await this.requireOrg(orgId);
    const now = this.clock.now();
    const id = newId('WLT');
    const privateKey = generatePrivateKey();
    const wallet: WalletWithSecret = {
      id,
      orgId,
      name: input.name?.trim() || 'Wallet',
      address: privateKeyToAddress(privateKey),
      // The wallet id is the associated data: a sealed key copied onto another wallet row fails to open.
      privateKeySealed: this.box.seal(Buffer.from(privateKey.slice(2), 'hex'), id),
      providerWalletId: providerWalletId(),
      // Kassa is the custody provider; the "application" a signature binds to is the organization.
      appId: orgId,
      createdAt: now,
    };
    const policy: Policy = {
      id: newId('POL'),
      orgId,
      walletId: id,
      name: DEFAULT_POLICY_NAME,
      version: '1.0',
      chainType: 'ethereum',
      rules: defaultPolicyRules(this.chains),
      spendLimits: [],
      createdAt: now,
    };
    const result = await this.repo.insertWallet(wallet, policy, MAX_WALLETS_PER_ORG);
    if (result === 'limit') throw conflict(`An organization can have at most ${MAX_WALLETS_PER_ORG} wallets`);
    const { privateKeySealed: _sealed, ...visible } = wallet;
    return visible;
  }

  async listWallets(orgId: string): Promise<Wallet[]> {
    await this.requireOrg(orgId);
    return this.repo.listWallets(orgId);
  }

  private newAgentKey(publicKey: string | undefined): { publicKey: string; privateKey: string | null } {
    if (publicKey === undefined) return generateP256KeyPair();
    if (!p256PublicKey(publicKey)) {
      throw validationError('publicKey: not a P-256 public key (standard base64 of a DER SubjectPublicKeyInfo, uncompressed point)');
    }
    return { publicKey, privateKey: null };
  }

  async createAgent(
    orgId: string,
    input: { name: string; publicKey?: string; walletId?: string },
    keyCreatedBy?: string,
  ): Promise<{ agent: Agent; agentWalletKey: string | null }> {
    await this.requireOrg(orgId);
    if (input.walletId !== undefined) await this.requireWalletOf(orgId, input.walletId);
    const key = this.newAgentKey(input.publicKey);
    const agent: Agent = {
      id: newId('AGT'),
      orgId,
      name: input.name.trim(),
      walletId: input.walletId ?? null,
      keyQuorumId: newId('KQ'),
      publicKey: key.publicKey,
      createdAt: this.clock.now(),
      revokedAt: null,
    };
    if ((await this.repo.insertAgent(agent, keyCreatedBy ?? null)) === 'duplicate_key') throw conflict('This public key is already registered');
    return {
      agent,
      agentWalletKey: key.privateKey === null ? null : encodeAgentWalletKey({ privateKey: key.privateKey, walletId: agent.walletId }),
    };
  }

  async listAgents(orgId: string): Promise<Agent[]> {
    await this.requireOrg(orgId);
    return this.repo.listAgents(orgId);
  }

  async assignWallet(agentId: string, walletId: string | null, orgId?: string): Promise<Agent> {
    const agent = await this.requireAgent(agentId, orgId);
    if (walletId !== null) await this.requireWalletOf(agent.orgId, walletId);
    if (agent.revokedAt) throw conflict('The agent is revoked');
    await this.repo.setAgentWallet(agentId, walletId);
    return { ...agent, walletId };
  }

  async revokeAgent(agentId: string, orgId?: string): Promise<Agent> {
    await this.requireAgent(agentId, orgId);
    await this.repo.revokeAgent(agentId, this.clock.now());
    return this.requireAgent(agentId);
  }

  /**
   * Revokes the organization's agents whose current key a member made (`user:USR_…`, in the
   * console): when the member leaves or loses agents:manage. The operator's keys belong to no member.
   */
  revokeAgentsKeyedBy(orgId: string, createdBy: string): Promise<Array<{ id: string; name: string }>> {
    return this.repo.revokeAgentsKeyedBy(orgId, createdBy, this.clock.now());
  }

  async rotateKey(agentId: string, input: { publicKey?: string }, orgId?: string, keyCreatedBy?: string): Promise<{ agent: Agent; agentWalletKey: string | null }> {
    const agent = await this.requireAgent(agentId, orgId);
    if (agent.revokedAt) throw conflict('The agent is revoked');
    const key = this.newAgentKey(input.publicKey);
    if ((await this.repo.replaceKey(agent.keyQuorumId, key.publicKey, this.clock.now(), keyCreatedBy ?? null)) === 'duplicate_key') {
      throw conflict('This public key is already registered');
    }
    return {
      agent: { ...agent, publicKey: key.publicKey },
      agentWalletKey: key.privateKey === null ? null : encodeAgentWalletKey({ privateKey: key.privateKey, walletId: agent.walletId }),
    };
  }

  async createPolicy(walletId: string, input: { name: string; rules: PolicyRule[]; spend_limits?: SpendLimit[] }, orgId?: string): Promise<Policy> {
    const wallet = await this.requireWallet(walletId, orgId);
    try {
      validatePolicyRules(input.rules);
      validateSpendLimits(input.spend_limits ?? []);
    } catch (err) {
      if (err instanceof PolicyValidationError) throw validationError(err.message);
      throw err;
    }
    const policy: Policy = {
      id: newId('POL'),
      orgId: wallet.orgId,
      walletId,
      name: input.name.trim(),
      version: '1.0',
      chainType: 'ethereum',
      rules: input.rules,
      spendLimits: input.spend_limits ?? [],
      createdAt: this.clock.now(),
    };
    await this.repo.insertPolicy(policy);
    return policy;
  }

  async listWalletPolicies(walletId: string, orgId?: string): Promise<Policy[]> {
    await this.requireWallet(walletId, orgId);
    return this.repo.listPolicies(walletId);
  }

  async deletePolicy(policyId: string, orgId?: string): Promise<Policy> {
    const deleted = await this.repo.deletePolicy(policyId, orgId);
    if (!deleted) throw notFound('Policy');
    return deleted;
  }

  async grantCredit(orgId: string, input: { amount: number; unit: CreditUnit; reason?: string }) {
    await this.requireOrg(orgId);
    const entry = {
      id: `CRL_${randomToken()}`,
      orgId,
      amount: input.amount,
      unit: input.unit,
      reason: input.reason?.trim() || 'grant',
      createdAt: this.clock.now(),
    };
    await this.repo.insertCreditEntry(entry);
    return { entry, ...(await this.creditBalance(orgId, input.unit)) };
  }

  /**
   * The signing history of the organization (what `GET /v1/agent-wallet/history` shows an agent
   * of its wallet), optionally of one wallet or agent of it, newest first, in keyset pages after
   * the entry `startingAfter` (unknown or foreign: 400).
   */
  async history(orgId: string, filter: HistoryFilter, startingAfter: string | undefined, limit: number) {
    const page = await this.repo.listHistoryPage(orgId, filter, startingAfter, limit);
    if (!page.cursorFound) throw validationError('query.starting_after: no history entry of this organization has this id; start again without it', { field: 'starting_after' });
    return { records: page.records, hasMore: page.hasMore, nextCursor: page.hasMore ? page.records.at(-1)!.id : null };
  }

  /** The balance in minor units and in whole units of `unit`. */
  creditBalance(orgId: string, unit?: CreditUnit): Promise<CreditBalance> {
    return readCreditBalance(this.repo, orgId, unit);
  }
}
