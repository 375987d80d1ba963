import type { MerchantHandlers } from '../handler-maps.js';
import { iso } from '../kernel/present.js';
import type { CommerceMetricsService } from './commerce-metrics.service.js';

type CommerceMetricsHandlers = Pick<MerchantHandlers, 'getCommerceMetrics'>;

export function createCommerceMetricsHandlers(metrics: CommerceMetricsService): CommerceMetricsHandlers {
  return {
    getCommerceMetrics: async ({ auth, query }) => {
      const m = await metrics.metrics(auth.orgId, {
        startDate: query.start_date,
        endDate: query.end_date,
        interval: query.interval ?? 'day',
        timeZone: query.time_zone ?? 'UTC',
        currency: query.currency,
      });
      const data = { ...m, buckets: m.buckets.map((b) => ({ date: b.date, start: iso(b.start), end: iso(b.end) })) };
      return { status: 200, body: { success: true, message: 'OK', data } };
    },
  };
}
