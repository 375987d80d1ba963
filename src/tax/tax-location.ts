/**
 * The buyer's tax location (issue 39): country (ISO 3166-1 alpha-2, via i18n-iso-countries),
 * optional region (the subdivision part of an ISO 3166-2 code, e.g. `CA` of `US-CA`), optional tax
 * id; and EU VAT ids, whose format and check digits per member state come from jsvat. No registry
 * (VIES) is consulted: a well-formed id is taken as the buyer's word (docs/tax.md).
 */
import countries from 'i18n-iso-countries';
import * as jsvat from 'jsvat';
import { validationError } from '../kernel/errors.js';
import type { TaxLocation } from '../commerce/tax.js';

/** The 27 EU member states (ISO codes; Greece's VAT prefix is `EL`). */
export const EU_MEMBER_STATES: ReadonlySet<string> = new Set(['AT', 'BE', 'BG', 'HR', 'CY', 'CZ', 'DK', 'EE', 'FI', 'FR', 'DE', 'GR', 'HU', 'IE', 'IT', 'LV', 'LT', 'LU', 'MT', 'NL', 'PL', 'PT', 'RO', 'SK', 'SI', 'ES', 'SE']);

const EU_VAT_RULES = [
  jsvat.austria, jsvat.belgium, jsvat.bulgaria, jsvat.croatia, jsvat.cyprus, jsvat.czechRepublic, jsvat.denmark, jsvat.estonia, jsvat.finland,
  jsvat.france, jsvat.germany, jsvat.greece, jsvat.hungary, jsvat.ireland, jsvat.italy, jsvat.latvia, jsvat.lithuania, jsvat.luxembourg,
  jsvat.malta, jsvat.netherlands, jsvat.poland, jsvat.portugal, jsvat.romania, jsvat.slovakiaRepublic, jsvat.slovenia, jsvat.spain, jsvat.sweden,
];

const REGION = /^[A-Z0-9]{1,3}$/;
const TAX_ID = /^[A-Z0-9][A-Z0-9 .\-/]{1,39}$/;

/** A country code, upper-cased; 400 naming `field` unless it is an assigned ISO 3166-1 alpha-2 code. */
export function parseCountry(value: string, field: string): string {
  const code = value.trim().toUpperCase();
  if (!/^[A-Z]{2}$/.test(code) || !countries.isValid(code)) throw validationError(`${field} must be an ISO 3166-1 alpha-2 country code such as DE or US (got ${JSON.stringify(value)})`);
  return code;
}

/** A region: the part after the dash of an ISO 3166-2 code (`CA` for California, `QC` for Québec); `US-CA` is accepted for `US`. */
export function parseRegion(value: string | null | undefined, country: string, field: string): string | null {
  if (value === null || value === undefined || value.trim() === '') return null;
  let code = value.trim().toUpperCase();
  if (code.startsWith(`${country}-`)) code = code.slice(country.length + 1);
  if (!REGION.test(code)) throw validationError(`${field} must be the subdivision part of an ISO 3166-2 code, 1-3 letters or digits such as CA for ${country === 'US' ? 'US-CA' : 'California'} (got ${JSON.stringify(value)})`);
  return code;
}

/** The English name of a country code (the hosted page's list). */
export const countryName = (code: string): string => countries.getName(code, 'en') ?? code;

/** Every assigned country code with its English name, sorted by name. */
export function countryOptions(): { code: string; name: string }[] {
  return Object.keys(countries.getAlpha2Codes())
    .map((code) => ({ code, name: countryName(code) }))
    .sort((a, b) => a.name.localeCompare(b.name, 'en'));
}

/** The member state of a well-formed EU VAT id (`DE136695976` → `DE`, `EL…` → `GR`), or null when it is not one. */
export function euVatCountry(vatId: string): string | null {
  const compact = vatId.replace(/[\s.\-/]/g, '').toUpperCase();
  const result = jsvat.checkVAT(compact, EU_VAT_RULES);
  return result.isValid && result.country ? result.country.isoCode.short : null;
}

/**
 * A buyer's location from request fields (`prefix` names them in errors, e.g. `body.customerTax`).
 * A tax id given for an EU country must be a well-formed VAT id of that member state; elsewhere it
 * is kept as given (1-40 letters, digits, spaces, `.-/`).
 */
export function parseTaxLocation(input: { country: string; region?: string | null; taxId?: string | null }, prefix: string): TaxLocation {
  const country = parseCountry(input.country, `${prefix}.country`);
  const region = parseRegion(input.region, country, `${prefix}.region`);
  let taxId: string | null = null;
  if (input.taxId !== undefined && input.taxId !== null && input.taxId.trim() !== '') {
    const raw = input.taxId.trim().toUpperCase();
    if (!TAX_ID.test(raw)) throw validationError(`${prefix}.taxId must be 2-40 letters, digits, spaces, dots, dashes or slashes (got ${JSON.stringify(input.taxId)})`);
    if (EU_MEMBER_STATES.has(country)) {
      const vatCountry = euVatCountry(raw);
      if (vatCountry === null) throw validationError(`${prefix}.taxId is not a well-formed EU VAT id (country prefix, then the member state's format and check digits, e.g. DE136695976); no registry is consulted`);
      if (vatCountry !== country) throw validationError(`${prefix}.taxId is a VAT id of ${vatCountry}, but ${prefix}.country is ${country}`);
      taxId = raw.replace(/[\s.\-/]/g, '');
    } else {
      taxId = raw;
    }
  }
  return { country, region, taxId };
}

/**
 * EU reverse charge: the buyer gave a well-formed VAT id of a member state other than the
 * merchant's own (an EU merchant: `merchantCountry` set and in the EU).
 */
export function isReverseCharge(location: TaxLocation, merchantCountry: string | null): boolean {
  return (
    merchantCountry !== null &&
    EU_MEMBER_STATES.has(merchantCountry) &&
    EU_MEMBER_STATES.has(location.country) &&
    location.country !== merchantCountry &&
    location.taxId !== null &&
    euVatCountry(location.taxId) === location.country
  );
}
