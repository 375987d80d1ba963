/**
 * Tax rates and tax settings (issue 39, item 4), and the tax context of a buyer's location: the
 * ACTIVE rates of their country whose region is null or theirs, or EU reverse charge. The money
 * itself is computed by src/commerce/tax.ts.
 */
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import { notFound, validationError } from '../kernel/errors.js';
import { isPercentage, type TaxContext, type TaxLocation } from '../commerce/tax.js';
import { isReverseCharge, parseCountry, parseRegion, parseTaxLocation } from './tax-location.js';
import type { TaxRate, TaxRateRepository } from './tax.model.js';

export interface TaxRateCreate {
  displayName: string;
  percentage: string;
  country: string;
  region?: string | null;
  inclusive?: boolean;
  description?: string | null;
}

/** `"19.50"` → `"19.5"`, `"007"` → `"7"`: one spelling per percentage. */
const canonicalPercentage = (p: string): string => {
  const [whole, fraction = ''] = p.split('.');
  const f = fraction.replace(/0+$/, '');
  const w = whole!.replace(/^0+(?=\d)/, '');
  return f ? `${w}.${f}` : w;
};

export class TaxService {
  constructor(
    private readonly rates: TaxRateRepository,
    private readonly clock: Clock,
  ) {}

  async create(orgId: string, body: TaxRateCreate): Promise<TaxRate> {
    const displayName = body.displayName.trim();
    if ([...displayName].length < 1 || [...displayName].length > 50) throw validationError('body.displayName must be 1-50 characters after trimming');
    if (!isPercentage(body.percentage)) throw validationError(`body.percentage must be decimal text above 0 and at most 100 with at most 4 fraction digits, such as "19" or "8.875" (got ${JSON.stringify(body.percentage)})`);
    const country = parseCountry(body.country, 'body.country');
    const region = parseRegion(body.region, country, 'body.region');
    const inclusive = body.inclusive ?? false;
    const others = await this.rates.activeForCountry(orgId, country);
    const clash = others.find((r) => r.inclusive !== inclusive);
    if (clash) {
      throw validationError(`body.inclusive must be ${clash.inclusive} for ${country}: its active rate ${clash.id} is ${clash.inclusive ? 'inclusive' : 'exclusive'}, and one country's rates are all inclusive or all exclusive`);
    }
    const now = this.clock.now();
    const rate: TaxRate = {
      id: newId('TXR'),
      orgId,
      displayName,
      percentage: canonicalPercentage(body.percentage),
      inclusive,
      country,
      region,
      description: body.description?.trim() || null,
      status: 'ACTIVE',
      stripeTaxRateId: null,
      createdAt: now,
      updatedAt: now,
      archivedAt: null,
    };
    await this.rates.insert(rate);
    return rate;
  }

  async get(orgId: string, id: string): Promise<TaxRate> {
    const rate = await this.rates.find(orgId, id);
    if (!rate) throw notFound('Tax rate');
    return rate;
  }

  list(orgId: string, status: TaxRate['status'] = 'ACTIVE'): Promise<TaxRate[]> {
    return this.rates.list(orgId, status);
  }

  async archive(orgId: string, id: string): Promise<TaxRate> {
    await this.get(orgId, id);
    await this.rates.archive(orgId, id, this.clock.now());
    return this.get(orgId, id);
  }

  async settings(orgId: string): Promise<{ merchantCountry: string | null }> {
    return { merchantCountry: await this.rates.merchantCountry(orgId) };
  }

  async updateSettings(orgId: string, body: { merchantCountry: string | null }): Promise<{ merchantCountry: string | null }> {
    const country = body.merchantCountry === null ? null : parseCountry(body.merchantCountry, 'body.merchantCountry');
    await this.rates.setMerchantCountry(orgId, country);
    return { merchantCountry: country };
  }

  /** Whether the hosted page must ask for the buyer's country: the organization has an ACTIVE rate. */
  hasActiveRates(orgId: string): Promise<boolean> {
    return this.rates.hasActive(orgId);
  }

  /** Validates request fields (`prefix` names them in a 400) into a location. */
  parseLocation(input: { country: string; region?: string | null; taxId?: string | null }, prefix: string): TaxLocation {
    return parseTaxLocation(input, prefix);
  }

  /** The tax of a location: reverse charge, or the ACTIVE rates of its country for its region (possibly none). */
  async contextFor(orgId: string, location: TaxLocation): Promise<TaxContext> {
    const merchantCountry = await this.rates.merchantCountry(orgId);
    if (isReverseCharge(location, merchantCountry)) return { location, rates: [], reverseCharge: true };
    const rates = (await this.rates.activeForCountry(orgId, location.country)).filter((r) => r.region === null || r.region === location.region);
    return {
      location,
      rates: rates.map((r) => ({ rateId: r.id, displayName: r.displayName, percentage: r.percentage, inclusive: r.inclusive })),
      reverseCharge: false,
    };
  }

  /** The Stripe tax rate of a rate, made once by `make` (the Stripe rail). */
  async stripeTaxRate(orgId: string, rateId: string, make: (rate: TaxRate) => Promise<string>): Promise<string> {
    const rate = await this.get(orgId, rateId);
    if (rate.stripeTaxRateId) return rate.stripeTaxRateId;
    return this.rates.recordStripeTaxRate(rate.id, await make(rate));
  }
}
