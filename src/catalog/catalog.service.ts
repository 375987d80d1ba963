/**
 * The catalog: products, their prices and payment links. Managed through the admin API (any
 * organization, resources named by id) and the console (a member's organization: the management
 * methods take an optional `orgId` scope, and a resource of another organization is the same 404
 * as a missing one), read by merchants (their own organization only) and by checkout (prices and
 * payment links it sells).
 */
import type { Clock } from '../kernel/clock.js';
import { newId, randomToken } from '../kernel/ids.js';
import { conflict, notFound, validationError } from '../kernel/errors.js';
import { assertOneLineName } from '../kernel/names.js';
import type {
  BillingInterval,
  CatalogRepository,
  PaymentLink,
  Price,
  PriceProvider,
  PricingType,
  Product,
  ProductStatus,
} from './catalog.repository.js';
import { assertAmountBounds, assertPriceRules } from './price-rules.js';
import { checkCreditGrant, checkMeteredComponents, type MeterDirectory } from '../commerce/metered-billing.js';
import type { UsageTerm } from '../commerce/model.js';
import type { components as AdminComponents } from '../../generated/admin.js';

export interface ProductCreateInput {
  name: string;
  description?: string | null;
  /** Default PUBLISHED. */
  status?: ProductStatus;
}

export interface ProductUpdateInput {
  name?: string;
  /** null clears it. */
  description?: string | null;
  status?: ProductStatus;
}

export interface PriceCreateInput {
  amount: number;
  currency: string;
  pricingType?: PricingType;
  billingInterval?: BillingInterval;
  billingIntervalCount?: number;
  pricingName?: string;
  flexibleAmount?: boolean;
  minAmount?: number;
  maxAmount?: number;
  trialDays?: number | null;
  provider?: PriceProvider;
  /** SUBSCRIPTION card prices only: usage billed in arrears at each renewal. */
  meteredComponents?: Array<AdminComponents['schemas']['MeteredComponent']>;
  grantsUnits?: AdminComponents['schemas']['MeterCreditGrant'] | null;
}

export interface ProductListQuery {
  page: number;
  size: number;
  search?: string;
  /** Undefined → every status. */
  status?: ProductStatus;
}

export interface ProductWithLinks {
  product: Product;
  links: Array<{ link: PaymentLink; price: Price }>;
}

/** 32 base62 characters from a CSPRNG (~190 bits): the link URL cannot be guessed from ids or from other links. */
const PAYMENT_LINK_TOKEN_LENGTH = 32;

const trimmedOrNull = (text: string | null | undefined): string | null => {
  const trimmed = text?.trim();
  return trimmed ? trimmed : null;
};

export class CatalogService {
  private readonly publicBaseUrl: string;

  constructor(
    private readonly repo: CatalogRepository,
    private readonly clock: Clock,
    publicBaseUrl: string,
    /** The organization's meters, for prices with metered components (the usage module's). */
    private readonly meters?: MeterDirectory,
  ) {
    this.publicBaseUrl = publicBaseUrl.replace(/\/+$/, '');
  }

  // ---- reads used by checkout and the merchant API (scoped by organization) ----

  findProduct(orgId: string, productId: string): Promise<Product | undefined> {
    return this.repo.findProduct(orgId, productId);
  }

  /**
   * A price's metered components as the hosted checkout page states them (issue 38): each with its
   * meter's name (the meter's id when the meter is gone), in the price's order.
   */
  async usageTermsOf(orgId: string, price: Pick<Price, 'meteredComponents'>): Promise<UsageTerm[]> {
    const terms: UsageTerm[] = [];
    for (const c of price.meteredComponents) {
      const meter = this.meters ? await this.meters.find(orgId, c.meterId) : undefined;
      terms.push({ meterId: c.meterId, meterName: meter?.name ?? c.meterId, includedUnits: c.includedUnits, pricing: c.pricing });
    }
    return terms;
  }

  async findPrice(orgId: string, priceId: string): Promise<{ price: Price; product: Product } | undefined> {
    const price = await this.repo.findPrice(orgId, priceId);
    if (!price) return undefined;
    const product = await this.repo.findProduct(orgId, price.productId);
    return product ? { price, product } : undefined;
  }

  /** The link, its price and product, whatever their state: the caller decides what an inactive link means. */
  findPaymentLinkByToken(token: string): Promise<{ link: PaymentLink; price: Price; product: Product } | undefined> {
    return this.repo.findPaymentLinkByToken(token);
  }

  paymentLinkUrl(link: PaymentLink): string {
    return `${this.publicBaseUrl}/pay/${link.token}`;
  }

