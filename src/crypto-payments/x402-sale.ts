/**
 * Product choice for x402 orders: what a payment buys is decided here, from merchant-authenticated
 * data only (never from the buyer's PaymentPayload):
 *
 * - a Kassa paywall sells its own price's product (the paywall record);
 * - a merchant's own x402 route names the catalog price it sells in its PaymentRequirements,
 *   `extra.kassaPricingId` (`PRC_…`): the price must be the organization's, `ONE_TIME`, a fixed
 *   amount, active, of a product not archived, in the paid token's currency (a USD price is paid
 *   1:1 in USDC), and `amount` must be exactly that price in token units — otherwise the payment is
 *   refused (`invalid_payment_requirements`);
 * - a route naming no price sells no catalog product: the order's product name is `x402 payment`.
 */
import { decimalsOf } from '../kernel/money.js';
import type { TokenConfig } from './crypto-config.js';
import { X402_REASONS, X402Refusal } from './x402-reasons.js';
import type { PaymentRequirements, Sale } from './x402-terms.js';

/** The order's product name when the merchant named no catalog price. */
export const UNNAMED_SALE = 'x402 payment';
/** Token units have 6 decimals (crypto-config refuses any other token). */
const TOKEN_DECIMALS = 6;
const PRICE_ID = /^PRC_[A-Za-z0-9]{1,60}$/;

/** What x402 needs of a catalog price (a structural view: crypto-payments does not import catalog). */
export interface CatalogPrice {
  id: string;
  amount: number;
  currency: string;
  pricingType: string;
  flexibleAmount: boolean;
  active: boolean;
}

export interface X402Catalog {
  findPrice(orgId: string, priceId: string): Promise<{ price: CatalogPrice; product: { id: string; name: string; status: string } } | undefined>;
}

/** Price minor units → token units (6 decimals), exactly (a currency with more decimals is refused before). */
export function usdcUnits(amount: number, currency: string): bigint {
  return BigInt(amount) * 10n ** BigInt(TOKEN_DECIMALS - decimalsOf(currency));
}

const sale = (priceId: string | null, productId: string | null, productName: string) => ({ priceId, productId, productName: productName.slice(0, 255) }) as Sale;

export class X402Sales {
  constructor(private readonly catalog?: X402Catalog) {}

  /** Kassa's own paywall: its price's product. */
  ofPaywall(price: { id: string }, product: { id: string; name: string }): Sale {
    return sale(price.id, product.id, product.name);
  }

  /** A merchant's route: the catalog price its requirements name (checked), or none. Throws X402Refusal. */
  async ofRequirements(orgId: string, requirements: PaymentRequirements, token: TokenConfig): Promise<Sale> {
    const named = (requirements.extra as Record<string, unknown> | undefined)?.kassaPricingId;
    if (named === undefined) return sale(null, null, UNNAMED_SALE);
    const refuse = (why: string) => new X402Refusal(X402_REASONS.requirements, `extra.kassaPricingId: ${why}`);
    if (typeof named !== 'string' || !PRICE_ID.test(named)) throw refuse('not a price id (PRC_…)');
    const found = this.catalog && (await this.catalog.findPrice(orgId, named));
    if (!found) throw refuse(`no price ${named} in this organization`);
    const { price, product } = found;
    if (price.pricingType !== 'ONE_TIME') throw refuse('a SUBSCRIPTION price cannot be sold per request');
    if (price.flexibleAmount) throw refuse('a flexibleAmount price has no one amount');
    if (!price.active || product.status === 'ARCHIVED') throw refuse('this price is no longer sold');
    const payable = price.currency === token.symbol || (price.currency === 'USD' && token.symbol === 'USDC');
    if (!payable || decimalsOf(price.currency) > TOKEN_DECIMALS) throw refuse(`a ${price.currency} price cannot be paid in ${token.symbol}`);
    const units = usdcUnits(price.amount, price.currency);
    if (units.toString() !== requirements.amount) throw refuse(`amount must be the price, ${units} units`);
    return sale(price.id, product.id, product.name);
  }

  /** A recorded settlement: the price recorded when it was claimed (checked then). */
  async ofSettlement(orgId: string, priceId: string | null): Promise<Sale> {
    const found = priceId && this.catalog ? await this.catalog.findPrice(orgId, priceId) : undefined;
    return found ? sale(found.price.id, found.product.id, found.product.name) : sale(null, null, UNNAMED_SALE);
  }
}
