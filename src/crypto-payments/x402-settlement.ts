/**
 * Settlement of verified x402 payments: one settlement row per EIP-3009 authorization is the claim
 * (whoever inserts it submits the transaction), the relayer submits `transferWithAuthorization`,
 * the confirmed transaction becomes a PAID order through PaymentFlow; plus the finisher job's two
 * passes (settlements left SUBMITTED, reorganizations). What the order sells is the merchant's
 * `Sale`, recorded on the claim as its price id; nothing of the buyer's payload but the
 * authorization reaches this unit.
 */
import { getAddress, type Hex } from 'viem';
import type { components } from '../../generated/merchant.js';
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import type { Logger } from '../kernel/logger.js';
import type { SecretBox } from '../kernel/secrets.js';
import type { ChainConfig, CryptoConfig, TokenConfig } from './crypto-config.js';
import { isNodeUnreachable, type TokenTransfer, type X402Chain } from './x402-chain.js';
import { X402_REASONS, X402Refusal, type X402Reason } from './x402-reasons.js';
import type { X402Sales } from './x402-sale.js';
import type { MerchantTerms, Sale } from './x402-terms.js';
import { transferArgs, type CheckedPayment, type X402Verifier } from './x402-verification.js';
import type { X402Repository, X402Settlement } from './x402.repository.js';

export type X402SettleResponse = components['schemas']['X402SettleResponse'];

/** A claim left SUBMITTING this long (its process died before submitting) may be taken over. */
const STALE_CLAIM_MS = 120_000;
/** How long a settled transaction is followed for reorganizations (as the chain watcher follows a vanished transfer). */
const REORG_FOLLOW_MS = 3600_000;
const REORG_FOLLOW_BATCH = 500;
/** How long a second settle of the same payload waits for the first one's outcome. */
const WAIT_FOR_SETTLEMENT_MS = 90_000;

/** A settle's answer, the order it recorded (when it succeeded) and whether this call submitted its transaction. */
export interface Settled {
  response: X402SettleResponse;
  orderId?: string;
  submittedHere?: boolean;
}

export function settleFailure(network: string, reason: X402Reason, message: string, payer?: string): Settled {
  return { response: { success: false, errorReason: reason, errorMessage: message, transaction: '', network, ...(payer ? { payer } : {}) } };
}

/**
 * Whether the mined receipt moves exactly the authorized value of the settlement's token from the
 * payer to payTo (one Transfer event), as the official facilitator checks before answering success.
 */
export function movesAuthorizedValue(settlement: Pick<X402Settlement, 'token' | 'payer' | 'payTo' | 'value'>, transfers: TokenTransfer[]): boolean {
  const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
  return transfers.some((t) => same(t.token, settlement.token) && same(t.from, settlement.payer) && same(t.to, settlement.payTo) && t.value === BigInt(settlement.value));
}

export class X402Settler {
  constructor(
    private readonly repo: X402Repository,
    private readonly verifier: Pick<X402Verifier, 'checkOnChain'>,
    private readonly sales: X402Sales,
    private readonly payments: PaymentFlow,
    private readonly config: CryptoConfig,
    private readonly box: SecretBox,
    private readonly chainOf: (chain: ChainConfig) => X402Chain,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Settles a verified payment for what the merchant's terms sell. */
  async settle(orgId: string, payment: CheckedPayment, terms: MerchantTerms): Promise<Settled> {
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
      resourceUrl: terms.resourceUrl,
      priceId: terms.sale.priceId,
      status: 'SUBMITTING',
      txHash: null,
      orderId: null,
      errorReason: null,
      createdAt: now,
      updatedAt: now,
    };
    const claimed = await this.repo.claim(candidate);
    const settled = claimed ? await this.submitAndRecord(payment, claimed, terms.sale) : await this.followExisting(payment, candidate, terms.sale);
    // One success per payment, as the official facilitator: only the call that submitted the
    // transaction answers it; every other settle of the payload (repeated, concurrent, or one that
    // finished another's transaction) is refused. A lost answer is looked up, never settled again.
    if (settled.response.success && !settled.submittedHere) {
      return settleFailure(
        settled.response.network,
        X402_REASONS.nonceUsed,
        `This payment was already settled (transaction ${settled.response.transaction}); look the settlement up with GET /v1/x402/settlements`,
        payment.from,
      );
    }
    return settled;
  }

  /** The organization's settlement of one authorization, when there is one. */
  async find(orgId: string, chainId: number, token: string, payer: string, nonce: string): Promise<X402Settlement | undefined> {
    const settlement = await this.repo.findByAuthorization(chainId, token, payer, nonce);
    return settlement?.orgId === orgId ? settlement : undefined;
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

  private configured(settlement: X402Settlement): { chain: ChainConfig; token: TokenConfig } | undefined {
    const chain = this.config.chains.find((c) => c.chainId === settlement.chainId);
    const token = chain?.tokens.find((t) => t.address.toLowerCase() === settlement.token.toLowerCase());
    return chain && token ? { chain, token } : undefined;
  }

  private async followOne(settlement: X402Settlement): Promise<boolean> {
    const configured = this.configured(settlement);
    if (!configured) return false;
    const { chain, token } = configured;
    const client = this.chainOf(chain);
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
      await this.applyPaid(settlement, chain, token, txHash, await this.sales.ofSettlement(settlement.orgId, settlement.priceId));
      return true;
    }
    return false;
  }