  /** Merchant list: `status` defaults to PUBLISHED there (the handler passes it). */
  async listProductsWithLinks(orgId: string, query: ProductListQuery): Promise<{ records: ProductWithLinks[]; total: number }> {
    const { records, total } = await this.repo.listProducts(orgId, this.repoQuery(query));
    const links = await this.repo.listPaymentLinksOfProducts(orgId, records.map((p) => p.id));
    return {
      records: records.map((product) => ({ product, links: links.filter((l) => l.price.productId === product.id) })),
      total,
    };
  }

  /** Merchant read: another organization's product is the same 404 as a missing one. */
  async getProductWithLinks(orgId: string, productId: string): Promise<ProductWithLinks> {
    const product = await this.repo.findProduct(orgId, productId);
    if (!product) throw notFound('Product');
    return { product, links: await this.repo.listPaymentLinksOfProducts(orgId, [product.id]) };
  }

  // ---- management (admin API) ----

  async createProduct(orgId: string, input: ProductCreateInput): Promise<Product> {
    assertOneLineName('name', input.name);
    const now = this.clock.now();
    const product: Product = {
      id: newId('PRD'),
      orgId,
      name: input.name.trim(),
      description: trimmedOrNull(input.description),
      status: input.status ?? 'PUBLISHED',
      createdAt: now,
      updatedAt: now,
    };
    if (!(await this.repo.insertProduct(product))) throw notFound('Organization');
    return product;
  }

  /** `orgId` given: only that organization's product (the console); absent: any (the operator). */
  async getProduct(productId: string, orgId?: string): Promise<Product> {
    const product = orgId === undefined ? await this.repo.findProductAnyOrg(productId) : await this.repo.findProduct(orgId, productId);
    if (!product) throw notFound('Product');
    return product;
  }

  /** Every status may follow every other: archiving is reversible (an archived product can be published again). */
  async updateProduct(productId: string, input: ProductUpdateInput, orgId?: string): Promise<Product> {
    assertOneLineName('name', input.name);
    if (orgId !== undefined) await this.getProduct(productId, orgId);
    const updated = await this.repo.updateProduct(
      productId,
      {
        ...(input.name !== undefined ? { name: input.name.trim() } : {}),
        ...(input.description !== undefined ? { description: trimmedOrNull(input.description) } : {}),
        ...(input.status !== undefined ? { status: input.status } : {}),
      },
      this.clock.now(),
    );
    if (!updated) throw notFound('Product');
    return updated;
  }

  archiveProduct(productId: string, orgId?: string): Promise<Product> {
    return this.updateProduct(productId, { status: 'ARCHIVED' }, orgId);
  }

  /** Admin list of one organization's products; every status unless `status` is given. */
  listProducts(orgId: string, query: ProductListQuery): Promise<{ records: Product[]; total: number }> {
    return this.repo.listProducts(orgId, this.repoQuery(query));
  }

  async createPrice(productId: string, input: PriceCreateInput, orgId?: string): Promise<Price> {
    const product = await this.getProduct(productId, orgId);
    if (product.status === 'ARCHIVED') throw conflict('The product is archived; publish it again (status PUBLISHED or DRAFT) before adding prices');
    const pricingType = input.pricingType ?? 'ONE_TIME';
    const price: Price = {
      id: newId('PRC'),
      orgId: product.orgId,
      productId: product.id,
      amount: input.amount,
      currency: input.currency.toUpperCase(),
      pricingType,
      billingInterval: input.billingInterval ?? null,
      billingIntervalCount: input.billingIntervalCount ?? 1,
      pricingName: input.pricingName?.trim() || product.name,
      flexibleAmount: input.flexibleAmount ?? false,
      minAmount: input.minAmount ?? null,
      maxAmount: input.maxAmount ?? null,
      trialDays: input.trialDays ?? null,
      provider: input.provider ?? 'STRIPE',
      active: true,
      createdAt: this.clock.now(),
      meteredComponents: [],
      grantsUnits: null,
    };
    assertPriceRules(price);
    if (input.meteredComponents !== undefined && input.meteredComponents.length > 0) {
      if (price.pricingType !== 'SUBSCRIPTION' || price.provider !== 'STRIPE') {
        throw validationError('meteredComponents: only SUBSCRIPTION card (STRIPE) prices bill usage (a one-time credit pack is not a metered component)', { field: 'meteredComponents' });
      }
      price.meteredComponents = await checkMeteredComponents(price.orgId, input.meteredComponents, this.meters);
    }
    if (input.grantsUnits !== undefined && input.grantsUnits !== null) {
      if (price.pricingType !== 'ONE_TIME') throw validationError('grantsUnits: only ONE_TIME prices are credit packs', { field: 'grantsUnits' });
      if (price.flexibleAmount) throw validationError('grantsUnits: a credit pack has a fixed amount (flexibleAmount false)', { field: 'grantsUnits' });
      price.grantsUnits = await checkCreditGrant(price.orgId, input.grantsUnits, this.meters);
    }
    await this.repo.insertPrice(price);
    return price;
  }

