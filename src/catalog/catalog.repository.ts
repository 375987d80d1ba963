/** Catalog products, prices and payment links in PostgreSQL. The only module of this domain that speaks knex. */
import type { Knex } from 'knex';
import type { Db } from '../db/knex.js';
import type { CreditGrant, MeteredComponent } from '../commerce/metered-billing.js';

export type ProductStatus = 'PUBLISHED' | 'DRAFT' | 'ARCHIVED';
export type PricingType = 'ONE_TIME' | 'SUBSCRIPTION';
export type BillingInterval = 'DAY' | 'MONTH' | 'YEAR';
export type PriceProvider = 'STRIPE' | 'CRYPTO';

export interface Product {
  /** PRD_… */
  id: string;
  orgId: string;
  name: string;
  description: string | null;
  status: ProductStatus;
  createdAt: Date;
  updatedAt: Date;
}

export interface Price {
  /** PRC_… (the API's `pricingId`) */
  id: string;
  orgId: string;
  productId: string;
  /** Minor units of `currency`. */
  amount: number;
  /** Uppercase: USD, EUR, USDC, USDT… */
  currency: string;
  pricingType: PricingType;
  billingInterval: BillingInterval | null;
  /** 1 for ONE_TIME. */
  billingIntervalCount: number;
  pricingName: string;
  flexibleAmount: boolean;
  minAmount: number | null;
  maxAmount: number | null;
  /** Free trial days before the first charge (SUBSCRIPTION only); null: no trial. */
  trialDays: number | null;
  /** The rail: STRIPE is card checkout. */
  provider: PriceProvider;
  active: boolean;
  createdAt: Date;
  /** SUBSCRIPTION prices only: usage billed in arrears at each renewal (empty: none). */
  meteredComponents: MeteredComponent[];
  /** ONE_TIME prices only: a credit pack, the units of a meter one purchased unit grants (null: none). */
  grantsUnits: CreditGrant | null;
}

export interface PaymentLink {
  /** PLK_… */
  id: string;
  orgId: string;
  priceId: string;
  name: string;
  isActive: boolean;
  /** Unguessable URL token (32 base62 characters): the link's URL is `<base>/pay/<token>`. */
  token: string;
  createdAt: Date;
  updatedAt: Date;
}

export type ProductPatch = Partial<Pick<Product, 'name' | 'description' | 'status'>>;

export interface ProductQuery {
  status?: ProductStatus;
  /** Case-insensitive substring of the name, matched literally (`%` and `_` are not wildcards). */
  search?: string;
  offset: number;
  limit: number;
}

export interface CatalogRepository {
  /** False when the organization does not exist (nothing is stored). */
  insertProduct(product: Product): Promise<boolean>;
  findProduct(orgId: string, id: string): Promise<Product | undefined>;
  /** Admin lookups: the admin API names resources by id alone, across organizations. */
  findProductAnyOrg(id: string): Promise<Product | undefined>;
  updateProduct(id: string, patch: ProductPatch, now: Date): Promise<Product | undefined>;
  listProducts(orgId: string, query: ProductQuery): Promise<{ records: Product[]; total: number }>;

  insertPrice(price: Price): Promise<void>;
  findPrice(orgId: string, id: string): Promise<Price | undefined>;
  findPriceAnyOrg(id: string): Promise<Price | undefined>;
  listPricesOfProduct(orgId: string, productId: string): Promise<Price[]>;
  /** Deactivates the price and, in the same transaction, every payment link of it. */
  deactivatePrice(id: string, now: Date): Promise<Price | undefined>;
  /** Renames the price (its only mutable field); undefined when it does not exist. */
  renamePrice(id: string, pricingName: string): Promise<Price | undefined>;

  insertPaymentLink(link: PaymentLink): Promise<void>;
  findPaymentLinkAnyOrg(id: string): Promise<PaymentLink | undefined>;
  findPaymentLinkByToken(token: string): Promise<{ link: PaymentLink; price: Price; product: Product } | undefined>;
  setPaymentLinkActive(id: string, isActive: boolean, now: Date): Promise<PaymentLink | undefined>;
  /** Every link of every price of these products (one organization), oldest first. */
  listPaymentLinksOfProducts(orgId: string, productIds: string[]): Promise<Array<{ link: PaymentLink; price: Price }>>;
  /** One organization's links newest first, each with its price and product (the console's list). */
  listPaymentLinks(orgId: string, query: PaymentLinkQuery): Promise<{ records: Array<{ link: PaymentLink; price: Price; product: Product }>; total: number }>;
}

