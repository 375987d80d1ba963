/**
 * Crypto checkout quotes: which chain, token and wallet a USDC/USDT session is paid on, and the
 * exact amount that identifies the session among the open sessions paying the same wallet.
 *
 * Matching design: a session's exact amount is its price plus the smallest offset (0, 1, 2, …
 * token units, below `amountOffsetRange`) not reserved by another session on the same
 * (chain, token, recipient). The reservation is a row keyed by that amount (its primary key is the
 * guarantee, not memory) held until `expiresAt` + the late-payment window (shorter, and capped
 * in number, for sessions opened anonymously from a payment link); after that the amount can be
 * reused. The amount is reserved ("issued") only once the session has a customer, so a
 * matching transfer always has a customer for its order.
 */
import { getAddress, isAddress } from 'viem';
import type { Clock } from '../kernel/clock.js';
import { AppError, forbidden, notFound, validationError } from '../kernel/errors.js';
import { assertWritten, type CommerceStores, type CommerceUnitOfWork } from '../commerce/stores.js';
import type { CheckoutSession, PricingSnapshot } from '../commerce/model.js';
import type { OrgService } from '../orgs/orgs.service.js';
import type { ChainConfig, CryptoConfig, TokenConfig } from './crypto-config.js';
import type { CryptoQuote } from '../commerce/model.js';
import type { CryptoRepository, CryptoTransfer, ReceivingWallet, TransferStatus } from './crypto.repository.js';

export const CRYPTO_EXPIRES_IN = { min: 60, max: 86400 };
const ISSUE_ATTEMPTS = 5;

export const caip2 = (chainId: number) => `eip155:${chainId}`;

export interface PreparedQuote {
  chain: ChainConfig;
  token: TokenConfig;
  recipient: `0x${string}`;
}

/** The API's `crypto` object of a session. */
export interface QuoteView {
  chainId: number;
  chain: string;
  tokenSymbol: 'USDC' | 'USDT';
  tokenAddress: string;
  recipient: string;
  amountUnits: string | null;
}

export const presentQuote = (quote: CryptoQuote): QuoteView => ({
  chainId: quote.chainId,
  chain: caip2(quote.chainId),
  tokenSymbol: quote.tokenSymbol,
  tokenAddress: quote.tokenAddress,
  recipient: quote.recipient,
  amountUnits: quote.amountUnits === null ? null : String(quote.amountUnits),
});

export class CryptoQuoteService {
  constructor(
    private readonly uow: CommerceUnitOfWork,
    /** Wallets and transfers (reads and single-statement writes outside a checkout's transaction). */
    private readonly repo: CryptoRepository,
    private readonly orgs: OrgService,
    readonly config: CryptoConfig,
    private readonly clock: Clock,
  ) {}

  chain(chainId: number): ChainConfig | undefined {
    return this.config.chains.find((c) => c.chainId === chainId);
  }

  /** 400 unless the snapshot is a one-time USDC/USDT price. */
  checkPricing(pricing: PricingSnapshot, field: string): void {
    if (pricing.currency !== 'USDC' && pricing.currency !== 'USDT') {
      throw validationError(`${field} currency ${pricing.currency} cannot be paid with crypto checkout; use a USDC or USDT price`);
    }
    if (pricing.pricingType !== 'ONE_TIME') {
      throw validationError(`${field} is a SUBSCRIPTION price; crypto checkout takes ONE_TIME prices only`);
    }
  }

