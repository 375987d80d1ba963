/**
 * Kassa as an x402 v2 facilitator (`exact` scheme, EIP-3009 transferWithAuthorization) for an
 * organization's receiving wallets: `supported`, `verify` (no funds move) and `settle` (the
 * relayer submits the authorization, waits for the chain's confirmations, and the payment becomes
 * a PAID order through PaymentFlow). One settlement row per authorization makes a payload settle
 * once, however often or concurrently it is sent; the token's own nonce check backs it on chain.
 */
import { createHash } from 'node:crypto';
import {
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  getAddress,
  http,
  isAddress,
  parseAbi,
  parseSignature,
  recoverTypedDataAddress,
  type Chain,
  type Hex,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount, privateKeyToAddress } from 'viem/accounts';
import canonicalize from 'canonicalize';
import type { components } from '../../generated/merchant.js';
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { Clock } from '../kernel/clock.js';
import { conflict, notFound } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { Logger } from '../kernel/logger.js';
import type { SecretBox } from '../kernel/secrets.js';
import type { ChainConfig, CryptoConfig, TokenConfig } from './crypto-config.js';
import type { CryptoRepository } from './crypto.repository.js';
import { viemRelayer, type RelayerNonces } from './relayer.js';
import type { X402Relayer, X402Repository, X402Settlement } from './x402.repository.js';

export type X402FacilitatorRequest = components['schemas']['X402FacilitatorRequest'];
export type X402VerifyResponse = components['schemas']['X402VerifyResponse'];
export type X402SettleResponse = components['schemas']['X402SettleResponse'];
export type X402SupportedResponse = components['schemas']['X402SupportedResponse'];

const EIP3009_ABI = parseAbi([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function balanceOf(address account) view returns (uint256)',
  'function name() view returns (string)',
  'function version() view returns (string)',
]);

const AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

/** Seconds an authorization must still be valid for when verified (time to submit it), as the reference facilitator. */
const VALIDITY_MARGIN_SECONDS = 6;
/** A claim left SUBMITTING this long (its process died before submitting) may be taken over. */
const STALE_CLAIM_MS = 120_000;
/** How long a settled transaction is followed for reorganizations (as the chain watcher follows a vanished transfer). */
const REORG_FOLLOW_MS = 3600_000;
const REORG_FOLLOW_BATCH = 500;
/** How long a second settle of the same payload waits for the first one's outcome. */
const WAIT_FOR_SETTLEMENT_MS = 90_000;
const RELAYER_ID = 'default';

/** A settle's answer, the order it recorded (when it succeeded) and whether this call submitted its transaction. */
export interface Settled {
  response: X402SettleResponse;
  orderId?: string;
  submittedHere?: boolean;
}

class Invalid extends Error {
  constructor(
    readonly reason: string,
    message: string,
    readonly payer?: string,
  ) {
    super(message);
  }
}

interface CheckedPayment {
  chain: ChainConfig;
  token: TokenConfig;
  payTo: `0x${string}`;
  from: `0x${string}`;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
  signature: Hex;
  payloadHash: string;
  resource: { url: string; description?: string } | undefined;
  /** Kassa's settlement of this authorization, when one exists. */
  recorded: X402Settlement | undefined;
}

/** Reads and submissions on one chain (viem over the chain's RPC URL). */
export interface X402Chain {
  authorizationUsed(token: `0x${string}`, from: `0x${string}`, nonce: Hex): Promise<boolean>;
  balanceOf(token: `0x${string}`, owner: `0x${string}`): Promise<bigint>;
  /** Simulates the call from the relayer: throws with the revert reason when it would fail. */
  simulate(relayer: `0x${string}`, token: `0x${string}`, args: TransferArgs): Promise<void>;
  submit(relayerKey: Hex, token: `0x${string}`, args: TransferArgs): Promise<Hex>;
  /** The token's EIP-712 domain name and version (FiatToken's `name()` and `version()`). */
  tokenDomain(token: `0x${string}`): Promise<{ name: string; version: string }>;
  /** The mined transaction's status and block; null when it is not in the canonical chain. */
  receipt(txHash: Hex): Promise<{ status: 'success' | 'reverted'; blockNumber: bigint; blockHash: Hex } | null>;
  /** Whether the node knows the transaction at all (mined or pending). */
  transactionKnown(txHash: Hex): Promise<boolean>;
  blockNumber(): Promise<bigint>;
  /** Waits until the transaction has `confirmations` blocks (its own included); its status. */
  waitFor(txHash: Hex, confirmations: number): Promise<'success' | 'reverted'>;
}

