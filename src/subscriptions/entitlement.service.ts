/**
 * The product access check (`GET /v1/entitlements/check`): a PAID, unrefunded one-time order of a
 * catalog product, or an ACTIVE subscription to it (including one canceled at period end that has
 * not ended). Inline products (`productData`) have no catalog id and never grant access.
 */
import type { components } from '../../generated/merchant.js';
import { validationError } from '../kernel/errors.js';
import { balanceOfParts, meterParts, type BalanceBasis, type MeterPart } from '../commerce/meter-balances.js';
import type { UsageQuantities } from '../commerce/metered-billing.js';
import type { Clock } from '../kernel/clock.js';
import type { EntitlementRepository, MeteredRead } from './entitlement.repository.js';

type EntitlementCheck = components['schemas']['EntitlementCheck'];
type EntitlementMeter = components['schemas']['EntitlementMeter'];

/** Events up to this far ahead of the clock are accepted by ingest, so a prepaid range reaches that far. */
const FUTURE_TOLERANCE_MS = 5 * 60_000;
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
  constructor(
    private readonly repo: EntitlementRepository,
    /** Meter quantities (issue 38 §6); without them a metered product answers as any other. */
    private readonly metering?: { quantities: UsageQuantities; clock: Clock },
  ) {}

  /**
   * The usage of a metered product's meters for the customer: the same rules as the balances
   * (src/commerce/meter-balances.ts), from what the access read returned, plus one quantity read
   * per meter. A meter a subscription's component bills is SUBSCRIPTION (its current period);
   * one the product's credit packs grant, and no subscription bills, is PREPAID.
   */
  private async meterUsage(orgId: string, customerId: string, metered: MeteredRead): Promise<{ meters: EntitlementMeter[]; prepaid: Set<string> }> {
    const { quantities, clock } = this.metering!;
    const ids = new Set<string>();
    const granted = new Set<string>();
    for (const p of metered.prices) {
      for (const c of p.components ?? []) ids.add(c.meterId);
      if (p.grant) {
        ids.add(p.grant.meterId);
        granted.add(p.grant.meterId);
      }
    }
    const credits = new Map(metered.credits.map((c) => [c.meterId, c]));
    const now = clock.now();
    const meters: EntitlementMeter[] = [];
    const prepaid = new Set<string>();
    for (const meterId of [...ids].sort()) {
      let billed: { id: string; start: Date; end: Date; parts: MeterPart[] } | undefined;
      for (const x of metered.subscriptions) {
        if (x.components.some((k) => k.meterId === meterId)) {
          // A period a metered plan change split: each part against its share of the included units (the renewal's rule).
          const parts = x.segments.length === 0 ? [{ start: x.start, end: x.end, components: x.components }] : [...x.segments, { start: x.segments[x.segments.length - 1]!.end, end: x.end, components: x.components }];
          billed = { id: x.id, start: x.start, end: x.end, parts: meterParts(parts, meterId, x.start, x.end) };
          break;
        }
      }
      const credit = credits.get(meterId);
      // A meter neither billed nor credited to this customer has nothing to count.
      if (!billed && !credit && !granted.has(meterId)) continue;
      const basis: BalanceBasis = billed ? 'SUBSCRIPTION' : 'PREPAID';
      if (basis === 'PREPAID') prepaid.add(meterId);
      const start = billed?.start ?? credit?.since;
      const end = billed?.end ?? new Date(now.getTime() + FUTURE_TOLERANCE_MS);
      const read: Array<{ consumed: number; included: number }> = [];
      for (const p of billed?.parts ?? [{ start, end, included: 0 }]) {
        read.push({ consumed: p.start && p.end > p.start ? await quantities.quantity(orgId, meterId, customerId, p.start, p.end) : 0, included: p.included });
      }
      const { consumed, included, ...b } = balanceOfParts({ parts: read, credits: credit?.units ?? 0, basis });
      meters.push({
        meterId,
        basis,
        consumedUnits: consumed,
        includedUnits: included,
        creditsRemaining: b.creditsRemaining,
        remainingUnits: b.remainingUnits,
        overageUnits: b.overageUnits,
        exhausted: b.exhausted,
      });
    }
    return { meters, prepaid };
  }

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
      const answer: EntitlementCheck = { customerId, email, wallet, products, entitled: products.length > 0, productId: null, productName: null, type: null };
      if (!answer.entitled) answer.reason = unknown ? 'UNKNOWN_CUSTOMER' : 'NO_ACCESS';
      return answer;
    }
    let grant = granted.get(query.productId);
    const productName = access.queriedProductName;
    let metered: Pick<EntitlementCheck, 'meters' | 'reason'> = {};
    if (access.metered && this.metering && customerId !== null) {
      const { meters, prepaid } = await this.meterUsage(orgId, customerId, access.metered);
      metered = { meters };
      // Access bought as credits (a one-time order) lasts while every prepaid meter has credit left;
      // a subscription's meters bill their overage instead, and never close access.
      if (grant?.type === 'ONE_TIME' && meters.some((m) => prepaid.has(m.meterId) && m.exhausted)) {
        grant = undefined;
        metered.reason = 'CREDITS_EXHAUSTED';
      }
    }
    // Every refusal says why (EntitlementCheck.reason): a subject naming nobody first, then the
    // credits the metered read found exhausted, else no purchase grants the product.
    if (grant === undefined) metered.reason = unknown ? 'UNKNOWN_CUSTOMER' : (metered.reason ?? 'NO_ACCESS');
    return {
      customerId,
      email,
      wallet,
      products,
      entitled: grant !== undefined,
      productId: granted.has(query.productId) || productName !== null ? query.productId : null,
      productName: granted.get(query.productId)?.productName ?? productName ?? null,
      type: grant?.type ?? null,
      ...metered,
    };
  }
}
