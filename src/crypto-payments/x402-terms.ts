/**
 * The two halves of an x402 payment, kept apart by type:
 *
 * - the **buyer's** half, `BuyerPayment`: what the paying client sent (its PaymentPayload). Only
 *   its `accepted` terms and its scheme `payload` (the EIP-3009 authorization and signature) are
 *   read, and the signature is the only thing vouching for them. Its `resource` is not part of the
 *   type at all: the buyer signs nothing over it and may write any URL or description there.
 * - the **merchant's** half, `MerchantTerms`: the PaymentRequirements the merchant's server sent
 *   with its API key (or that Kassa's own paywall built), and the `Sale` decided from them alone
 *   (x402-sale.ts): which catalog price and product the order is of, and its display name.
 */
import type { components } from '../../generated/merchant.js';

/** x402 PaymentRequirements (`extra`: the token's EIP-712 `name` and `version`, `kassaPricingId`, any other scheme data). */
export type PaymentRequirements = Omit<components['schemas']['X402PaymentRequirements'], 'extra'> & { extra?: Record<string, unknown> };

/** The buyer's half of a payment: its accepted terms and scheme payload, as sent (unchecked, any shape). */
export interface BuyerPayment {
  readonly accepted: unknown;
  readonly payload: unknown;
}

/** Picks the buyer's half out of a PaymentPayload; everything else it carries (`resource`, `extensions`) is dropped here. */
export function buyerPayment(paymentPayload: unknown): BuyerPayment {
  const p = (paymentPayload !== null && typeof paymentPayload === 'object' ? paymentPayload : {}) as Record<string, unknown>;
  return { accepted: p.accepted, payload: p.payload };
}

declare const merchantDeclared: unique symbol;

/**
 * What an order sells. Made only by X402Sales (x402-sale.ts), from merchant-authenticated data:
 * a Kassa paywall record, a catalog price named by the merchant's requirements, or none.
 */
export type Sale = {
  /** The catalog price sold, when the merchant named one (recorded on the settlement). */
  readonly priceId: string | null;
  readonly productId: string | null;
  /** The order's product name: the catalog product's, else a fixed name. */
  readonly productName: string;
} & { readonly [merchantDeclared]: true };

/** The merchant's half: its requirements, what they sell, and Kassa's own resource URL when it is a paywall. */
export interface MerchantTerms {
  readonly requirements: PaymentRequirements;
  readonly sale: Sale;
  /** `{base_url}/x402/prices/{id}` for a Kassa paywall; null for a merchant's own route (its URL is only known from the buyer). */
  readonly resourceUrl: string | null;
}
