/**
 * The product access check (`GET /v1/entitlements/check`): a PAID, unrefunded one-time order of a
 * catalog product, or an ACTIVE subscription to it (including one canceled at period end that has
 * not ended). Inline products (`productData`) have no catalog id and never grant access.
 */
import type { components } from '../../generated/merchant.js';
import { validationError } from '../kernel/errors.js';
import type { CatalogService } from '../catalog/catalog.service.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Customer } from '../commerce/model.js';

type EntitlementCheck = components['schemas']['EntitlementCheck'];
type AccessType = 'ONE_TIME' | 'SUBSCRIPTION';

export interface EntitlementQuery {
  customerId?: string;
  email?: string;
  wallet?: string;
  productId?: string;
}

export class EntitlementService {
  constructor(
    private readonly uow: CommerceUnitOfWork,
    private readonly catalog: CatalogService,
  ) {}

  async check(orgId: string, query: EntitlementQuery): Promise<EntitlementCheck> {
    if (!query.customerId && !query.email && !query.wallet) {
      throw validationError('Give at least one of customer_id, email and wallet');
    }
    const stores = this.uow.stores;
    // Several identifiers must all point at the same buyer.
    let customer: Customer | undefined;
    let unknown = false;
    if (query.customerId) {
      customer = await stores.customers.find(orgId, query.customerId);
      unknown ||= !customer;
    }
    if (query.email) {
      const byEmail = await stores.customers.findByEmail(orgId, query.email);
      unknown ||= !byEmail || (customer !== undefined && customer.id !== byEmail.id);
      customer ??= byEmail;
    }

    const granted = new Map<string, { productName: string; type: AccessType }>();
    if (!unknown) {
      const customerIds = customer ? [customer.id] : undefined;
      const orders = await stores.orders.listAccessGranting(orgId, { customerIds, fromAddress: query.wallet });
      for (const order of orders) granted.set(order.productId!, { productName: order.productName ?? '', type: 'ONE_TIME' });
      // Subscriptions are card-rail only: a wallet alone never matches one.
      if (customer && !query.wallet) {
        for (const s of await stores.subscriptions.listActiveForCustomers(orgId, [customer.id])) {
          if (!granted.has(s.productId!)) granted.set(s.productId!, { productName: s.productName, type: 'SUBSCRIPTION' });
        }
      }
    }
    const products = [...granted.entries()]
      .map(([productId, g]) => ({ productId, productName: g.productName, type: g.type }))
      .sort((a, b) => (a.productId < b.productId ? -1 : a.productId > b.productId ? 1 : 0));

    const base = {
      customerId: unknown ? null : (customer?.id ?? null),
      email: unknown ? null : (customer?.email ?? null),
      wallet: query.wallet ?? null,
      products,
    };
    if (!query.productId) {
      return { ...base, entitled: products.length > 0, productId: null, productName: null, type: null };
    }
    const grant = granted.get(query.productId);
    const product = grant ? undefined : await this.catalog.findProduct(orgId, query.productId);
    return {
      ...base,
      entitled: grant !== undefined,
      productId: grant || product ? query.productId : null,
      productName: grant?.productName ?? product?.name ?? null,
      type: grant?.type ?? null,
    };
  }
}