export interface PaymentLinkQuery {
  productId?: string;
  priceId?: string;
  active?: boolean;
  offset: number;
  limit: number;
}

interface ProductRow {
  id: string;
  org_id: string;
  name: string;
  description: string | null;
  status: ProductStatus;
  created_at: Date;
  updated_at: Date;
}

interface PriceRow {
  id: string;
  org_id: string;
  product_id: string;
  amount: number | string;
  currency: string;
  pricing_type: PricingType;
  billing_interval: BillingInterval | null;
  billing_interval_count: number;
  pricing_name: string;
  flexible_amount: boolean;
  min_amount: number | string | null;
  max_amount: number | string | null;
  trial_days: number | null;
  provider: PriceProvider;
  active: boolean;
  created_at: Date;
  /** Null: none (and absent where a query lists its columns). */
  metered_components?: MeteredComponent[] | string | null;
  grants_units?: CreditGrant | string | null;
}

interface PaymentLinkRow {
  id: string;
  org_id: string;
  price_id: string;
  name: string;
  is_active: boolean;
  token: string;
  created_at: Date;
  updated_at: Date;
}

const toProduct = (row: ProductRow): Product => ({
  id: row.id,
  orgId: row.org_id,
  name: row.name,
  description: row.description,
  status: row.status,
  createdAt: new Date(row.created_at),
  updatedAt: new Date(row.updated_at),
});

// bigint columns: a number on both drivers (see db/knex.ts); Number() also covers a string.
const toPrice = (row: PriceRow): Price => ({
  id: row.id,
  orgId: row.org_id,
  productId: row.product_id,
  amount: Number(row.amount),
  currency: row.currency,
  pricingType: row.pricing_type,
  billingInterval: row.billing_interval,
  billingIntervalCount: row.billing_interval_count,
  pricingName: row.pricing_name,
  flexibleAmount: row.flexible_amount,
  minAmount: row.min_amount === null ? null : Number(row.min_amount),
  maxAmount: row.max_amount === null ? null : Number(row.max_amount),
  trialDays: row.trial_days ?? null,
  provider: row.provider,
  active: row.active,
  createdAt: new Date(row.created_at),
  meteredComponents: typeof row.metered_components === 'string' ? (JSON.parse(row.metered_components) as MeteredComponent[]) : (row.metered_components ?? []),
  grantsUnits: typeof row.grants_units === 'string' ? (JSON.parse(row.grants_units) as CreditGrant) : (row.grants_units ?? null),
});

const toPaymentLink = (row: PaymentLinkRow): PaymentLink => ({
  id: row.id,
  orgId: row.org_id,
  priceId: row.price_id,
  name: row.name,
  isActive: row.is_active,
  token: row.token,
  createdAt: new Date(row.created_at),
  updatedAt: new Date(row.updated_at),
});

const priceRow = (price: Price): PriceRow => ({
  id: price.id,
  org_id: price.orgId,
  product_id: price.productId,
  amount: price.amount,
  currency: price.currency,
  pricing_type: price.pricingType,
  billing_interval: price.billingInterval,
  billing_interval_count: price.billingIntervalCount,
  pricing_name: price.pricingName,
  flexible_amount: price.flexibleAmount,
  min_amount: price.minAmount,
  max_amount: price.maxAmount,
  trial_days: price.trialDays,
  provider: price.provider,
  active: price.active,
  created_at: price.createdAt,
  metered_components: price.meteredComponents.length > 0 ? JSON.stringify(price.meteredComponents) : null,
  grants_units: price.grantsUnits ? JSON.stringify(price.grantsUnits) : null,
});

