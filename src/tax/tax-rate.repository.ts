/** Tax rates and the organization's tax country (migration 0360). */
import type { Knex } from 'knex';
import type { TaxRate, TaxRateRepository } from './tax.model.js';

interface TaxRateRow {
  id: string;
  org_id: string;
  display_name: string;
  percentage: string;
  inclusive: boolean;
  country: string;
  region: string | null;
  description: string | null;
  status: TaxRate['status'];
  stripe_tax_rate_id: string | null;
  created_at: Date;
  updated_at: Date;
  archived_at: Date | null;
}

const toRate = (r: TaxRateRow): TaxRate => ({
  id: r.id,
  orgId: r.org_id,
  displayName: r.display_name,
  percentage: r.percentage,
  inclusive: r.inclusive,
  country: r.country,
  region: r.region,
  description: r.description,
  status: r.status,
  stripeTaxRateId: r.stripe_tax_rate_id,
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
  archivedAt: r.archived_at === null ? null : new Date(r.archived_at),
});

export class KnexTaxRateRepository implements TaxRateRepository {
  constructor(private readonly db: Knex) {}

  async insert(t: TaxRate): Promise<void> {
    await this.db('tax_rates').insert({
      id: t.id,
      org_id: t.orgId,
      display_name: t.displayName,
      percentage: t.percentage,
      inclusive: t.inclusive,
      country: t.country,
      region: t.region,
      description: t.description,
      status: t.status,
      stripe_tax_rate_id: t.stripeTaxRateId,
      created_at: t.createdAt,
      updated_at: t.updatedAt,
      archived_at: t.archivedAt,
    });
  }

  async find(orgId: string, id: string): Promise<TaxRate | undefined> {
    const row = await this.db<TaxRateRow>('tax_rates').where({ org_id: orgId, id }).first();
    return row ? toRate(row) : undefined;
  }

  async list(orgId: string, status: TaxRate['status']): Promise<TaxRate[]> {
    const rows = await this.db<TaxRateRow>('tax_rates').where({ org_id: orgId, status }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]);
    return rows.map(toRate);
  }

  async activeForCountry(orgId: string, country: string): Promise<TaxRate[]> {
    const rows = await this.db<TaxRateRow>('tax_rates').where({ org_id: orgId, country, status: 'ACTIVE' }).orderBy([{ column: 'created_at', order: 'asc' }, { column: 'id', order: 'asc' }]);
    return rows.map(toRate);
  }

  async hasActive(orgId: string): Promise<boolean> {
    const row = await this.db('tax_rates').where({ org_id: orgId, status: 'ACTIVE' }).first('id');
    return row !== undefined;
  }

  async archive(orgId: string, id: string, at: Date): Promise<boolean> {
    const written = await this.db('tax_rates').where({ org_id: orgId, id, status: 'ACTIVE' }).update({ status: 'ARCHIVED', archived_at: at, updated_at: at });
    return written === 1;
  }

  async recordStripeTaxRate(id: string, stripeTaxRateId: string): Promise<string> {
    await this.db('tax_rates').where({ id }).whereNull('stripe_tax_rate_id').update({ stripe_tax_rate_id: stripeTaxRateId });
    const row = await this.db<TaxRateRow>('tax_rates').where({ id }).first('stripe_tax_rate_id');
    return row?.stripe_tax_rate_id ?? stripeTaxRateId;
  }

  async merchantCountry(orgId: string): Promise<string | null> {
    const row = await this.db('organizations').where({ id: orgId }).first('tax_country');
    return (row?.tax_country as string | null | undefined) ?? null;
  }

  async setMerchantCountry(orgId: string, country: string | null): Promise<void> {
    await this.db('organizations').where({ id: orgId }).update({ tax_country: country });
  }
}