  private async finish(settlement: X402Settlement): Promise<boolean> {
    const configured = this.configured(settlement);
    // A chain or token no longer configured: left as it is for the operator.
    if (!configured || !settlement.txHash) return false;
    const { chain, token } = configured;
    const client = this.chainOf(chain);
    const txHash = settlement.txHash as Hex;
    const receipt = await client.receipt(txHash);
    const fail = (reason: X402Reason) =>
      this.repo.transition(settlement.id, 'SUBMITTED', { status: 'FAILED', errorReason: reason, updatedAt: this.clock.now() }, settlement.updatedAt);
    if (receipt?.status === 'reverted') return fail(X402_REASONS.transactionFailed);
    if (receipt) {
      const confirmations = (await client.blockNumber()) - receipt.blockNumber + 1n;
      if (confirmations < BigInt(Math.max(1, chain.confirmations))) return false;
      if (!movesAuthorizedValue(settlement, receipt.transfers)) return fail(X402_REASONS.transferEventMismatch);
      await this.recordSettled(settlement, chain, token, txHash, await this.sales.ofSettlement(settlement.orgId, settlement.priceId));
      this.logger.info({ settlementId: settlement.id, txHash }, 'x402 settlement finished by the finisher job');
      return true;
    }
    if (await client.transactionKnown(txHash)) return false;
    // Dropped. The nonce decides: unused, the payload may be settled again; used, another transaction spent it.
    const used = await client.authorizationUsed(token.address, getAddress(settlement.payer), settlement.nonce as Hex);
    this.logger.warn({ settlementId: settlement.id, txHash, nonceUsed: used }, 'x402 settlement transaction dropped');
    return fail(used ? X402_REASONS.nonceUsed : X402_REASONS.transactionFailed);
  }