type TransferArgs = readonly [`0x${string}`, `0x${string}`, bigint, bigint, bigint, Hex, number, Hex, Hex];

/** With `nonces`, submissions take their nonce from it (one per transaction across processes; src/crypto-payments/relayer.ts). */
export function viemX402Chain(chain: ChainConfig, nonces?: RelayerNonces): X402Chain {
  const relayed = nonces && viemRelayer(chain, nonces);
  const transport = http(chain.rpcUrl, { retryCount: 1 });
  const viemChain: Chain = {
    id: chain.chainId,
    name: chain.name,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [chain.rpcUrl] } },
  };
  const client = createPublicClient({ chain: viemChain, transport, pollingInterval: 250 });
  return {
    authorizationUsed: (token, from, nonce) =>
      client.readContract({ address: token, abi: EIP3009_ABI, functionName: 'authorizationState', args: [from, nonce] }),
    balanceOf: (token, owner) => client.readContract({ address: token, abi: EIP3009_ABI, functionName: 'balanceOf', args: [owner] }),
    tokenDomain: async (token) => {
      const [name, version] = await Promise.all([
        client.readContract({ address: token, abi: EIP3009_ABI, functionName: 'name' }),
        client.readContract({ address: token, abi: EIP3009_ABI, functionName: 'version' }),
      ]);
      return { name, version };
    },
    simulate: async (relayer, token, args) => {
      await client.simulateContract({ account: relayer, address: token, abi: EIP3009_ABI, functionName: 'transferWithAuthorization', args });
    },
    submit: async (relayerKey, token, args) => {
      if (relayed) return relayed.submit(relayerKey, token, encodeFunctionData({ abi: EIP3009_ABI, functionName: 'transferWithAuthorization', args }));
      const wallet = createWalletClient({ account: privateKeyToAccount(relayerKey), chain: viemChain, transport });
      return wallet.writeContract({ address: token, abi: EIP3009_ABI, functionName: 'transferWithAuthorization', args });
    },
    receipt: async (hash) => {
      try {
        const receipt = await client.getTransactionReceipt({ hash });
        return { status: receipt.status, blockNumber: receipt.blockNumber, blockHash: receipt.blockHash };
      } catch (err) {
        if ((err as Error).name === 'TransactionReceiptNotFoundError') return null;
        throw err;
      }
    },
    transactionKnown: async (hash) => {
      try {
        await client.getTransaction({ hash });
        return true;
      } catch (err) {
        if ((err as Error).name === 'TransactionNotFoundError') return false;
        throw err;
      }
    },
    blockNumber: () => client.getBlockNumber({ cacheTime: 0 }),
    waitFor: async (txHash, confirmations) => {
      const receipt = await client.waitForTransactionReceipt({ hash: txHash, confirmations: Math.max(1, confirmations), timeout: 600_000 });
      return receipt.status;
    },
  };
}

export interface CatalogPriceLookup {
  /** The product a catalog price belongs to (paywall resources name their price). */
  productOfPrice(orgId: string, priceId: string): Promise<{ productId: string; name: string } | undefined>;
}

export class X402FacilitatorService {
  private readonly chains = new Map<number, X402Chain>();
  private readonly domains = new Map<string, Promise<{ name: string; version: string }>>();

  constructor(
    private readonly repo: X402Repository,
    private readonly wallets: Pick<CryptoRepository, 'listWallets' | 'findWallet'>,
    private readonly payments: PaymentFlow,
    private readonly config: CryptoConfig,
    private readonly box: SecretBox,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly options: { chainFor?: (chain: ChainConfig) => X402Chain; prices?: CatalogPriceLookup; paywallUrlPrefix?: string; relayerNonces?: RelayerNonces } = {},
  ) {}

