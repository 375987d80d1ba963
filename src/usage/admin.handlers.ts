/**
 * The admin API's meters (openapi/admin.yaml, tag Usage): the merchant API's reads through the
 * same MeterService, for the organization in the path. An unknown organization is 404, so an
 * operator's mistyped id is told, not answered with an empty list.
 */
import type { AdminHandlers } from '../handler-maps.js';
import { notFound } from '../kernel/errors.js';
import type { MeterService } from './meters.service.js';
import { presentMeter } from './usage.handlers.js';

export function createUsageAdminHandlers(meters: MeterService, orgExists: (orgId: string) => Promise<boolean>): Pick<AdminHandlers, 'listOrgMeters' | 'getOrgMeter'> {
  const organization = async (orgId: string) => {
    if (!(await orgExists(orgId))) throw notFound('Organization');
  };
  return {
    listOrgMeters: async ({ params, query }) => {
      await organization(params.id);
      return { status: 200, body: { success: true, message: 'OK', data: { records: (await meters.list(params.id, query?.status)).map(presentMeter) } } };
    },
    getOrgMeter: async ({ params }) => {
      await organization(params.id);
      return { status: 200, body: { success: true, message: 'OK', data: presentMeter(await meters.get(params.id, params.meterId)) } };
    },
  };
}
