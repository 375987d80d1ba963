/** Typed data hook over `GET /v1/metrics/commerce`. */
import type { components } from '../../../../generated/merchant';
import { merchantApi } from '../../shared/api';
import { useApi } from '../../shared/use-api';

export type CommerceMetrics = components['schemas']['CommerceMetrics'];
export type CurrencyFigures = components['schemas']['CommerceCurrencyFigures'];

export function useCommerceMetrics(query: { start: string; end: string; interval: 'day' | 'week' | 'month'; timeZone: string }) {
  return useApi(
    () =>
      merchantApi
        .GET('/v1/metrics/commerce', { params: { query: { start_date: query.start, end_date: query.end, interval: query.interval, time_zone: query.timeZone } } })
        .then((r) => ({ ...r, data: r.data?.data })),
    [query.start, query.end, query.interval, query.timeZone],
  );
}