  /** The chain access of one configured chain (one client per chain and process). */
  chainClient(chain: ChainConfig): X402Chain {
    let client = this.chains.get(chain.chainId);
    if (!client) {
      client = this.options.chainFor ? this.options.chainFor(chain) : viemX402Chain(chain, this.options.relayerNonces);
      this.chains.set(chain.chainId, client);
    }
    return client;
  }

  /** A token's EIP-712 domain (name, version), read from the chain once per process. */
  tokenDomain(chain: ChainConfig, token: `0x${string}`): Promise<{ name: string; version: string }> {
    const key = `${chain.chainId}:${token}`;
    let domain = this.domains.get(key);
    if (!domain) {
      domain = this.chainClient(chain).tokenDomain(token);
      // A failed read (RPC down) is not remembered.
      domain.catch(() => this.domains.delete(key));
      this.domains.set(key, domain);
    }
    return domain;
  }

  /** Creates the relayer account (once): its key is generated here and stored sealed. */
  async createRelayer(): Promise<{ address: string; createdAt: Date }> {
    const key = generatePrivateKey();
    const relayer: X402Relayer = {
      id: RELAYER_ID,
      address: privateKeyToAddress(key),
      // The row id is the associated data: a sealed key copied elsewhere fails to open.
      privateKeySealed: this.box.seal(Buffer.from(key.slice(2), 'hex'), `x402-relayer:${RELAYER_ID}`),
      createdAt: this.clock.now(),
    };
    if (!(await this.repo.insertRelayer(relayer))) throw conflict('The x402 relayer exists already');
    return { address: relayer.address, createdAt: relayer.createdAt };
  }

  async relayer(): Promise<{ address: string; createdAt: Date }> {
    const relayer = await this.repo.findRelayer();
    if (!relayer) throw notFound('x402 relayer');
    return { address: relayer.address, createdAt: relayer.createdAt };
  }

  async supported(orgId: string): Promise<X402SupportedResponse> {
    const wallets = await this.wallets.listWallets(orgId);
    const kinds = this.config.chains
      .filter((chain) => wallets.some((w) => w.chainId === chain.chainId))
      .map((chain) => ({ x402Version: 2 as const, scheme: 'exact' as const, network: `eip155:${chain.chainId}` }));
    const relayer = await this.repo.findRelayer();
    return { kinds, extensions: [], signers: relayer ? { 'eip155:*': [relayer.address] } : {} };
  }

  async verify(orgId: string, request: X402FacilitatorRequest): Promise<X402VerifyResponse> {
    try {
      const payment = await this.check(orgId, request);
      // A settled (or settling) authorization is never valid again; a failed one moved nothing.
      if (payment.recorded && payment.recorded.status !== 'FAILED') {
        throw new Invalid('invalid_exact_evm_nonce_already_used', 'This authorization was already settled', payment.from);
      }
      await this.checkOnChain(payment);
      return { isValid: true, payer: payment.from };
    } catch (err) {
      if (err instanceof Invalid) return { isValid: false, invalidReason: err.reason, invalidMessage: err.message, ...(err.payer ? { payer: err.payer } : {}) };
      throw err;
    }
  }

  async settle(orgId: string, request: X402FacilitatorRequest): Promise<X402SettleResponse> {
    return (await this.settleRecorded(orgId, request)).response;
  }

  /**
   * settle(), also telling which order the payment became and whether this call submitted its
   * transaction (a replay of a settled payload gets the first settlement's answer, submittedHere false).
   */
  async settleRecorded(orgId: string, request: X402FacilitatorRequest): Promise<Settled> {
    const network = request.paymentRequirements.network;
    let payment: CheckedPayment;
    try {
      payment = await this.check(orgId, request);
    } catch (err) {
      if (err instanceof Invalid) return this.failure(network, err.reason, err.message, err.payer);
      throw err;
    }
    const now = this.clock.now();
    const candidate: X402Settlement = {
      id: newId('X4S'),
      orgId,
      chainId: payment.chain.chainId,
      token: payment.token.address,
      payer: payment.from,
      nonce: payment.nonce,
      payTo: payment.payTo,
      value: payment.value.toString(),
      payloadHash: payment.payloadHash,
      resourceUrl: payment.resource?.url ?? null,
      priceId: this.paywallPriceId(payment.resource?.url),
      status: 'SUBMITTING',
      txHash: null,
      orderId: null,
      errorReason: null,
      createdAt: now,
      updatedAt: now,
    };
    const claimed = await this.repo.claim(candidate);
    if (claimed) return this.submitAndRecord(payment, claimed);
    return this.followExisting(payment, candidate);
  }

