/**
 * The agent wallet runtime an agent reaches with P-256 signed requests: request authentication,
 * identity, policies, history, credit balance and policy-checked EIP-712 signing.
 */
import { createHash } from 'node:crypto';
import { getAddress, type Hex } from 'viem';
import type { components } from '../../generated/agent-wallet.js';
import { AppError, forbidden, unauthorized, validationError } from '../kernel/errors.js';
import { unixSeconds, type Clock } from '../kernel/clock.js';
import { randomToken } from '../kernel/ids.js';
import type { SecretBox } from '../kernel/secrets.js';
import type { AgentWalletRepository, HistoryEntry, HistoryStatus, Policy, SigningContext, Wallet } from './agent-wallet.repository.js';
import { assetName, DEFAULT_CHAINS, type ChainConfig } from './chains.js';
import { readCreditBalance } from './credit.js';
import { hashTypedDataCached } from './eip712-hash.js';
import { decodeBase64Strict, p256PublicKey, parseDerSignature, verifyP256 } from './p256.js';
import { applicableSpendLimits, evaluatePolicies, SPEND_LIMITED_TYPE, spendLimitExceeded, transferFacts } from './policy-engine.js';
import { authorizationBytes, requestPayload, TIMESTAMP_TOLERANCE_SECONDS } from './protocol.js';
import { isValidAddress, toBigInt, TypedDataError, validateTypedData, type TypedDataInput, type ViemTypedData } from './typed-data.js';
import { signDigest } from './wallet-signer.js';

export type SignTypedDataRequest = components['schemas']['SignTypedDataRequest'];
export type AgentIdentity = components['schemas']['AgentIdentity'];

/** Who an authenticated agent request comes from. */
export interface AgentAuth {
  agentId: string;
  orgId: string;
  name: string;
  keyQuorumId: string;
  publicKey: string;
  walletId: string | null;
  /** Current keys of the agent's key quorum: who may make wallet authorization signatures. */
  quorumKeys: string[];
  /**
   * The wallet and policies read with the authentication, when the route signs (same statement,
   * same snapshot); without it, signTypedData reads them itself.
   */
  signing?: SigningContext;
}

/** How often (clock time) expired replay-protection rows are swept. */
const SWEEP_INTERVAL_MS = 60_000;

const TIMESTAMP_PATTERN = /^(0|[1-9][0-9]{0,11})$/;

function historyId(): string {
  // Opaque to clients (the contract only promises 1-64 characters); the prefix helps in logs.
  return `AWH_${randomToken()}`;
}

export class AgentWalletRuntimeService {
  private readonly chains: readonly ChainConfig[];
  private lastSweep = 0;

  constructor(
    private readonly repo: AgentWalletRepository,
    private readonly box: SecretBox,
    private readonly clock: Clock,
    options: { chains?: readonly ChainConfig[] } = {},
  ) {
    this.chains = options.chains ?? DEFAULT_CHAINS;
  }