  /** Another settle of this authorization got there first: answer its outcome (or take over a dead claim). */
  private async followExisting(payment: CheckedPayment, candidate: X402Settlement, sale: Sale): Promise<Settled> {
    const network = `eip155:${payment.chain.chainId}`;
    const deadline = Date.now() + WAIT_FOR_SETTLEMENT_MS;
    for (;;) {
      const existing = await this.repo.findByAuthorization(candidate.chainId, candidate.token, candidate.payer, candidate.nonce);
      if (!existing) {
        const claimed = await this.repo.claim(candidate);
        if (claimed) return this.submitAndRecord(payment, claimed, sale);
        continue;
      }
      if (existing.orgId !== candidate.orgId || existing.payloadHash !== candidate.payloadHash) {
        return settleFailure(network, X402_REASONS.nonceUsed, 'This authorization nonce was already used by another payment', payment.from);
      }
      if (existing.status === 'REMOVED') {
        return settleFailure(network, X402_REASONS.transactionFailed, `Transaction ${existing.txHash} was reorganized off the chain; it counts again if it is mined again`, payment.from);
      }
      if (existing.status === 'SETTLED') return { response: { success: true, payer: payment.from, transaction: existing.txHash!, network }, orderId: existing.orderId ?? undefined, submittedHere: false };
      if (existing.status === 'FAILED') {
        // A failed settlement moved nothing (reverted or never sent); the same payload may try again,
        // for what this (merchant-authenticated) call sells.
        const now = this.clock.now();
        const retry = { status: 'SUBMITTING' as const, txHash: null, errorReason: null, priceId: sale.priceId, updatedAt: now };
        if (await this.repo.transition(existing.id, 'FAILED', retry)) {
          return this.submitAndRecord(payment, { ...existing, ...retry }, sale);
        }
        continue;
      }
      const stale = this.clock.now().getTime() - existing.updatedAt.getTime() > STALE_CLAIM_MS;
      if (existing.status === 'SUBMITTED' && existing.txHash && stale) {
        // Submitted by a settle that did not finish: confirm and record the same transaction, for what its claim sold.
        return this.confirmAndRecord(payment, existing, existing.txHash as Hex, await this.sales.ofSettlement(existing.orgId, existing.priceId), false);
      }
      if (existing.status === 'SUBMITTING' && stale) {
        const now = this.clock.now();
        if (await this.repo.transition(existing.id, 'SUBMITTING', { updatedAt: now }, existing.updatedAt)) {
          return this.submitAndRecord(payment, { ...existing, updatedAt: now }, await this.sales.ofSettlement(existing.orgId, existing.priceId));
        }
        continue;
      }
      if (Date.now() > deadline) {
        return settleFailure(network, X402_REASONS.pending, 'Another settlement of this payment is still in progress; retry later', payment.from);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  private async submitAndRecord(payment: CheckedPayment, claim: X402Settlement, sale: Sale): Promise<Settled> {
    const network = `eip155:${payment.chain.chainId}`;
    const fail = async (reason: X402Reason, message: string) => {
      await this.repo.transition(claim.id, claim.status === 'SUBMITTED' ? 'SUBMITTED' : 'SUBMITTING', {
        status: 'FAILED',
        errorReason: reason,
        updatedAt: this.clock.now(),
      });
      return settleFailure(network, reason, message, payment.from);
    };
    try {
      await this.verifier.checkOnChain(payment);
    } catch (err) {
      if (err instanceof X402Refusal) return fail(err.reason, err.message);
      // Node unreachable (503): nothing was sent; the claim is released so that a retry settles.
      if (isNodeUnreachable(err)) await fail(X402_REASONS.unexpected, 'The chain node was unreachable');
      throw err;
    }
    const relayer = await this.repo.findRelayer();
    if (!relayer) return fail(X402_REASONS.unexpected, 'No x402 relayer is configured (npm run -s admin -- x402 relayer-create)');
    const key = this.box.open(relayer.privateKeySealed, `x402-relayer:${relayer.id}`);
    let txHash: Hex;
    try {
      txHash = await this.chainOf(payment.chain).submit(`0x${key.toString('hex')}`, payment.token.address, transferArgs(payment));
    } catch (err) {
      this.logger.warn({ err: { name: (err as Error).name }, chainId: payment.chain.chainId }, 'x402 settlement submission failed');
      const refused = await fail(X402_REASONS.transactionFailed, 'The chain refused the transferWithAuthorization transaction');
      // Nothing was accepted by the node: the claim is released (FAILED), the caller told to retry (503).
      if (isNodeUnreachable(err)) throw err;
      return refused;
    } finally {
      key.fill(0);
    }
    const submitted = { ...claim, status: 'SUBMITTED' as const, txHash };
    await this.repo.transition(claim.id, 'SUBMITTING', { status: 'SUBMITTED', txHash, updatedAt: this.clock.now() });
    return this.confirmAndRecord(payment, submitted, txHash, sale, true);
  }

  private async confirmAndRecord(payment: CheckedPayment, settlement: X402Settlement, txHash: Hex, sale: Sale, submittedHere: boolean): Promise<Settled> {
    const network = `eip155:${payment.chain.chainId}`;
    const { status, transfers } = await this.chainOf(payment.chain).waitFor(txHash, payment.chain.confirmations);
    if (status !== 'success') {
      await this.repo.transition(settlement.id, 'SUBMITTED', { status: 'FAILED', errorReason: X402_REASONS.transactionFailed, updatedAt: this.clock.now() });
      return settleFailure(network, X402_REASONS.transactionFailed, `Transaction ${txHash} reverted`, payment.from);
    }
    if (!movesAuthorizedValue(settlement, transfers)) {
      await this.repo.transition(settlement.id, 'SUBMITTED', { status: 'FAILED', errorReason: X402_REASONS.transferEventMismatch, updatedAt: this.clock.now() });
      this.logger.warn({ settlementId: settlement.id, txHash }, 'x402 transaction mined without the authorized Transfer event; not recorded as paid');
      return settleFailure(network, X402_REASONS.transferEventMismatch, `Transaction ${txHash} did not transfer ${settlement.value} units from the payer to payTo`, payment.from);
    }
    const orderId = await this.recordSettled(settlement, payment.chain, payment.token, txHash, sale);
    return { response: { success: true, payer: payment.from, transaction: txHash, network }, orderId, submittedHere };
  }

  /** The confirmed transaction of a SUBMITTED settlement becomes its PAID order (once) and the settlement SETTLED. */
  private async recordSettled(settlement: X402Settlement, chain: ChainConfig, token: TokenConfig, txHash: Hex, sale: Sale): Promise<string> {
    const order = await this.applyPaid(settlement, chain, token, txHash, sale);
    // Conditional: whoever confirmed the same transaction first (a settle, the finisher job) wrote it already.
    await this.repo.transition(settlement.id, 'SUBMITTED', { status: 'SETTLED', orderId: order.id, updatedAt: this.clock.now() });
    return order.id;
  }

  private async applyPaid(settlement: X402Settlement, chain: ChainConfig, token: TokenConfig, txHash: Hex, sale: Sale) {
    const { order } = await this.payments.applyX402Settlement({
      orgId: settlement.orgId,
      chain: `eip155:${chain.chainId}`,
      txHash,
      fromAddress: getAddress(settlement.payer),
      recipient: getAddress(settlement.payTo),
      valueUnits: Number(settlement.value),
      currency: token.symbol,
      settlementId: settlement.id,
      product: { productId: sale.productId, name: sale.productName },
    });
    return order;
  }
}