  /**
   * One pass of the finisher job: settlements left SUBMITTED for longer than STALE_CLAIM_MS (the
   * settle that submitted them died or gave up before recording) are leased and finished from the
   * chain: a confirmed transaction becomes the order (once, whoever else records it too), a
   * reverted one FAILED, a dropped one (unknown to the node) FAILED so that the payload can be
   * settled again; a pending or not yet confirmed one is looked at again once stale. Safe with any
   * number of workers: the lease skips rows another worker holds, and every write is conditional.
   * Returns how many settlements it finished.
   */
  async finishSubmitted(limit = 50): Promise<number> {
    const now = this.clock.now();
    const leased = await this.repo.leaseStale('SUBMITTED', new Date(now.getTime() - STALE_CLAIM_MS), now, limit);
    let finished = 0;
    for (const settlement of leased) {
      try {
        if (await this.finish(settlement)) finished++;
      } catch (err) {
        // One unreachable RPC must not stop the others; the row is looked at again once stale.
        this.logger.warn({ err, settlementId: settlement.id, chainId: settlement.chainId }, 'x402 settlement could not be finished; retrying later');
      }
    }
    return finished;
  }

  /**
   * The finisher job's reorganization check, as the chain watcher's for checkout transfers: each
   * settlement settled within REORG_FOLLOW_MS is looked up by its receipt. Gone from the canonical
   * chain (or reverted there) → REMOVED and its order FAILED (`order.failed`); back with the
   * chain's confirmations → SETTLED and its order PAID again (`order.paid`). Every write is a
   * compare-and-set on the status read, so two workers apply each change once. Returns how many changed.
   */
  async followSettled(): Promise<number> {
    const now = this.clock.now();
    const settlements = await this.repo.settledSince(new Date(now.getTime() - REORG_FOLLOW_MS), REORG_FOLLOW_BATCH);
    let changed = 0;
    for (const settlement of settlements) {
      try {
        if (await this.followOne(settlement)) changed++;
      } catch (err) {
        this.logger.warn({ err, settlementId: settlement.id, chainId: settlement.chainId }, 'x402 settlement could not be checked for a reorganization; retrying later');
      }
    }
    return changed;
  }

  private async followOne(settlement: X402Settlement): Promise<boolean> {
    const chain = this.config.chains.find((c) => c.chainId === settlement.chainId);
    const token = chain?.tokens.find((t) => t.address.toLowerCase() === settlement.token.toLowerCase());
    if (!chain || !token) return false;
    const client = this.chainClient(chain);
    const txHash = settlement.txHash as Hex;
    const receipt = await client.receipt(txHash);
    const onChain = receipt?.status === 'success';
    const network = `eip155:${chain.chainId}`;
    if (settlement.status === 'SETTLED' && !onChain) {
      if (!(await this.repo.transition(settlement.id, 'SETTLED', { status: 'REMOVED', updatedAt: this.clock.now() }))) return false;
      this.logger.warn({ settlementId: settlement.id, txHash, chainId: chain.chainId }, 'settled x402 transaction vanished from the chain (reorganization); its order is failed');
      await this.payments.applyX402Removed({ chain: network, txHash, recipient: getAddress(settlement.payTo) });
      return true;
    }
    if (settlement.status === 'REMOVED' && onChain) {
      const confirmations = (await client.blockNumber()) - receipt.blockNumber + 1n;
      if (confirmations < BigInt(Math.max(1, chain.confirmations))) return false;
      if (!(await this.repo.transition(settlement.id, 'REMOVED', { status: 'SETTLED', updatedAt: this.clock.now() }))) return false;
      this.logger.info({ settlementId: settlement.id, txHash }, 'reorganized x402 transaction is back on the chain; its order is paid again');
      await this.payments.applyX402Settlement({
        orgId: settlement.orgId,
        chain: network,
        txHash,
        fromAddress: getAddress(settlement.payer),
        recipient: getAddress(settlement.payTo),
        valueUnits: Number(settlement.value),
        currency: token.symbol,
        settlementId: settlement.id,
        product: await this.productFor(settlement.orgId, settlement.priceId, settlement.resourceUrl ? { url: settlement.resourceUrl } : undefined),
      });
      return true;
    }
    return false;
  }

