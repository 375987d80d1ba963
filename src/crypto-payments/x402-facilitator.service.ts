/**
 * Kassa as an x402 v2 facilitator (`exact` scheme, EIP-3009 transferWithAuthorization) for an
 * organization's receiving wallets: `supported`, `verify` (no funds move) and `settle` (the
 * relayer submits the authorization, waits for the chain's confirmations, and the payment becomes
 * a PAID order through PaymentFlow). This class only composes the units:
 *   x402-verification.ts (the buyer's authorization against the merchant's requirements),
 *   x402-sale.ts (what the order sells, from merchant-authenticated data only),
 *   x402-settlement.ts (claim, submission, order, finisher), x402-chain.ts (the node).
 * The buyer's PaymentPayload enters as a `BuyerPayment` (no `resource`), the merchant's half as
 * `MerchantTerms` (x402-terms.ts).
 */
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import type { components } from '../../generated/merchant.js';
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { Clock } from '../kernel/clock.js';
import { conflict, notFound } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import type { SecretBox } from '../kernel/secrets.js';
import type { ChainConfig, CryptoConfig } from './crypto-config.js';
import type { CryptoRepository } from './crypto.repository.js';
import { unavailableWhenUnreachable, viemX402Chain, type X402Chain } from './x402-chain.js';
import type { RelayerNonces } from './relayer.js';
import { X402_REASONS, X402Refusal } from './x402-reasons.js';
import { X402Sales, type X402Catalog } from './x402-sale.js';
import { settleFailure, X402Settler, type Settled } from './x402-settlement.js';
import { buyerPayment, type BuyerPayment, type MerchantTerms, type PaymentRequirements } from './x402-terms.js';
import { X402Verifier, type CheckedPayment } from './x402-verification.js';
import type { X402Relayer, X402Repository } from './x402.repository.js';

export type { X402Chain } from './x402-chain.js';
export { viemX402Chain } from './x402-chain.js';
export type { Settled } from './x402-settlement.js';
export type X402FacilitatorRequest = components['schemas']['X402FacilitatorRequest'];
export type X402VerifyResponse = components['schemas']['X402VerifyResponse'];
export type X402SettleResponse = components['schemas']['X402SettleResponse'];
export type X402SupportedResponse = components['schemas']['X402SupportedResponse'];
export type X402SettlementView = components['schemas']['X402Settlement'];

const RELAYER_ID = 'default';

export class X402FacilitatorService {
  private readonly chains = new Map<number, X402Chain>();
  private readonly domains = new Map<string, Promise<{ name: string; version: string }>>();
  private readonly verifier: X402Verifier;
  private readonly settler: X402Settler;
  readonly sales: X402Sales;

  constructor(
    private readonly repo: X402Repository,
    private readonly wallets: Pick<CryptoRepository, 'listWallets' | 'findWallet'>,
    payments: PaymentFlow,
    private readonly config: CryptoConfig,
    private readonly box: SecretBox,
    private readonly clock: Clock,
    logger: Logger,
    private readonly options: { chainFor?: (chain: ChainConfig) => X402Chain; catalog?: X402Catalog; relayerNonces?: RelayerNonces } = {},
  ) {
    const chainOf = (chain: ChainConfig) => this.chainClient(chain);
    this.sales = new X402Sales(options.catalog);
    this.verifier = new X402Verifier(config, wallets, repo, chainOf, clock);
    this.settler = new X402Settler(repo, this.verifier, this.sales, payments, config, box, chainOf, clock, logger);
  }

