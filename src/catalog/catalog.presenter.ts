/** The catalog's API shapes, shared by the admin and console handlers. */
import { iso } from '../kernel/present.js';
import { presentUsagePricing } from '../commerce/order.presenter.js';
import type { PaymentLink, Price, Product } from './catalog.repository.js';

export const presentProduct = (product: Product) => ({
  productId: product.id,
  orgId: product.orgId,
  name: product.name,
  description: product.description,
  status: product.status,
  createdAt: iso(product.createdAt),
  updatedAt: iso(product.updatedAt),
});

export const presentPrice = (price: Price) => ({
  pricingId: price.id,
  orgId: price.orgId,
  productId: price.productId,
  amount: price.amount,
  currency: price.currency,
  pricingType: price.pricingType,
  billingInterval: price.billingInterval,
  billingIntervalCount: price.billingIntervalCount,
  pricingName: price.pricingName,
  flexibleAmount: price.flexibleAmount,
  minAmount: price.minAmount,
  maxAmount: price.maxAmount,
  // Present only on a price with a trial (as the contract says), so answers without one keep their shape.
  ...(price.trialDays !== null && { trialDays: price.trialDays }),
  provider: price.provider,
  active: price.active,
  createdAt: iso(price.createdAt),
  meteredComponents: price.meteredComponents.map((c) => ({ meterId: c.meterId, includedUnits: c.includedUnits, thresholds: c.thresholds ?? [], pricing: presentUsagePricing(c.pricing) })),
  // A credit pack only (absent otherwise, like trialDays).
  ...(price.grantsUnits !== null && { grantsUnits: { meterId: price.grantsUnits.meterId, units: price.grantsUnits.units } }),
});

/** A payment link with its URL (the service knows the public base URL). */
export const presentLink = (url: string, { link, price }: { link: PaymentLink; price: Price }) => ({
  paymentLinkId: link.id,
  paymentLinkUrl: url,
  orgId: link.orgId,
  pricingId: price.id,
  productId: price.productId,
  name: link.name,
  isActive: link.isActive,
  createdAt: iso(link.createdAt),
  updatedAt: iso(link.updatedAt),
});