  private async finish(settlement: X402Settlement): Promise<boolean> {
    const chain = this.config.chains.find((c) => c.chainId === settlement.chainId);
    const token = chain?.tokens.find((t) => t.address.toLowerCase() === settlement.token.toLowerCase());
    // A chain or token no longer configured: left as it is for the operator.
    if (!chain || !token || !settlement.txHash) return false;
    const client = this.chainClient(chain);
    const txHash = settlement.txHash as Hex;
    const receipt = await client.receipt(txHash);
    const fail = (reason: string) =>
      this.repo.transition(settlement.id, 'SUBMITTED', { status: 'FAILED', errorReason: reason, updatedAt: this.clock.now() }, settlement.updatedAt);
    if (receipt?.status === 'reverted') return fail('invalid_exact_evm_transaction_failed');
    if (receipt) {
      const confirmations = (await client.blockNumber()) - receipt.blockNumber + 1n;
      if (confirmations < BigInt(Math.max(1, chain.confirmations))) return false;
      await this.recordSettled(settlement, chain, token, txHash, settlement.resourceUrl ? { url: settlement.resourceUrl } : undefined);
      this.logger.info({ settlementId: settlement.id, txHash }, 'x402 settlement finished by the finisher job');
      return true;
    }
    if (await client.transactionKnown(txHash)) return false;
    // Dropped. The nonce decides: unused, the payload may be settled again; used, another transaction spent it.
    const used = await client.authorizationUsed(token.address, getAddress(settlement.payer), settlement.nonce as Hex);
    this.logger.warn({ settlementId: settlement.id, txHash, nonceUsed: used }, 'x402 settlement transaction dropped');
    return fail(used ? 'invalid_exact_evm_nonce_already_used' : 'invalid_exact_evm_transaction_failed');
  }

