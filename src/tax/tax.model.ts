/** A merchant's tax rate (issue 39; migration 0360). */
export interface TaxRate {
  id: string;
  orgId: string;
  displayName: string;
  /** Percent, exact decimal text (`"19"`, `"8.875"`). */
  percentage: string;
  inclusive: boolean;
  country: string;
  region: string | null;
  description: string | null;
  status: 'ACTIVE' | 'ARCHIVED';
  /** The Stripe tax rate made for it on the Stripe rail (`txr_…`), once. */
  stripeTaxRateId: string | null;
  createdAt: Date;
  updatedAt: Date;
  archivedAt: Date | null;
}

export interface TaxRateRepository {
  insert(rate: TaxRate): Promise<void>;
  find(orgId: string, id: string): Promise<TaxRate | undefined>;
  list(orgId: string, status: TaxRate['status']): Promise<TaxRate[]>;
  /** The ACTIVE rates of a country (any region), oldest first. */
  activeForCountry(orgId: string, country: string): Promise<TaxRate[]>;
  /** Whether the organization has any ACTIVE rate (the hosted page then asks for the country). */
  hasActive(orgId: string): Promise<boolean>;
  archive(orgId: string, id: string, at: Date): Promise<boolean>;
  /** Records the Stripe tax rate made for a rate, unless one is recorded already; returns the recorded id. */
  recordStripeTaxRate(id: string, stripeTaxRateId: string): Promise<string>;
  merchantCountry(orgId: string): Promise<string | null>;
  setMerchantCountry(orgId: string, country: string | null): Promise<void>;
}