  /**
   * The chain, token and receiving wallet of a new session: the first configured chain (in
   * CRYPTO_CHAINS order) that offers the token and on which the organization has a wallet.
   * None is an organization set-up problem: 403, like the card rail's account checks.
   */
  async prepare(orgId: string, symbol: 'USDC' | 'USDT'): Promise<PreparedQuote> {
    const wallets = await this.repo.listWallets(orgId);
    for (const chain of this.config.chains) {
      const token = chain.tokens.find((t) => t.symbol === symbol);
      const wallet = wallets.find((w) => w.chainId === chain.chainId);
      if (token && wallet) return { chain, token, recipient: wallet.address };
    }
    if (wallets.length === 0) {
      throw forbidden('No receiving wallet is configured for crypto checkout; an operator sets one with `org set-wallet`');
    }
    const offering = this.config.chains.filter((c) => c.tokens.some((t) => t.symbol === symbol)).map((c) => `${c.name} (${c.chainId})`);
    throw forbidden(
      `The organization has no receiving wallet on a chain that accepts ${symbol}${offering.length ? ` (${offering.join(', ')})` : ' (no configured chain accepts it)'}`,
    );
  }

  /** Stores the quote with its new session (same transaction); issues it at once when the buyer is known. */
  async store(stores: CommerceStores, session: CheckoutSession, prepared: PreparedQuote): Promise<CryptoQuote> {
    const quote: CryptoQuote = {
      checkoutSessionId: session.id,
      orgId: session.orgId,
      chainId: prepared.chain.chainId,
      tokenSymbol: prepared.token.symbol,
      tokenAddress: prepared.token.address,
      recipient: prepared.recipient,
      priceUnits: session.amount,
      amountUnits: null,
      issuedAt: null,
      reservedUntil: null,
      createdAt: session.createdAt,
    };
    await stores.quotes.insertQuote(quote);
    if (session.customerId || session.customerEmail) return this.issue(stores, session, quote);
    return quote;
  }

  /**
   * Reserves the smallest free amount ≥ the price; concurrent issuers race on the reservation key.
   * A session opened from a payment link was opened by anyone, so its hold is short (the link
   * payment window, then the link late window) and such holds are capped per price and wallet,
   * under a lock: anonymous visitors can never take the amounts the merchant's own sessions need.
   */
  private async issue(stores: CommerceStores, session: CheckoutSession, quote: CryptoQuote): Promise<CryptoQuote> {
    const now = this.clock.now();
    const key = { chainId: quote.chainId, tokenAddress: quote.tokenAddress, recipient: quote.recipient };
    const range = this.config.amountOffsetRange;
    if (!Number.isSafeInteger(quote.priceUnits + range)) throw validationError('The amount is too large for crypto checkout');
    const fromLink = session.paymentLinkId !== null;
    let expiresAt = session.expiresAt;
    if (fromLink) {
      await stores.quotes.lockLinkHolds(key);
      const held = await stores.quotes.linkHolds(key, quote.priceUnits, quote.priceUnits + range, now);
      if (held.count >= this.config.linkHoldLimit) {
        const wait = held.firstEndsAt ? Math.ceil((held.firstEndsAt.getTime() - now.getTime()) / 1000) : 60;
        throw new AppError(
          'SERVICE_UNAVAILABLE',
          `Payment-link checkouts already hold ${held.count} exact amounts for this price on this receiving wallet (CRYPTO_LINK_HOLD_LIMIT); retry later`,
          { headers: { 'Retry-After': String(Math.max(1, wait)) } },
        );
      }
      expiresAt = new Date(Math.min(expiresAt.getTime(), now.getTime() + this.config.linkPaymentWindowSeconds * 1000));
    }
    const lateWindowSeconds = fromLink ? this.config.linkLatePaymentWindowSeconds : this.config.latePaymentWindowSeconds;
    const reservedUntil = new Date(expiresAt.getTime() + lateWindowSeconds * 1000);
    for (let attempt = 0; attempt < ISSUE_ATTEMPTS; attempt++) {
      const taken = await stores.quotes.reservedAmounts(key, quote.priceUnits, quote.priceUnits + range, now);
      let offset = 0;
      while (offset < range && taken.has(quote.priceUnits + offset)) offset++;
      if (offset >= range) break;
      const amountUnits = quote.priceUnits + offset;
      if (await stores.quotes.reserveAmount(key, amountUnits, session.id, reservedUntil, now)) {
        // Issued under the session's row lock, so the quote cannot have been issued meanwhile.
        assertWritten(await stores.quotes.markQuoteIssued(session.id, amountUnits, now, reservedUntil), 'crypto quote');
        if (expiresAt.getTime() < session.expiresAt.getTime()) await stores.sessions.bringExpiryForward(session.id, expiresAt, now);
        return { ...quote, amountUnits, issuedAt: now, reservedUntil };
      }
    }
    throw new AppError(
      'SERVICE_UNAVAILABLE',
      `Every distinct amount for this price on this receiving wallet is held by open crypto checkouts (${range} at most); retry later`,
      { headers: { 'Retry-After': '60' } },
    );
  }