  /** Another settle of this authorization got there first: answer its outcome (or take over a dead claim). */
  private async followExisting(payment: CheckedPayment, candidate: X402Settlement): Promise<Settled> {
    const network = `eip155:${payment.chain.chainId}`;
    const deadline = Date.now() + WAIT_FOR_SETTLEMENT_MS;
    for (;;) {
      const existing = await this.repo.findByAuthorization(candidate.chainId, candidate.token, candidate.payer, candidate.nonce);
      if (!existing) {
        const claimed = await this.repo.claim(candidate);
        if (claimed) return this.submitAndRecord(payment, claimed);
        continue;
      }
      if (existing.orgId !== candidate.orgId || existing.payloadHash !== candidate.payloadHash) {
        return this.failure(network, 'invalid_exact_evm_nonce_already_used', 'This authorization nonce was already used by another payment', payment.from);
      }
      if (existing.status === 'REMOVED') {
        return this.failure(network, 'invalid_exact_evm_transaction_failed', `Transaction ${existing.txHash} was reorganized off the chain; it counts again if it is mined again`, payment.from);
      }
      if (existing.status === 'SETTLED') return { response: { success: true, payer: payment.from, transaction: existing.txHash!, network }, orderId: existing.orderId ?? undefined, submittedHere: false };
      if (existing.status === 'FAILED') {
        // A failed settlement moved nothing (reverted or never sent); the same payload may try again.
        const now = this.clock.now();
        if (await this.repo.transition(existing.id, 'FAILED', { status: 'SUBMITTING', txHash: null, errorReason: null, updatedAt: now })) {
          return this.submitAndRecord(payment, { ...existing, status: 'SUBMITTING', txHash: null, updatedAt: now });
        }
        continue;
      }
      const stale = this.clock.now().getTime() - existing.updatedAt.getTime() > STALE_CLAIM_MS;
      if (existing.status === 'SUBMITTED' && existing.txHash && stale) {
        // Submitted by a settle that did not finish: confirm and record the same transaction.
        return this.confirmAndRecord(payment, existing, existing.txHash as Hex, false);
      }
      if (existing.status === 'SUBMITTING' && stale) {
        const now = this.clock.now();
        if (await this.repo.transition(existing.id, 'SUBMITTING', { updatedAt: now }, existing.updatedAt)) {
          return this.submitAndRecord(payment, { ...existing, updatedAt: now });
        }
        continue;
      }
      if (Date.now() > deadline) {
        return this.failure(network, 'settlement_pending', 'Another settlement of this payment is still in progress; retry later', payment.from);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  private async submitAndRecord(payment: CheckedPayment, claim: X402Settlement): Promise<Settled> {
    const network = `eip155:${payment.chain.chainId}`;
    const fail = async (reason: string, message: string) => {
      await this.repo.transition(claim.id, claim.status === 'SUBMITTED' ? 'SUBMITTED' : 'SUBMITTING', {
        status: 'FAILED',
        errorReason: reason,
        updatedAt: this.clock.now(),
      });
      return this.failure(network, reason, message, payment.from);
    };
    try {
      await this.checkOnChain(payment);
    } catch (err) {
      if (err instanceof Invalid) return fail(err.reason, err.message);
      throw err;
    }
    const relayer = await this.repo.findRelayer();
    if (!relayer) return fail('unexpected_settle_error', 'No x402 relayer is configured (npm run -s admin -- x402 relayer-create)');
    const key = this.box.open(relayer.privateKeySealed, `x402-relayer:${relayer.id}`);
    let txHash: Hex;
    try {
      txHash = await this.chainClient(payment.chain).submit(`0x${key.toString('hex')}`, payment.token.address, transferArgs(payment));
    } catch (err) {
      this.logger.warn({ err: { name: (err as Error).name }, chainId: payment.chain.chainId }, 'x402 settlement submission failed');
      return fail('invalid_exact_evm_transaction_failed', 'The chain refused the transferWithAuthorization transaction');
    } finally {
      key.fill(0);
    }
    const submitted = { ...claim, status: 'SUBMITTED' as const, txHash };
    await this.repo.transition(claim.id, 'SUBMITTING', { status: 'SUBMITTED', txHash, updatedAt: this.clock.now() });
    return this.confirmAndRecord(payment, submitted, txHash, true);
  }

  private async confirmAndRecord(payment: CheckedPayment, settlement: X402Settlement, txHash: Hex, submittedHere: boolean): Promise<Settled> {
    const network = `eip155:${payment.chain.chainId}`;
    const status = await this.chainClient(payment.chain).waitFor(txHash, payment.chain.confirmations);
    if (status !== 'success') {
      await this.repo.transition(settlement.id, 'SUBMITTED', { status: 'FAILED', errorReason: 'invalid_exact_evm_transaction_failed', updatedAt: this.clock.now() });
      return this.failure(network, 'invalid_exact_evm_transaction_failed', `Transaction ${txHash} reverted`, payment.from);
    }
    const orderId = await this.recordSettled(settlement, payment.chain, payment.token, txHash, payment.resource);
    return { response: { success: true, payer: payment.from, transaction: txHash, network }, orderId, submittedHere };
  }

  /** The confirmed transaction of a SUBMITTED settlement becomes its PAID order (once) and the settlement SETTLED. */
  private async recordSettled(
    settlement: X402Settlement,
    chain: ChainConfig,
    token: TokenConfig,
    txHash: Hex,
    resource: CheckedPayment['resource'],
  ): Promise<string> {
    const product = await this.productFor(settlement.orgId, settlement.priceId, resource);
    const { order } = await this.payments.applyX402Settlement({
      orgId: settlement.orgId,
      chain: `eip155:${chain.chainId}`,
      txHash,
      fromAddress: getAddress(settlement.payer),
      recipient: getAddress(settlement.payTo),
      valueUnits: Number(settlement.value),
      currency: token.symbol,
      settlementId: settlement.id,
      product,
    });
    // Conditional: whoever confirmed the same transaction first (a settle, the finisher job) wrote it already.
    await this.repo.transition(settlement.id, 'SUBMITTED', { status: 'SETTLED', orderId: order.id, updatedAt: this.clock.now() });
    return order.id;
  }

  private async productFor(orgId: string, priceId: string | null, resource: CheckedPayment['resource']) {
    if (priceId && this.options.prices) {
      const product = await this.options.prices.productOfPrice(orgId, priceId);
      if (product) return product;
    }
    const name = resource?.description?.trim() || resource?.url || 'x402 payment';
    return { productId: null, name: name.slice(0, 255) };
  }

  private paywallPriceId(url: string | undefined): string | null {
    const prefix = this.options.paywallUrlPrefix;
    if (!url || !prefix || !url.startsWith(prefix)) return null;
    const id = url.slice(prefix.length).split(/[/?#]/)[0];
    return id || null;
  }

  private failure(network: string, reason: string, message: string, payer?: string): Settled {
    return { response: { success: false, errorReason: reason, errorMessage: message, transaction: '', network, ...(payer ? { payer } : {}) } };
  }

  /** Every check that needs no chain: terms, payee, token, amount, signature, window, Kassa's own record of the nonce. */
  private async check(orgId: string, request: X402FacilitatorRequest): Promise<CheckedPayment> {
    const { paymentPayload, paymentRequirements: req } = request;
    const accepted = paymentPayload.accepted;
    if (req.scheme !== 'exact' || accepted.scheme !== 'exact') throw new Invalid('invalid_exact_evm_scheme', 'Only the exact scheme is supported');
    if (accepted.network !== req.network) throw new Invalid('invalid_exact_evm_network_mismatch', 'The payment was made for another network');
    const chainMatch = /^eip155:([0-9]{1,12})$/.exec(req.network);
    const chain = chainMatch ? this.config.chains.find((c) => c.chainId === Number(chainMatch[1])) : undefined;
    if (!chain) throw new Invalid('invalid_network', `Network ${req.network} is not configured on this facilitator`);
    const token = chain.tokens.find((t) => t.address.toLowerCase() === req.asset.toLowerCase());
    if (!token) throw new Invalid('invalid_payment_requirements', `Asset ${req.asset} is not a configured stablecoin on ${chain.name}`);
    if (accepted.asset.toLowerCase() !== req.asset.toLowerCase() || accepted.amount !== req.amount || accepted.payTo.toLowerCase() !== req.payTo.toLowerCase()) {
      throw new Invalid('invalid_payment_requirements', 'The payment accepted other terms than these requirements');
    }
    const wallet = await this.wallets.findWallet(orgId, chain.chainId);
    if (!wallet || !isAddress(req.payTo, { strict: false }) || getAddress(req.payTo) !== wallet.address) {
      throw new Invalid('invalid_exact_evm_recipient_mismatch', `payTo must be the organization's receiving wallet on ${chain.name}`);
    }
    const extra = req.extra as { name?: unknown; version?: unknown } | undefined;
    if (typeof extra?.name !== 'string' || typeof extra?.version !== 'string') {
      throw new Invalid('invalid_exact_evm_missing_eip712_domain', 'paymentRequirements.extra must give the token\'s EIP-712 name and version');
    }

    const payload = paymentPayload.payload as { signature?: unknown; authorization?: Record<string, unknown> };
    const auth = payload.authorization;
    if (!auth || typeof payload.signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(payload.signature)) {
      throw new Invalid('unsupported_payload_type', 'Expected an EIP-3009 payload: {signature, authorization}');
    }
    const address = (v: unknown) => (typeof v === 'string' && isAddress(v, { strict: false }) ? getAddress(v) : undefined);
    const uint = (v: unknown) => (typeof v === 'string' && /^[0-9]{1,78}$/.test(v) ? BigInt(v) : undefined);
    const from = address(auth.from);
    const to = address(auth.to);
    const value = uint(auth.value);
    const validAfter = uint(auth.validAfter);
    const validBefore = uint(auth.validBefore);
    const nonce = typeof auth.nonce === 'string' && /^0x[0-9a-fA-F]{64}$/.test(auth.nonce) ? (auth.nonce.toLowerCase() as Hex) : undefined;
    if (!from || !to || value === undefined || validAfter === undefined || validBefore === undefined || !nonce) {
      throw new Invalid('invalid_exact_evm_authorization_value', 'The authorization is malformed');
    }
    if (to !== wallet.address) throw new Invalid('invalid_exact_evm_recipient_mismatch', 'The authorization pays another address than payTo', from);
    if (value !== BigInt(req.amount)) {
      throw new Invalid('invalid_exact_evm_payload_authorization_value_mismatch', `The authorization is for ${value} units, the price is ${req.amount}`, from);
    }
    const signature = payload.signature as Hex;
    let signer: string;
    try {
      signer = await recoverTypedDataAddress({
        domain: { name: extra.name, version: extra.version, chainId: chain.chainId, verifyingContract: token.address },
        types: AUTHORIZATION_TYPES,
        primaryType: 'TransferWithAuthorization',
        message: { from, to, value, validAfter, validBefore, nonce },
        signature,
      });
    } catch {
      throw new Invalid('invalid_exact_evm_failed_to_parse_signature', 'The signature cannot be parsed', from);
    }
    if (signer !== from) throw new Invalid('invalid_exact_evm_signature', 'The signature is not by the authorization\'s from address', from);
    const nowSeconds = BigInt(Math.floor(this.clock.now().getTime() / 1000));
    if (validBefore < nowSeconds + BigInt(VALIDITY_MARGIN_SECONDS)) {
      throw new Invalid('invalid_exact_evm_payload_authorization_valid_before', `The authorization expired at ${new Date(Number(validBefore) * 1000).toISOString()}`, from);
    }
    if (validAfter > nowSeconds) {
      throw new Invalid('invalid_exact_evm_payload_authorization_valid_after', `The authorization is valid only from ${new Date(Number(validAfter) * 1000).toISOString()}`, from);
    }
    // One canonical form of the whole payment: the same payload settles to the same result.
    const payloadHash = createHash('sha256')
      .update(canonicalize({ orgId, network: req.network, asset: token.address, payTo: wallet.address, from, value: value.toString(), validAfter: validAfter.toString(), validBefore: validBefore.toString(), nonce, signature: signature.toLowerCase() })!)
      .digest('hex');
    const resource = paymentPayload.resource ? { url: paymentPayload.resource.url, ...(paymentPayload.resource.description ? { description: paymentPayload.resource.description } : {}) } : undefined;
    const recorded = await this.repo.findByAuthorization(chain.chainId, token.address, from, nonce);
    return { chain, token, payTo: wallet.address, from, value, validAfter, validBefore, nonce, signature, payloadHash, resource, recorded };
  }

  /** The chain's view: nonce unused, balance sufficient, and the call would succeed from the relayer. */
  private async checkOnChain(payment: CheckedPayment): Promise<void> {
    const chain = this.chainClient(payment.chain);
    if (await chain.authorizationUsed(payment.token.address, payment.from, payment.nonce)) {
      throw new Invalid('invalid_exact_evm_nonce_already_used', 'This authorization nonce is already used on chain', payment.from);
    }
    if ((await chain.balanceOf(payment.token.address, payment.from)) < payment.value) {
      throw new Invalid('invalid_exact_evm_insufficient_balance', `The payer holds less than ${payment.value} units`, payment.from);
    }
    const relayer = await this.repo.findRelayer();
    if (relayer) {
      try {
        await chain.simulate(relayer.address, payment.token.address, transferArgs(payment));
      } catch {
        throw new Invalid('invalid_exact_evm_transaction_simulation_failed', 'The token contract would refuse this authorization', payment.from);
      }
    }
  }
}

function transferArgs(p: CheckedPayment): TransferArgs {
  const { r, s, v, yParity } = parseSignature(p.signature);
  const vNumber = v !== undefined ? Number(v) : yParity + 27;
  return [p.from, p.payTo, p.value, p.validAfter, p.validBefore, p.nonce, vNumber, r, s];
}
