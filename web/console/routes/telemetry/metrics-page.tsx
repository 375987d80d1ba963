/**
 * A project's metrics over the last 24 hours by hour (buckets start at the viewer's local hour):
 * requests, errors, error rate, tokens in/out, cost and latency p50/p95/p99, the figures of
 * `GET /v1/metrics` for the project; each bucket opens the traces of its hour.
 */
import { useMemo } from 'preact/hooks';
import { ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { consoleApi } from '../../shared/api';
import { filtersToQuery, formatDateTime } from '../../shared/format';
import { useApi } from '../../shared/use-api';
import { formatMetricValue } from './lib/metric-format';

const HOUR = 3_600_000;
const COLUMNS = [
  { key: 'requests', metric: 'llm.requests.total', aggregation: 'sum', label: 'Requests' },
  { key: 'errors', metric: 'llm.requests.errors', aggregation: 'sum', label: 'Errors' },
  { key: 'tokens_in', metric: 'llm.tokens.input', aggregation: 'sum', label: 'Tokens in' },
  { key: 'tokens_out', metric: 'llm.tokens.output', aggregation: 'sum', label: 'Tokens out' },
  { key: 'cost', metric: 'llm.cost.total', aggregation: 'sum', label: 'Cost (USD)' },
  { key: 'p50', metric: 'llm.latency_ms', aggregation: 'p50', label: 'Latency p50 (ms)' },
  { key: 'p95', metric: 'llm.latency_ms', aggregation: 'p95', label: 'p95' },
  { key: 'p99', metric: 'llm.latency_ms', aggregation: 'p99', label: 'p99' },
] as const;

/** The range: the 24 whole hours up to the current one, by the viewer's clock (hour offsets are whole in most zones). */
export function hourRange(now: number): { start_time: string; end_time: string } {
  const end = new Date(now);
  end.setMinutes(0, 0, 0);
  const endMs = end.getTime() + HOUR;
  return { start_time: new Date(endMs - 24 * HOUR).toISOString(), end_time: new Date(endMs).toISOString() };
}

export function MetricsPage(props: { projectId: string }) {
  const range = useMemo(() => hourRange(Date.now()), []);
  const data = useApi(async () => {
    const answers = await Promise.all(
      COLUMNS.map((c) =>
        consoleApi.GET('/v1/console/telemetry-projects/{project_id}/metrics', {
          params: { path: { project_id: props.projectId }, query: { metric: c.metric, aggregation: c.aggregation, interval: '1h', ...range } },
        }),
      ),
    );
    const failed = answers.find((a) => a.error !== undefined);
    if (failed) return { error: failed.error, response: failed.response };
    const series = answers.map((a) => a.data!.data.series[0]?.datapoints ?? []);
    return { data: series };
  }, [props.projectId, range.start_time]);
  const base = `/console/telemetry/${props.projectId}`;
  const buckets = data.data?.[0] ?? [];
  return (
    <>
      <PageHeader title="Metrics">
        <a href={`${base}/traces`}>Traces</a>
      </PageHeader>
      <ErrorNotice message={data.error} retry={data.reload} />
      {!data.data && data.loading && <Loading />}
      {data.data && (
        <div class="table-wrap">
          <table aria-label="Metrics by hour">
            <thead>
              <tr>
                <th scope="col">Hour</th>
                {COLUMNS.map((c) => (
                  <th scope="col" class="num" key={c.key}>
                    {c.label}
                  </th>
                ))}
                <th scope="col" class="num">Error rate</th>
              </tr>
            </thead>
            <tbody>
              {buckets.map((b, i) => {
                const requests = data.data![0]![i]?.value ?? 0;
                const errors = data.data![1]![i]?.value ?? 0;
                const start = b.timestamp;
                const end = new Date(Date.parse(start) + HOUR).toISOString();
                return (
                  <tr key={start} data-bucket={start}>
                    <td>
                      <a href={`${base}/traces${filtersToQuery({ start_time: start, end_time: end })}`}>{formatDateTime(start)}</a>
                    </td>
                    {COLUMNS.map((c, j) => (
                      <td key={c.key} class="num" data-field={c.key}>
                        {formatMetricValue(data.data![j]![i]?.value, c.key)}
                      </td>
                    ))}
                    <td class="num">{requests > 0 ? `${((errors / requests) * 100).toFixed(1)} %` : '—'}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
