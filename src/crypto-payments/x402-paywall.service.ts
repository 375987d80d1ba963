/**
 * Kassa's own x402 paywalls: a one-time catalog price sold per request at
 * `{base_url}/x402/prices/{id}` to any x402 v2 client, for merchants who run no middleware.
 * The terms are the price converted exactly to USDC units, payable to the organization's
 * receiving wallet on each configured chain; a payment is settled by the facilitator (so it is
 * the same PAID order, webhook, customer and entitlement as a middleware's settle) and is good
 * for one answer: a signed receipt, or a redirect to the merchant's content.
 */
import type { components } from '../../generated/merchant.js';
import type { Clock } from '../kernel/clock.js';
import { notFound, validationError } from '../kernel/errors.js';
import type { CryptoConfig } from './crypto-config.js';
import type { CryptoRepository } from './crypto.repository.js';
import type { X402FacilitatorService } from './x402-facilitator.service.js';
import { X402_REASONS } from './x402-reasons.js';
import { usdcUnits, type CatalogPrice, type X402Catalog } from './x402-sale.js';
import { buyerPayment } from './x402-terms.js';
import type { X402Paywall, X402Repository } from './x402.repository.js';

/** x402's PaymentRequirements as Kassa offers them (`extra` carries the token's EIP-712 domain). */
type PaymentRequirements = Omit<components['schemas']['X402PaymentRequirements'], 'extra'> & { extra: { name: string; version: string } };
type PaymentPayload = components['schemas']['X402PaymentPayload'];
type SettleResponse = components['schemas']['X402SettleResponse'];

/** How long a client has to pay once it has the terms (x402's maxTimeoutSeconds). */
const MAX_TIMEOUT_SECONDS = 300;
/** Price currencies the `exact` scheme (USDC's EIP-3009) can take; USD is paid 1:1 in USDC. */
const PAYWALL_CURRENCIES = new Set(['USD', 'USDC']);

export type PaywallPrice = CatalogPrice;
export type PaywallCatalog = X402Catalog & {
  /** The ids of the organization's product's prices; throws the catalog's 404 for another organization's or an unknown product. */
  listProductPriceIds(orgId: string, productId: string): Promise<string[]>;
};

/** Signs a receipt body like a webhook delivery: the `webhook-id`, `webhook-timestamp`, `webhook-signature` headers. */
export type ReceiptSigner = (id: string, timestampSeconds: number, body: Buffer) => Promise<Record<string, string>>;

export interface PaymentRequired {
  x402Version: 2;
  error?: string;
  resource: { url: string; description: string; mimeType: string };
  accepts: PaymentRequirements[];
}

/** What the public URL answers. */
export type PaywallAnswer =
  | { kind: 'not_found' | 'gone'; message: string }
  | { kind: 'payment_required'; paymentRequired: PaymentRequired; productName: string; settlement?: SettleResponse }
  | { kind: 'receipt'; settlement: SettleResponse; body: Buffer; headers: Record<string, string> }
  | { kind: 'redirect'; settlement: SettleResponse; location: string };

export type PaywallView = components['schemas']['X402Paywall'];

export { usdcUnits };

export class X402PaywallService {
  private readonly urlPrefix: string;

  constructor(
    private readonly repo: X402Repository,
    private readonly catalog: PaywallCatalog,
    private readonly wallets: Pick<CryptoRepository, 'listWallets'>,
    private readonly config: CryptoConfig,
    private readonly facilitator: X402FacilitatorService,
    private readonly signReceipt: ReceiptSigner,
    private readonly clock: Clock,
    paywallUrlPrefix: string,
  ) {
    this.urlPrefix = paywallUrlPrefix.endsWith('/') ? paywallUrlPrefix : `${paywallUrlPrefix}/`;
  }

  urlOf(priceId: string): string {
    return `${this.urlPrefix}${priceId}`;
  }

  private view(p: X402Paywall): PaywallView {
    return { pricingId: p.priceId, url: this.urlOf(p.priceId), contentUrl: p.contentUrl, createdAt: p.createdAt.toISOString(), updatedAt: p.updatedAt.toISOString() };
  }

  async enable(orgId: string, priceId: string, contentUrl: string | null | undefined): Promise<PaywallView> {
    const found = await this.catalog.findPrice(orgId, priceId);
    if (!found) throw notFound('Price');
    const { price } = found;
    if (price.pricingType !== 'ONE_TIME') throw validationError('A SUBSCRIPTION price cannot be an x402 paywall: x402 pays per request; use a ONE_TIME price');
    if (price.flexibleAmount) throw validationError('A flexibleAmount price cannot be an x402 paywall: x402 needs one amount');
    if (!PAYWALL_CURRENCIES.has(price.currency)) throw validationError(`An x402 paywall is paid in USDC: its price must be in USD or USDC, not ${price.currency}`);
    // Orders keep token units as a JavaScript number.
    if (usdcUnits(price.amount, price.currency) > BigInt(Number.MAX_SAFE_INTEGER)) throw validationError('This price is too large to be paid in USDC units');
    if (!price.active) throw validationError('This price is deactivated and can no longer be sold');
    if (found.product.status === 'ARCHIVED') throw validationError('This price\'s product is archived and can no longer be sold');
    if (contentUrl != null && !isHttpUrl(contentUrl)) throw validationError('contentUrl must be an absolute http(s) URL', { field: 'contentUrl' });
    const now = this.clock.now();
    return this.view(await this.repo.upsertPaywall({ priceId: price.id, orgId, contentUrl: contentUrl ?? null, createdAt: now, updatedAt: now }));
  }