/** `50%_off\` → `50\%\_off\\`: the user's text is a literal substring, not a LIKE pattern. */
export const escapeLike = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`);

const PRICE_COLUMNS = [
  'id', 'org_id', 'product_id', 'amount', 'currency', 'pricing_type', 'billing_interval', 'billing_interval_count',
  'pricing_name', 'flexible_amount', 'min_amount', 'max_amount', 'trial_days', 'provider', 'active', 'created_at', 'metered_components', 'grants_units',
] as const;
const PRODUCT_COLUMNS = ['id', 'org_id', 'name', 'description', 'status', 'created_at', 'updated_at'] as const;
const LINK_COLUMNS = ['id', 'org_id', 'price_id', 'name', 'is_active', 'token', 'created_at', 'updated_at'] as const;

/** `select p.id as p__id, …` so a join can be split back into its rows. */
const aliased = (table: string, columns: readonly string[]) => columns.map((c) => `${table}.${c} as ${table}__${c}`);
const unalias = <T>(row: Record<string, unknown>, table: string, columns: readonly string[]): T =>
  Object.fromEntries(columns.map((c) => [c, row[`${table}__${c}`]])) as T;

const isForeignKeyViolation = (err: unknown): boolean => (err as { code?: string } | null)?.code === '23503';

export class KnexCatalogRepository implements CatalogRepository {
  constructor(private readonly db: Db) {}

  async insertProduct(product: Product): Promise<boolean> {
    try {
      await this.db<ProductRow>('products').insert({
        id: product.id,
        org_id: product.orgId,
        name: product.name,
        description: product.description,
        status: product.status,
        created_at: product.createdAt,
        updated_at: product.updatedAt,
      });
      return true;
    } catch (err) {
      // The organization is the table's only foreign key: a violation means it does not exist.
      if (isForeignKeyViolation(err)) return false;
      throw err;
    }
  }

  async findProduct(orgId: string, id: string): Promise<Product | undefined> {
    const row = await this.db<ProductRow>('products').where({ org_id: orgId, id }).first();
    return row ? toProduct(row) : undefined;
  }

  async findProductAnyOrg(id: string): Promise<Product | undefined> {
    const row = await this.db<ProductRow>('products').where({ id }).first();
    return row ? toProduct(row) : undefined;
  }

  async updateProduct(id: string, patch: ProductPatch, now: Date): Promise<Product | undefined> {
    const changes: Partial<ProductRow> = { updated_at: now };
    if (patch.name !== undefined) changes.name = patch.name;
    if (patch.description !== undefined) changes.description = patch.description;
    if (patch.status !== undefined) changes.status = patch.status;
    const [row] = await this.db<ProductRow>('products').where({ id }).update(changes).returning('*');
    return row ? toProduct(row as ProductRow) : undefined;
  }

  async listProducts(orgId: string, query: ProductQuery): Promise<{ records: Product[]; total: number }> {
    const filtered = (qb: Knex.QueryBuilder) => {
      qb.where({ org_id: orgId });
      if (query.status) qb.andWhere({ status: query.status });
      if (query.search !== undefined) qb.andWhereRaw(`name ILIKE ? ESCAPE '\\'`, [`%${escapeLike(query.search)}%`]);
      return qb;
    };
    const [rows, countRow] = await Promise.all([
      filtered(this.db('products').select<ProductRow[]>('*'))
        .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
        .offset(query.offset)
        .limit(query.limit),
      filtered(this.db('products').count({ count: '*' })).first(),
    ]);
    return { records: (rows as ProductRow[]).map(toProduct), total: Number((countRow as { count?: number } | undefined)?.count ?? 0) };
  }

  async insertPrice(price: Price): Promise<void> {
    await this.db<PriceRow>('prices').insert(priceRow(price));
  }

  async findPrice(orgId: string, id: string): Promise<Price | undefined> {
    const row = await this.db<PriceRow>('prices').where({ org_id: orgId, id }).first();
    return row ? toPrice(row) : undefined;
  }

  async findPriceAnyOrg(id: string): Promise<Price | undefined> {
    const row = await this.db<PriceRow>('prices').where({ id }).first();
    return row ? toPrice(row) : undefined;
  }

  async listPricesOfProduct(orgId: string, productId: string): Promise<Price[]> {
    const rows = await this.db<PriceRow>('prices')
      .where({ org_id: orgId, product_id: productId })
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]);
    return rows.map(toPrice);
  }

  async renamePrice(id: string, pricingName: string): Promise<Price | undefined> {
    const [row] = await this.db<PriceRow>('prices').where({ id }).update({ pricing_name: pricingName }).returning('*');
    return row ? toPrice(row as PriceRow) : undefined;
  }

  async deactivatePrice(id: string, now: Date): Promise<Price | undefined> {
    return this.db.transaction(async (trx) => {
      const [row] = await trx<PriceRow>('prices').where({ id }).update({ active: false }).returning('*');
      if (!row) return undefined;
      await trx<PaymentLinkRow>('payment_links')
        .where({ org_id: row.org_id, price_id: id, is_active: true })
        .update({ is_active: false, updated_at: now });
      return toPrice(row as PriceRow);
    });
  }

  async insertPaymentLink(link: PaymentLink): Promise<void> {
    await this.db<PaymentLinkRow>('payment_links').insert({
      id: link.id,
      org_id: link.orgId,
      price_id: link.priceId,
      name: link.name,
      is_active: link.isActive,
      token: link.token,
      created_at: link.createdAt,
      updated_at: link.updatedAt,
    });
  }

  async findPaymentLinkAnyOrg(id: string): Promise<PaymentLink | undefined> {
    const row = await this.db<PaymentLinkRow>('payment_links').where({ id }).first();
    return row ? toPaymentLink(row) : undefined;
  }

  async findPaymentLinkByToken(token: string): Promise<{ link: PaymentLink; price: Price; product: Product } | undefined> {
    // The joins follow the (org_id, …) foreign keys, so all three rows belong to one organization.
    const row = await this.db('payment_links as l')
      .join('prices as r', function () {
        this.on('r.id', '=', 'l.price_id').andOn('r.org_id', '=', 'l.org_id');
      })
      .join('products as p', function () {
        this.on('p.id', '=', 'r.product_id').andOn('p.org_id', '=', 'r.org_id');
      })
      .where('l.token', token)
      .first([...aliased('l', LINK_COLUMNS), ...aliased('r', PRICE_COLUMNS), ...aliased('p', PRODUCT_COLUMNS)]);
    if (!row) return undefined;
    return {
      link: toPaymentLink(unalias<PaymentLinkRow>(row, 'l', LINK_COLUMNS)),
      price: toPrice(unalias<PriceRow>(row, 'r', PRICE_COLUMNS)),
      product: toProduct(unalias<ProductRow>(row, 'p', PRODUCT_COLUMNS)),
    };
  }

  async setPaymentLinkActive(id: string, isActive: boolean, now: Date): Promise<PaymentLink | undefined> {
    // Only a real change moves updated_at: deactivating twice leaves the first time on record.
    await this.db<PaymentLinkRow>('payment_links').where({ id }).whereNot({ is_active: isActive }).update({ is_active: isActive, updated_at: now });
    return this.findPaymentLinkAnyOrg(id);
  }

  async listPaymentLinksOfProducts(orgId: string, productIds: string[]): Promise<Array<{ link: PaymentLink; price: Price }>> {
    if (productIds.length === 0) return [];
    const rows: Record<string, unknown>[] = await this.db('payment_links as l')
      .join('prices as r', function () {
        this.on('r.id', '=', 'l.price_id').andOn('r.org_id', '=', 'l.org_id');
      })
      .where('l.org_id', orgId)
      .whereIn('r.product_id', productIds)
      .orderBy([{ column: 'l.created_at', order: 'asc' }, { column: 'l.id', order: 'asc' }])
      .select([...aliased('l', LINK_COLUMNS), ...aliased('r', PRICE_COLUMNS)]);
    return rows.map((row) => ({
      link: toPaymentLink(unalias<PaymentLinkRow>(row, 'l', LINK_COLUMNS)),
      price: toPrice(unalias<PriceRow>(row, 'r', PRICE_COLUMNS)),
    }));
  }

  async listPaymentLinks(orgId: string, query: PaymentLinkQuery): Promise<{ records: Array<{ link: PaymentLink; price: Price; product: Product }>; total: number }> {
    // The joins follow the (org_id, …) foreign keys, so the three rows belong to one organization.
    const filtered = (qb: Knex.QueryBuilder) => {
      qb.join('prices as r', function () {
        this.on('r.id', '=', 'l.price_id').andOn('r.org_id', '=', 'l.org_id');
      })
        .join('products as p', function () {
          this.on('p.id', '=', 'r.product_id').andOn('p.org_id', '=', 'r.org_id');
        })
        .where('l.org_id', orgId);
      if (query.productId !== undefined) qb.andWhere('r.product_id', query.productId);
      if (query.priceId !== undefined) qb.andWhere('l.price_id', query.priceId);
      if (query.active !== undefined) qb.andWhere('l.is_active', query.active);
      return qb;
    };
    const [rows, countRow] = await Promise.all([
      filtered(this.db('payment_links as l'))
        .orderBy([{ column: 'l.created_at', order: 'desc' }, { column: 'l.id', order: 'desc' }])
        .offset(query.offset)
        .limit(query.limit)
        .select([...aliased('l', LINK_COLUMNS), ...aliased('r', PRICE_COLUMNS), ...aliased('p', PRODUCT_COLUMNS)]),
      filtered(this.db('payment_links as l').count({ count: '*' })).first(),
    ]);
    return {
      records: (rows as Record<string, unknown>[]).map((row) => ({
        link: toPaymentLink(unalias<PaymentLinkRow>(row, 'l', LINK_COLUMNS)),
        price: toPrice(unalias<PriceRow>(row, 'r', PRICE_COLUMNS)),
        product: toProduct(unalias<ProductRow>(row, 'p', PRODUCT_COLUMNS)),
      })),
      total: Number((countRow as { count?: number } | undefined)?.count ?? 0),
    };
  }
}
