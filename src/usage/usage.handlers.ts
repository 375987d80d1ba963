import { presentMeterBalance, type MeterBalances } from '../commerce/meter-balances.js';
import type { Clock } from '../kernel/clock.js';
import { notFound } from '../kernel/errors.js';
import type { ConsoleHandlers, MerchantHandlers } from '../handler-maps.js';
import { iso, isoOrNull } from '../kernel/present.js';
import type { MeterPreview, MeterService, Quantities } from './meters.service.js';
import type { Meter } from './usage.model.js';
import type { UsageEventService } from './usage-events.service.js';

type UsageHandlers = Pick<
  MerchantHandlers,
  'ingestUsageEvents' | 'listMeters' | 'createMeter' | 'getMeter' | 'updateMeter' | 'archiveMeter' | 'getMeterQuantities' | 'getCustomerMeterBalances'
>;


export const presentMeter = (m: Meter) => ({
  id: m.id,
  name: m.name,
  source: m.source,
  filter: m.filter,
  aggregation: m.aggregation,
  property: m.property,
  customerAttribute: m.customerAttribute,
  status: m.status,
  rollupStatus: m.rollupStatus,
  createdAt: iso(m.createdAt),
  updatedAt: iso(m.updatedAt),
  archivedAt: isoOrNull(m.archivedAt),
});

export const presentQuantities = (q: Quantities) => ({
  meterId: q.meterId,
  customerId: q.customerId,
  start: iso(q.start),
  end: iso(q.end),
  interval: q.interval,
  total: q.total,
  buckets: q.buckets.map((b) => ({ start: iso(b.start), end: iso(b.end), quantity: b.quantity })),
});

export function createUsageHandlers(events: UsageEventService, meters: MeterService, balances: MeterBalances, clock: Clock): UsageHandlers {
  return {
    getCustomerMeterBalances: async ({ auth, params }) => {
      // By CUS_… id, else externalId; another organization's customer is 404. One statement finds
      // the customer with its credits, subscriptions and meters' names (MeterBalances.forCustomerRef).
      const asOf = clock.now();
      const read = await balances.forCustomerRef(auth.orgId, params.id);
      if (!read) throw notFound('Customer');
      const { customer, balances: list } = read;
      return {
        status: 200,
        body: { success: true, message: 'OK', data: { customerId: customer.id, externalId: customer.externalId, asOf: iso(asOf), balances: list.map(presentMeterBalance) } },
      };
    },
    ingestUsageEvents: async ({ auth, body }) => ({
      status: 200,
      body: { success: true, message: 'Usage events recorded', data: await events.ingest(auth.orgId, body.events) },
    }),
    listMeters: async ({ auth, query }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: { records: (await meters.list(auth.orgId, query.status)).map(presentMeter) } },
    }),
    createMeter: async ({ auth, body }) => ({
      status: 201,
      body: { success: true, message: 'Meter created', data: presentMeter(await meters.create(auth.orgId, body)) },
    }),
    getMeter: async ({ auth, params }) => ({ status: 200, body: { success: true, message: 'OK', data: presentMeter(await meters.get(auth.orgId, params.id)) } }),
    updateMeter: async ({ auth, params, body }) => ({
      status: 200,
      body: { success: true, message: 'Meter updated', data: presentMeter(await meters.update(auth.orgId, params.id, body)) },
    }),
    archiveMeter: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Meter archived', data: presentMeter(await meters.archive(auth.orgId, params.id)) },
    }),
    getMeterQuantities: async ({ auth, params, query }) => ({
      status: 200,
      body: {
        success: true,
        message: 'OK',
        data: presentQuantities(
          await meters.quantities(auth.orgId, params.id, { customer: query.customer, start: new Date(query.start), end: new Date(query.end), interval: query.interval }),
        ),
      },
    }),
  };
}

export const presentPreview = (p: MeterPreview) => ({
  start: iso(p.start),
  end: iso(p.end),
  interval: p.interval,
  read: p.read,
  total: p.total,
  buckets: p.buckets.map((b) => ({ start: iso(b.start), end: iso(b.end), quantity: b.quantity })),
});

/** The console's live preview of a meter definition (openapi/console.yaml, previewConsoleMeter): a read, not audited. */
export function createUsageConsoleHandlers(meters: MeterService): Pick<ConsoleHandlers, 'previewConsoleMeter'> {
  return {
    previewConsoleMeter: async ({ auth, body }) => ({ status: 200, body: { success: true, message: 'OK', data: presentPreview(await meters.preview(auth.orgId, body)) } }),
  };
}