  /** The paywalls on a product's prices (the console's catalog page). */
  async listForProduct(orgId: string, productId: string): Promise<PaywallView[]> {
    const priceIds = await this.catalog.listProductPriceIds(orgId, productId);
    return (await this.repo.listPaywalls(orgId, priceIds)).map((p) => this.view(p));
  }

  async disable(orgId: string, priceId: string): Promise<PaywallView> {
    const paywall = await this.repo.findPaywall(priceId);
    if (!paywall || paywall.orgId !== orgId || !(await this.repo.deletePaywall(orgId, priceId))) throw notFound('x402 paywall');
    return this.view(paywall);
  }

  /** The public URL: terms without a payment; with one (the PAYMENT-SIGNATURE's decoded payload), its settlement. */
  async answer(priceId: string, payment: PaymentPayload | undefined, paymentError?: string): Promise<PaywallAnswer> {
    const paywall = await this.repo.findPaywall(priceId);
    const found = paywall && (await this.catalog.findPrice(paywall.orgId, priceId));
    if (!paywall || !found) return { kind: 'not_found', message: 'No x402 resource is sold at this address.' };
    if (!found.price.active || found.product.status === 'ARCHIVED') return { kind: 'gone', message: 'This price is no longer sold.' };
    const terms = await this.terms(paywall.orgId, found.price, found.product.name);
    const required = (error?: string, settlement?: SettleResponse): PaywallAnswer => ({
      kind: 'payment_required',
      paymentRequired: { ...terms, ...(error ? { error } : {}) },
      productName: found.product.name,
      ...(settlement ? { settlement } : {}),
    });
    // Terms nobody can pay say why, so the merchant testing the URL sees what to configure.
    if (terms.accepts.length === 0) return required('This resource cannot be paid right now: the merchant has no receiving wallet on a USDC chain');
    if (paymentError) return required(paymentError);
    if (!payment) return required();
    const accepted = (payment.accepted ?? undefined) as { network?: unknown; asset?: unknown; scheme?: unknown } | undefined;
    const requirements = terms.accepts.find(
      (r) => r.network === accepted?.network && r.asset.toLowerCase() === String(accepted?.asset).toLowerCase() && r.scheme === accepted?.scheme,
    );
    // A network, asset or scheme this resource does not accept (or no accepted terms at all).
    if (!requirements) return required(typeof accepted === 'object' ? X402_REASONS.requirements : X402_REASONS.payload);
    // Kassa's own terms: the paywall record decides what is sold; the client's payload only pays.
    const settled = await this.facilitator.settlePaywall(paywall.orgId, buyerPayment(payment), {
      requirements,
      sale: this.facilitator.sales.ofPaywall(found.price, found.product),
      resourceUrl: terms.resource.url,
    });
    if (!settled.response.success) return required(settled.response.errorReason ?? X402_REASONS.unexpected, settled.response);
    if (!settled.submittedHere || !settled.orderId) {
      return required(X402_REASONS.nonceUsed, { success: false, errorReason: X402_REASONS.nonceUsed, errorMessage: 'This payment was already used', transaction: '', network: requirements.network });
    }
    if (paywall.contentUrl) {
      const location = new URL(paywall.contentUrl);
      location.searchParams.set('kassa_order_id', settled.orderId);
      return { kind: 'redirect', settlement: settled.response, location: location.toString() };
    }
    const paidAt = this.clock.now();
    const receipt = {
      type: 'x402.receipt',
      timestamp: paidAt.toISOString(),
      data: {
        orderId: settled.orderId,
        pricingId: priceId,
        productId: found.product.id,
        amount: found.price.amount,
        currency: found.price.currency,
        network: requirements.network,
        asset: requirements.asset,
        amountUnits: requirements.amount,
        payer: settled.response.payer,
        payTo: requirements.payTo,
        transaction: settled.response.transaction,
        paidAt: paidAt.toISOString(),
      },
    };
    const body = Buffer.from(JSON.stringify(receipt));
    const headers = await this.signReceipt(`rcpt_${settled.orderId}`, Math.floor(paidAt.getTime() / 1000), body);
    return { kind: 'receipt', settlement: settled.response, body, headers };
  }

  /** One `exact` requirement per configured chain with USDC on which the organization has a receiving wallet. */
  private async terms(orgId: string, price: PaywallPrice, productName: string): Promise<PaymentRequired> {
    const wallets = await this.wallets.listWallets(orgId);
    const amount = usdcUnits(price.amount, price.currency).toString();
    const accepts: PaymentRequirements[] = [];
    for (const chain of this.config.chains) {
      const token = chain.tokens.find((t) => t.symbol === 'USDC');
      const wallet = wallets.find((w) => w.chainId === chain.chainId);
      if (!token || !wallet) continue;
      const domain = await this.facilitator.tokenDomain(chain, token.address);
      accepts.push({
        scheme: 'exact',
        network: `eip155:${chain.chainId}`,
        asset: token.address,
        amount,
        payTo: wallet.address,
        maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
        extra: { name: domain.name, version: domain.version },
      });
    }
    return { x402Version: 2, resource: { url: this.urlOf(price.id), description: productName, mimeType: 'application/json' }, accepts };
  }
}

function isHttpUrl(text: string): boolean {
  if (!URL.canParse(text)) return false;
  const url = new URL(text);
  return url.protocol === 'https:' || url.protocol === 'http:';
}
