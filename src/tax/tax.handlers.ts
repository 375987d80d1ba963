/** The tax rates' merchant operations and the console's tax operations (openapi tag Tax Rates / Tax). */
import type { ConsoleHandlers, MerchantHandlers } from '../handler-maps.js';
import { iso, isoOrNull } from '../kernel/present.js';
import type { TaxRate } from './tax.model.js';
import type { TaxService } from './tax.service.js';

export const presentTaxRate = (r: TaxRate) => ({
  id: r.id,
  displayName: r.displayName,
  percentage: r.percentage,
  inclusive: r.inclusive,
  country: r.country,
  region: r.region,
  description: r.description,
  status: r.status,
  createdAt: iso(r.createdAt),
  updatedAt: iso(r.updatedAt),
  archivedAt: isoOrNull(r.archivedAt),
});

export type TaxMerchantHandlers = Pick<MerchantHandlers, 'listTaxRates' | 'getTaxRate'>;
export type TaxConsoleHandlers = Pick<ConsoleHandlers, 'createConsoleTaxRate' | 'archiveConsoleTaxRate' | 'getConsoleTaxSettings' | 'updateConsoleTaxSettings'>;

export function createTaxMerchantHandlers(tax: TaxService): TaxMerchantHandlers {
  return {
    listTaxRates: async ({ auth, query }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: { records: (await tax.list(auth.orgId, query.status)).map(presentTaxRate) } },
    }),
    getTaxRate: async ({ auth, params }) => ({ status: 200, body: { success: true, message: 'OK', data: presentTaxRate(await tax.get(auth.orgId, params.id)) } }),
  };
}

export function createTaxConsoleHandlers(tax: TaxService): TaxConsoleHandlers {
  return {
    createConsoleTaxRate: async ({ auth, body }) => ({ status: 201, body: { success: true, message: 'Tax rate created', data: presentTaxRate(await tax.create(auth.orgId, body)) } }),
    archiveConsoleTaxRate: async ({ auth, params }) => ({ status: 200, body: { success: true, message: 'Tax rate archived', data: presentTaxRate(await tax.archive(auth.orgId, params.id)) } }),
    getConsoleTaxSettings: async ({ auth }) => ({ status: 200, body: { success: true, message: 'OK', data: await tax.settings(auth.orgId) } }),
    updateConsoleTaxSettings: async ({ auth, body }) => ({ status: 200, body: { success: true, message: 'Tax settings updated', data: await tax.updateSettings(auth.orgId, body) } }),
  };
}
