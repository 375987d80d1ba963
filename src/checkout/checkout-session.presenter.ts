import type { components } from '../../generated/merchant.js';
import { iso } from '../kernel/present.js';
import type { SessionOrder } from '../commerce/stores.js';
import type { CheckoutSession } from '../commerce/model.js';

type ApiCheckoutSession = components['schemas']['CheckoutSession'];

export const hostedPageUrl = (publicBaseUrl: string, session: CheckoutSession) => `${publicBaseUrl}/checkout/${session.pageToken}`;

export function presentCheckoutSession(
  session: CheckoutSession,
  order: SessionOrder | undefined,
  options: { publicBaseUrl: string; payable: boolean; crypto?: ApiCheckoutSession['crypto'] },
): ApiCheckoutSession {
  // The payment lock (issue 39: the discount is fixed once a payment starts) is not the API's.
  // The usage terms are the hosted page's (the price's `meteredComponents` are the API's).
  // The balance drawn at the payment's start is the order's CREDIT line (the hosted page's), not the session's pricing.
  const { paymentStarted: _, usage: _usage, balance: _balance, ...pricing } = session.pricing;
  const out: ApiCheckoutSession = {
    id: session.id,
    status: session.status,
    // Only a payable session has a URL: a buyer can never land on a closed checkout.
    url: options.payable ? hostedPageUrl(options.publicBaseUrl, session) : null,
    amount: session.amount,
    currency: session.currency,
    quantity: session.quantity,
    provider: session.provider,
    createdAt: iso(session.createdAt),
    expiresAt: iso(session.expiresAt),
    customerId: session.customerId,
    customerEmail: session.customerEmail,
    merchantReference: session.merchantReference,
    metadata: session.metadata,
    orderId: order?.id ?? null,
    orderStatus: order?.status ?? null,
    paymentLinkId: session.paymentLinkId,
    productName: session.product.name,
    pricing,
    product: session.product,
    lastError: session.lastError,
  };
  // Crypto sessions only: the payment instructions (chain, token, recipient, exact amount).
  if (options.crypto) out.crypto = options.crypto;
  // The buyer's tax location and the rates snapshotted for it (issue 39).
  if (session.tax) {
    const { location, rates, reverseCharge } = session.tax;
    out.tax = { country: location.country, region: location.region, taxId: location.taxId, reverseCharge, rates: rates.map((r) => ({ ...r })) };
  }
  return out;
}