  async listPrices(productId: string, orgId?: string): Promise<Price[]> {
    const product = await this.getProduct(productId, orgId);
    return this.repo.listPricesOfProduct(product.orgId, product.id);
  }

  async getPrice(priceId: string, orgId?: string): Promise<Price> {
    const price = orgId === undefined ? await this.repo.findPriceAnyOrg(priceId) : await this.repo.findPrice(orgId, priceId);
    if (!price) throw notFound('Price');
    return price;
  }

  /**
   * A new name (`PriceUpdate`): the one field of a price that may change, a label only — what it
   * charges stays as checkouts and subscriptions were made on it, and sessions, payment links and
   * orders keep the names they were made with.
   */
  async renamePrice(priceId: string, pricingName: string, orgId?: string): Promise<Price> {
    assertOneLineName('pricingName', pricingName);
    const name = pricingName.trim();
    if (name.length === 0 || name.length > 255) throw validationError('pricingName must be 1-255 characters, not only spaces', { field: 'pricingName' });
    if (orgId !== undefined) await this.getPrice(priceId, orgId);
    const price = await this.repo.renamePrice(priceId, name);
    if (!price) throw notFound('Price');
    return price;
  }

  /** Final: a price is never sold again once deactivated, and its payment links stop with it. */
  async deactivatePrice(priceId: string, orgId?: string): Promise<Price> {
    if (orgId !== undefined) await this.getPrice(priceId, orgId);
    const price = await this.repo.deactivatePrice(priceId, this.clock.now());
    if (!price) throw notFound('Price');
    return price;
  }

  async createPaymentLink(priceId: string, input: { name?: string } = {}, orgId?: string): Promise<{ link: PaymentLink; price: Price }> {
    const price = await this.getPrice(priceId, orgId);
    if (!price.active) throw conflict('The price is inactive; payment links can only be created for active prices');
    const product = await this.repo.findProduct(price.orgId, price.productId);
    if (product?.status === 'ARCHIVED') throw conflict('The product is archived; payment links cannot be created for it');
    // A price stored before the rail's bounds were enforced cannot be sold through a new link.
    assertAmountBounds(price.provider, price.currency, price.amount, `The amount of price ${price.id}`, { field: 'amount' });
    const now = this.clock.now();
    const link: PaymentLink = {
      id: newId('PLK'),
      orgId: price.orgId,
      priceId: price.id,
      name: input.name?.trim() || price.pricingName,
      isActive: true,
      token: randomToken(PAYMENT_LINK_TOKEN_LENGTH),
      createdAt: now,
      updatedAt: now,
    };
    await this.repo.insertPaymentLink(link);
    return { link, price };
  }

  /** Idempotent: deactivating an inactive link succeeds and changes nothing. */
  async deactivatePaymentLink(linkId: string, orgId?: string): Promise<{ link: PaymentLink; price: Price }> {
    if (orgId !== undefined) {
      const existing = await this.repo.findPaymentLinkAnyOrg(linkId);
      if (existing?.orgId !== orgId) throw notFound('Payment link');
    }
    const link = await this.repo.setPaymentLinkActive(linkId, false, this.clock.now());
    if (!link) throw notFound('Payment link');
    const price = await this.repo.findPrice(link.orgId, link.priceId);
    if (!price) throw notFound('Payment link');
    return { link, price };
  }

  /** One organization's payment links, newest first, with what each sells. */
  listPaymentLinks(
    orgId: string,
    query: { page: number; size: number; productId?: string; priceId?: string; active?: boolean },
  ): Promise<{ records: Array<{ link: PaymentLink; price: Price; product: Product }>; total: number }> {
    return this.repo.listPaymentLinks(orgId, {
      productId: query.productId,
      priceId: query.priceId,
      active: query.active,
      offset: (query.page - 1) * query.size,
      limit: query.size,
    });
  }

  private repoQuery(query: ProductListQuery) {
    return {
      status: query.status,
      search: query.search,
      offset: (query.page - 1) * query.size,
      limit: query.size,
    };
  }
}