  /**
   * Verifies the three X-Agent-* headers: well-formed, timestamp within the window, signature
   * valid over `METHOD\nROUTE_PATH\nTIMESTAMP`, key registered and not revoked, and not a replay
   * of an accepted signature (recognised by public key and r, so s ↔ n − s does not help). The
   * signature is checked before the database is asked: one statement then finds the agent and
   * remembers the signature. `withSigning` (sign-typed-data) reads the wallet and its policies in
   * that same statement.
   */
  async authenticateRequest(
    request: {
      method: string;
      routePath: string;
      publicKey: string | undefined;
      timestamp: string | undefined;
      signature: string | undefined;
    },
    options: { withSigning?: boolean } = {},
  ): Promise<AgentAuth> {
    const { publicKey, timestamp, signature } = request;
    if (!publicKey) throw unauthorized('Missing X-Agent-Pubkey header');
    if (!timestamp) throw unauthorized('Missing X-Agent-Timestamp header');
    if (!signature) throw unauthorized('Missing X-Agent-Signature header');
    const key = p256PublicKey(publicKey);
    if (!key) throw unauthorized('Malformed X-Agent-Pubkey header: expected standard base64 of a P-256 SubjectPublicKeyInfo');
    if (!TIMESTAMP_PATTERN.test(timestamp)) {
      throw unauthorized('Malformed X-Agent-Timestamp header: expected Unix time in whole seconds');
    }
    const der = decodeBase64Strict(signature);
    const parsed = der && parseDerSignature(der);
    if (!der || !parsed) throw unauthorized('Malformed X-Agent-Signature header: expected standard base64 of a DER ECDSA signature');

    const now = this.clock.now();
    const signedAt = Number(timestamp);
    if (Math.abs(unixSeconds(now) - signedAt) > TIMESTAMP_TOLERANCE_SECONDS) {
      throw unauthorized(`Request timestamp is outside the allowed window of ${TIMESTAMP_TOLERANCE_SECONDS} seconds`);
    }
    if (!verifyP256(key, requestPayload(request.method, request.routePath, timestamp), der)) {
      throw unauthorized('Invalid agent request signature');
    }

    // Remembered until the timestamp can no longer pass the window check above.
    const replay = {
      replayKey: createHash('sha256').update(publicKey).update(':').update(parsed.r).digest('hex'),
      expiresAt: new Date((signedAt + TIMESTAMP_TOLERANCE_SECONDS + 1) * 1000),
      now,
    };
    const found = await this.repo.authenticateAgent(publicKey, replay, options.withSigning === true);
    if (!found) throw unauthorized('Unknown agent public key');
    const { agent } = found;
    if (agent.revokedAt) throw unauthorized('Agent identity is revoked');
    if (!found.remembered) throw unauthorized('Replayed agent request signature');
    if (now.getTime() - this.lastSweep >= SWEEP_INTERVAL_MS) {
      this.lastSweep = now.getTime();
      await this.repo.deleteExpiredSignatures(now);
    }
    return {
      agentId: agent.id,
      orgId: agent.orgId,
      name: agent.name,
      keyQuorumId: agent.keyQuorumId,
      publicKey: agent.publicKey,
      walletId: agent.walletId,
      quorumKeys: agent.quorumKeys,
      ...(found.signing ? { signing: found.signing } : {}),
    };
  }

  /** The agent's wallet, scoped to its organization (an assignment never crosses organizations). */
  private async walletOf(auth: AgentAuth): Promise<Wallet | undefined> {
    if (!auth.walletId) return undefined;
    const wallet = await this.repo.findWallet(auth.walletId);
    return wallet && wallet.orgId === auth.orgId ? wallet : undefined;
  }

  async identity(auth: AgentAuth): Promise<AgentIdentity> {
    const wallet = await this.walletOf(auth);
    return {
      agentId: auth.agentId,
      name: auth.name,
      publicKey: auth.publicKey,
      keyQuorumId: auth.keyQuorumId,
      walletId: wallet?.id ?? null,
      walletAddress: wallet?.address ?? null,
      providerWalletId: wallet?.providerWalletId ?? null,
      appId: wallet?.appId ?? auth.orgId,
      revoked: false,
    };
  }

  async policiesOf(auth: AgentAuth): Promise<Policy[]> {
    const wallet = await this.walletOf(auth);
    return wallet ? this.repo.listPolicies(wallet.id) : [];
  }

  async historyOf(auth: AgentAuth, limit: number): Promise<HistoryEntry[]> {
    const wallet = await this.walletOf(auth);
    return wallet ? this.repo.listHistory(wallet.id, limit) : [];
  }

  async creditBalanceOf(auth: AgentAuth): Promise<{ balance: number; unit: string }> {
    const { balance, unit } = await readCreditBalance(this.repo, auth.orgId);
    return { balance, unit };
  }