  quoteOf(checkoutSessionId: string): Promise<CryptoQuote | undefined> {
    return this.repo.findQuote(checkoutSessionId);
  }

  /** The transfer most recently attached to the session (its confirmations, for the hosted page). */
  latestTransferOf(checkoutSessionId: string): Promise<CryptoTransfer | undefined> {
    return this.repo.latestTransferOfSession(checkoutSessionId);
  }

  /** Operator view of seen transfers (matched and ignored). */
  listTransfers(filter: { orgId?: string; chainId?: number; status?: TransferStatus }, page: number, size: number) {
    return this.repo.listTransfers(filter, { offset: (page - 1) * size, limit: size });
  }

  /**
   * The hosted page's e-mail step: records the buyer's e-mail on a payable session without a
   * customer and issues its quote, under the session's row lock (a double submit issues once).
   */
  async identifyBuyer(checkoutSessionId: string, email: string, isPayable: (s: CheckoutSession) => boolean): Promise<CryptoQuote | undefined> {
    return this.uow.transaction(async (stores) => {
      const session = await stores.sessions.findForUpdate(checkoutSessionId);
      if (!session) throw notFound('Checkout session');
      const quote = await stores.quotes.findQuote(session.id);
      if (!quote || !isPayable(session)) return quote;
      let current = session;
      if (!session.customerId && !session.customerEmail) {
        current = { ...session, customerEmail: email, updatedAt: this.clock.now() };
        assertWritten(await stores.sessions.update(current, session.status), 'checkout session');
      }
      return quote.amountUnits === null ? this.issue(stores, current, quote) : quote;
    });
  }

  // ---- receiving wallets (admin) ----

  async setWallet(orgId: string, chainId: number, address: string): Promise<ReceivingWallet> {
    await this.orgs.getOrganization(orgId);
    if (!this.chain(chainId)) {
      throw validationError(`chainId ${chainId} is not a configured chain (configured: ${this.config.chains.map((c) => c.chainId).join(', ') || 'none'})`);
    }
    // Mixed case must be a valid EIP-55 checksum; all-lowercase or all-uppercase hex is accepted and checksummed.
    if (!isAddress(address, { strict: true }) && !(isAddress(address, { strict: false }) && /^0x([0-9a-f]{40}|[0-9A-F]{40})$/.test(address))) {
      throw validationError(`address ${address} is not a valid EVM address (wrong length, characters or EIP-55 checksum)`);
    }
    const checksummed = getAddress(address);
    if (/^0x0{40}$/.test(checksummed)) throw validationError('address must not be the zero address');
    const now = this.clock.now();
    return this.repo.upsertWallet({ orgId, chainId, address: checksummed, createdAt: now, updatedAt: now });
  }

  async listWallets(orgId: string): Promise<ReceivingWallet[]> {
    await this.orgs.getOrganization(orgId);
    return this.repo.listWallets(orgId);
  }

  async removeWallet(orgId: string, chainId: number): Promise<ReceivingWallet> {
    await this.orgs.getOrganization(orgId);
    const wallet = await this.repo.findWallet(orgId, chainId);
    if (!wallet || !(await this.repo.deleteWallet(orgId, chainId))) throw notFound('Receiving wallet');
    return wallet;
  }
}
