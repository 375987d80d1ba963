/**
 * The product access check (`GET /v1/entitlements/check`): a PAID, unrefunded one-time order of a
 * catalog product, or an ACTIVE subscription to it (including one canceled at period end that has
 * not ended). Inline products (`productData`) have no catalog id and never grant access.
 */
import type { components } from '../../generated/merchant.js';
import { validationError } from '../kernel/errors.js';
import type { EntitlementRepository } from './entitlement.repository.js';

type EntitlementCheck = components['schemas']['EntitlementCheck'];
type AccessType = 'ONE_TIME' | 'SUBSCRIPTION';

export interface EntitlementQuery {
  customerId?: string;
  /** The customer by the merchant's own id. */
  externalId?: string;
  email?: string;
  wallet?: string;
  productId?: string;
}

/** An id no customer has: the read answers for an unknown subject. */
const NO_CUSTOMER = '-';

const byProductId = (a: { productId: string }, b: { productId: string }) => (a.productId < b.productId ? -1 : a.productId > b.productId ? 1 : 0);

export class EntitlementService {
  constructor(private readonly repo: EntitlementRepository) {}

  async check(orgId: string, query: EntitlementQuery): Promise<EntitlementCheck> {
    if (!query.customerId && !query.externalId && !query.email && !query.wallet) {
      throw validationError('Give at least one of customer_id, external_id, email and wallet');
    }
    if (query.externalId !== undefined) {
      // Named by the merchant's id: resolved first; nobody (or another customer than customer_id) is an unknown subject.
      const held = await this.repo.customerIdByExternalId(orgId, query.externalId);
      const customerId = held === undefined || (query.customerId !== undefined && query.customerId !== held) ? NO_CUSTOMER : held;
      return this.check(orgId, { ...query, externalId: undefined, customerId });
    }
    // One read (src/subscriptions/entitlement.repository.ts): several identifiers must all point at
    // the same buyer (else `unknown`, and nothing is granted); a wallet alone never matches a
    // subscription (card-rail only); a one-time order's grant wins over a subscription's.
    const access = await this.repo.readAccess(orgId, { customerId: query.customerId, email: query.email, wallet: query.wallet }, query.productId);
    const { unknown, customer } = access;
    const granted = new Map<string, { productName: string; type: AccessType }>();
    for (const g of access.grants) {
      if (g.type === 'ONE_TIME' || !granted.has(g.productId)) granted.set(g.productId, { productName: g.productName, type: g.type });
    }
    // Built without spreads or array chains: this runs on every page view of a merchant's app.
    const products: EntitlementCheck['products'] = [];
    for (const [productId, g] of granted) products.push({ productId, productName: g.productName, type: g.type });
    if (products.length > 1) products.sort(byProductId);
    const customerId = unknown ? null : (customer?.id ?? null);
    const email = unknown ? null : (customer?.email ?? null);
    const wallet = query.wallet ?? null;
    if (!query.productId) {
      return { customerId, email, wallet, products, entitled: products.length > 0, productId: null, productName: null, type: null };
    }
    const grant = granted.get(query.productId);
    const productName = access.queriedProductName;
    return {
      customerId,
      email,
      wallet,
      products,
      entitled: grant !== undefined,
      productId: grant || productName !== null ? query.productId : null,
      productName: grant?.productName ?? productName ?? null,
      type: grant?.type ?? null,
    };
  }
}