  /** The chain access of one configured chain (one client per chain and process). */
  chainClient(chain: ChainConfig): X402Chain {
    let client = this.chains.get(chain.chainId);
    if (!client) {
      client = unavailableWhenUnreachable(chain, this.options.chainFor ? this.options.chainFor(chain) : viemX402Chain(chain, this.options.relayerNonces));
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

  /** x402 `verify` for a merchant's server: its requirements (authenticated by its API key) and the buyer's payload. */
  async verify(orgId: string, request: X402FacilitatorRequest): Promise<X402VerifyResponse> {
    try {
      const { payment } = await this.checkMerchantRequest(orgId, request);
      // A settled (or settling) authorization is never valid again; a failed one moved nothing.
      if (payment.recorded && payment.recorded.status !== 'FAILED') {
        throw new X402Refusal(X402_REASONS.nonceUsed, 'This authorization was already settled', payment.from);
      }
      await this.verifier.checkOnChain(payment);
      return { isValid: true, payer: payment.from };
    } catch (err) {
      if (err instanceof X402Refusal) return { isValid: false, invalidReason: err.reason, invalidMessage: err.message, ...(err.payer ? { payer: err.payer } : {}) };
      throw err;
    }
  }

  /** x402 `settle` for a merchant's server. */
  async settle(orgId: string, request: X402FacilitatorRequest): Promise<X402SettleResponse> {
    let checked: { payment: CheckedPayment; terms: MerchantTerms };
    try {
      checked = await this.checkMerchantRequest(orgId, request);
    } catch (err) {
      if (err instanceof X402Refusal) return settleFailure(request.paymentRequirements.network, err.reason, err.message, err.payer).response;
      throw err;
    }
    return (await this.settler.settle(orgId, checked.payment, checked.terms)).response;
  }

  /**
   * Settles a payment of Kassa's own paywall: `terms` are Kassa's (its requirements and the
   * paywall's sale), the buyer's payload only pays. Also tells which order the payment became and
   * whether this call submitted its transaction.
   */
  async settlePaywall(orgId: string, buyer: BuyerPayment, terms: MerchantTerms): Promise<Settled> {
    let payment: CheckedPayment;
    try {
      payment = await this.verifier.check(orgId, buyer, terms.requirements);
    } catch (err) {
      if (err instanceof X402Refusal) return settleFailure(terms.requirements.network, err.reason, err.message, err.payer);
      throw err;
    }
    return this.settler.settle(orgId, payment, terms);
  }

  /** The facilitator API's request: the buyer's half checked against the merchant's requirements, and what they sell. */
  private async checkMerchantRequest(orgId: string, request: X402FacilitatorRequest): Promise<{ payment: CheckedPayment; terms: MerchantTerms }> {
    const requirements: PaymentRequirements = request.paymentRequirements;
    const payment = await this.verifier.check(orgId, buyerPayment(request.paymentPayload), requirements);
    const sale = await this.sales.ofRequirements(orgId, requirements, payment.token);
    return { payment, terms: { requirements, sale, resourceUrl: null } };
  }

  /**
   * The organization's settlement of one authorization (network, asset, payer, nonce): how a
   * merchant whose settle answer was lost learns the outcome without settling again.
   */
  async settlement(orgId: string, query: { network: string; asset: string; payer: string; nonce: string }): Promise<X402SettlementView> {
    const chainId = /^eip155:([0-9]{1,12})$/.exec(query.network)?.[1];
    const found = chainId ? await this.settler.find(orgId, Number(chainId), query.asset, query.payer, query.nonce) : undefined;
    if (!found) throw notFound('x402 settlement');
    return {
      settlementId: found.id,
      status: found.status,
      network: `eip155:${found.chainId}`,
      asset: found.token,
      payer: found.payer,
      payTo: found.payTo,
      amount: found.value,
      nonce: found.nonce,
      transaction: found.txHash,
      orderId: found.orderId,
      errorReason: found.errorReason,
      createdAt: found.createdAt.toISOString(),
      updatedAt: found.updatedAt.toISOString(),
    };
  }

  finishSubmitted(limit?: number): Promise<number> {
    return this.settler.finishSubmitted(limit);
  }

  followSettled(): Promise<number> {
    return this.settler.followSettled();
  }
}
