/**
 * A project's traces: filters in the URL (default: the last 24 hours), sorting, keyset paging,
 * and live updates while the range ends "now" (the first page is polled every 5 seconds).
 */
import { useLocation } from 'preact-iso';
import { useEffect, useState } from 'preact/hooks';
import { Badge, Empty, ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { filtersToQuery, formatDateTime, formatLlmCost, queryToFilters } from '../../shared/format';
import { formatDuration } from './lib/time-scale';
import { TRACE_FILTER_KEYS as KEYS, moreFiltersSet, tracesQuery } from './lib/trace-filters';
import { useTraces } from './use-telemetry';

export const POLL_MS = 5000;


export function TracesPage(props: { projectId: string }) {
  const { query, route } = useLocation();
  const filters = queryToFilters(query, KEYS);
  const live = !filters.end_time && !filters.cursor;
  const [tick, setTick] = useState(0);
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!live) return;
    const timer = setInterval(() => {
      setNow(Date.now());
      setTick((t) => t + 1);
    }, POLL_MS);
    return () => clearInterval(timer);
  }, [live]);
  const traces = useTraces(props.projectId, tracesQuery(filters, now), tick);
  const base = `/console/telemetry/${props.projectId}`;
  const apply = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const next: Record<string, string> = {};
    for (const key of KEYS) if (key !== 'cursor' && typeof form.get(key) === 'string') next[key] = String(form.get(key));
    route(`${base}/traces${filtersToQuery(next)}`);
  };
  const page = traces.data;
  const moreSet = moreFiltersSet(filters);
  return (
    <>
      <PageHeader title="Traces">
        <a href={`${base}/sessions`}>Sessions</a> <a href={`${base}/metrics`}>Metrics</a> <a href={`${base}/prices`}>Prices</a> <a href={`${base}/settings`}>Settings</a>
      </PageHeader>
      <form class="toolbar" onSubmit={apply} aria-label="Trace filters">
        <label>
          Range
          <select name="range">
            <option value="1h" selected={(filters.range ?? '24h') === '1h'}>Last hour</option>
            <option value="24h" selected={(filters.range ?? '24h') === '24h'}>Last 24 hours</option>
            <option value="7d" selected={(filters.range ?? '24h') === '7d'}>Last 7 days</option>
            <option value="30d" selected={(filters.range ?? '24h') === '30d'}>Last 30 days</option>
          </select>
        </label>
        <label>
          Status
          <select name="status">
            <option value="" selected={(filters.status ?? '') === ''}>Any</option>
            <option value="ok" selected={(filters.status ?? '') === 'ok'}>OK</option>
            <option value="error" selected={(filters.status ?? '') === 'error'}>Error</option>
          </select>
        </label>
        <label>
          Model
          <input name="model" defaultValue={filters.model ?? ''} placeholder="gpt-4o" />
        </label>
        <label>
          Sort
          <select name="sort">
            <option value="-start_time" selected={(filters.sort ?? '-start_time') === '-start_time'}>Newest first</option>
            <option value="start_time" selected={(filters.sort ?? '-start_time') === 'start_time'}>Oldest first</option>
            <option value="-duration_ms" selected={(filters.sort ?? '-start_time') === '-duration_ms'}>Slowest first</option>
            <option value="-cost" selected={(filters.sort ?? '-start_time') === '-cost'}>Most expensive first</option>
          </select>
        </label>
        <button type="submit">Apply</button>
        <details class="more-filters" open={moreSet > 0}>
          <summary>More filters{moreSet > 0 ? ` (${moreSet} set)` : ''}</summary>
          <div class="toolbar">
            <label>
              Min duration (ms)
              <input name="min_latency_ms" inputMode="numeric" pattern="\d*" defaultValue={filters.min_latency_ms ?? ''} />
            </label>
            <label>
              Min cost (USD)
              <input name="min_cost" inputMode="decimal" defaultValue={filters.min_cost ?? ''} />
            </label>
            <label>
              Attribute
              <input name="attribute_key" defaultValue={filters.attribute_key ?? ''} placeholder="key" />
            </label>
            <label>
              Value
              <input name="attribute_value" defaultValue={filters.attribute_value ?? ''} placeholder="value" />
            </label>
            <label>
              Trace id
              <input name="trace_id" pattern="[0-9a-f]{32}" defaultValue={filters.trace_id ?? ''} />
            </label>
            <label>
              Session
              <input name="session_id" defaultValue={filters.session_id ?? ''} />
            </label>
            <label>
              User
              <input name="user_id" defaultValue={filters.user_id ?? ''} />
            </label>
          </div>
        </details>
      </form>
      {live && <p class="muted small">Live: new traces appear every {POLL_MS / 1000} seconds.</p>}
      <ErrorNotice message={traces.error} retry={traces.reload} />
      {!page && traces.loading && <Loading />}
      {page && page.items.length === 0 && <Empty>No traces match these filters in this range.</Empty>}
      {page && page.items.length > 0 && (
        <div class="table-wrap">
          <table aria-label="Traces">
            <thead>
              <tr>
                <th scope="col" class="hide-narrow">
                  Start
                </th>
                <th scope="col">Name</th>
                <th scope="col">Duration</th>
                <th scope="col" class="hide-narrow">
                  Spans
                </th>
                <th scope="col" class="hide-narrow">
                  Model
                </th>
                <th scope="col" class="hide-narrow">
                  Tokens in/out
                </th>
                <th scope="col" class="hide-narrow">
                  Cost
                </th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              {page.items.map((t) => (
                <tr key={t.trace_id} data-trace-id={t.trace_id}>
                  <td class="hide-narrow">{formatDateTime(t.start_time)}</td>
                  <td class="break-words">
                    <a href={`${base}/traces/${t.trace_id}`}>{t.name}</a>
                    {/* At 390 px the start and the cost ride under the name: the table fits without scrolling sideways. */}
                    <div class="only-narrow muted small">
                      {formatDateTime(t.start_time)} · <span data-field="cost-narrow">{formatLlmCost(t.llm_summary.cost)}</span>
                    </div>
                  </td>
                  <td data-field="duration_ms">{formatDuration(t.duration_ms)}</td>
                  <td class="hide-narrow">{t.span_count}</td>
                  <td class="hide-narrow">{t.llm_summary.model ?? '—'}</td>
                  <td class="hide-narrow">
                    {t.llm_summary.tokens_input} / {t.llm_summary.tokens_output}
                  </td>
                  <td data-field="cost" class="hide-narrow">
                    {formatLlmCost(t.llm_summary.cost)}
                  </td>
                  <td>{t.status === 'error' ? <Badge tone="bad">Error</Badge> : <Badge tone="good">OK</Badge>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {page?.pagination.next_cursor && (
        <p class="pager">
          <a href={`${base}/traces${filtersToQuery({ ...filters, cursor: page.pagination.next_cursor })}`}>Next page</a>
        </p>
      )}
    </>
  );
}