  /**
   * Checks the wallet authorization signature, the typed data and the policies, then signs with
   * the wallet key. Every request that reaches the policy check is written to the history.
   * `url` is the full public URL of the route (what the authorization signature covers).
   */
  async signTypedData(auth: AgentAuth, body: SignTypedDataRequest, url: string): Promise<{ signature: Hex; walletAddress: string }> {
    // Read with the authentication on the HTTP path; one statement otherwise.
    const { wallet, policies } =
      auth.signing ?? (auth.walletId ? await this.repo.findSigningContext(auth.walletId, auth.orgId) : { wallet: undefined, policies: [] });
    if (!wallet) throw validationError('No wallet is assigned to this agent');

    const { signature: authorization, ...unsigned } = body;
    if (!this.authorizationValid(auth, authorization, authorizationBytes({ url, body: unsigned, appId: wallet.appId }))) {
      throw forbidden('Wallet authorization signature is invalid');
    }

    let typedData: ViemTypedData;
    try {
      typedData = validateTypedData(body.typed_data);
    } catch (err) {
      if (err instanceof TypedDataError) throw validationError(err.message);
      throw err;
    }

    const now = this.clock.now();
    const decision = evaluatePolicies(
      policies,
      { method: 'eth_signTypedData_v4', typedData: body.typed_data },
      { nowUnix: unixSeconds(now) },
    );
    const hash = hashTypedDataCached(typedData);
    const transfer = transferFacts(body.typed_data);
    const entry = (status: HistoryStatus, failureMessage: string | null): HistoryEntry => ({
      id: historyId(),
      orgId: auth.orgId,
      walletId: wallet.id,
      agentId: auth.agentId,
      type: 'sign_typed_data',
      status,
      ...this.transferSummary(body.typed_data),
      resourceUrl: body.payment_context?.resource_url ?? null,
      tokenContract: transfer?.contract ?? null,
      txHash: null,
      explorerUrl: null,
      failureMessage,
      primaryType: body.typed_data.primary_type,
      typedDataHash: hash,
      createdAt: now,
    });

    if (!decision.allowed) {
      await this.repo.insertHistory(entry('denied', decision.message));
      throw forbidden(decision.message);
    }

    // Recorded as signed before signing, inside the spend-limit check, so that concurrent
    // requests count each other; a signing failure turns the entry into `failed`.
    const signed = entry('signed', null);
    const limits = transfer ? applicableSpendLimits(policies, transfer) : [];
    const check = await this.repo.insertSignedWithinLimits(
      signed,
      transfer?.value ?? 0n,
      limits.map((limit) => ({ maxValue: limit.maxValue, since: new Date(now.getTime() - limit.windowHours * 3_600_000) })),
    );
    if (!check.ok) {
      const message = spendLimitExceeded(limits[check.index]!, check.spent, transfer!.value);
      await this.repo.insertHistory(entry('denied', message));
      throw forbidden(message);
    }
    try {
      const privateKey = this.box.open(wallet.privateKeySealed, wallet.id);
      try {
        return { signature: signDigest(Buffer.from(hash.slice(2), 'hex'), privateKey), walletAddress: wallet.address };
      } finally {
        privateKey.fill(0);
      }
    } catch (err) {
      await this.repo.markHistoryFailed(signed.id, 'Wallet signing failed');
      throw new AppError('INTERNAL_ERROR', 'Wallet signing failed', { details: { cause: (err as Error).name } });
    }
  }

  /** A P-256 signature by any current key of the agent's key quorum (1-of-n). */
  private authorizationValid(auth: AgentAuth, signature: string, payload: Buffer): boolean {
    const der = decodeBase64Strict(signature);
    if (!der || !parseDerSignature(der)) return false;
    return auth.quorumKeys.some((k) => {
      const key = p256PublicKey(k);
      return key !== undefined && verifyP256(key, payload, der);
    });
  }

  /** Destination, amount and asset of an EIP-3009 transfer authorization, for the history. */
  private transferSummary(td: TypedDataInput): Pick<HistoryEntry, 'destination' | 'amount' | 'asset' | 'chainId'> {
    const domain = td.domain;
    const chainId = domain.chainId !== undefined && Number.isSafeInteger(Number(domain.chainId)) ? Number(domain.chainId) : null;
    if (td.primary_type !== SPEND_LIMITED_TYPE) return { destination: null, amount: null, asset: null, chainId: null };
    // The request's own types define the message; only EIP-3009-shaped fields are summarized.
    const to = td.message.to;
    const value = toBigInt(td.message.value);
    return {
      destination: isValidAddress(to) ? getAddress(to) : null,
      amount: value !== undefined && value >= 0n ? value.toString() : null,
      asset: domain.verifyingContract ? assetName(this.chains, chainId, getAddress(domain.verifyingContract)) : null,
      chainId,
    };
  }
}
