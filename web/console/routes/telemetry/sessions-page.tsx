/** A project's sessions (traces sharing `session.id`) with their totals; a session opens its traces in order. */
import { useLocation } from 'preact-iso';
import { Empty, ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { filtersToQuery, formatDateTime, formatLlmCost, queryToFilters } from '../../shared/format';
import { useSessions } from './use-telemetry';

export function SessionsPage(props: { projectId: string }) {
  const { query } = useLocation();
  const filters = queryToFilters(query, ['user_id', 'cursor'] as const);
  const sessions = useSessions(props.projectId, { ...(filters.user_id ? { user_id: filters.user_id } : {}), ...(filters.cursor ? { cursor: filters.cursor } : {}) });
  const base = `/console/telemetry/${props.projectId}`;
  return (
    <>
      <PageHeader title={filters.user_id ? `Sessions of ${filters.user_id}` : 'Sessions'}>
        <a href={`${base}/users`}>Users</a> <a href={`${base}/traces`}>Traces</a>
      </PageHeader>
      <ErrorNotice message={sessions.error} retry={sessions.reload} />
      {!sessions.data && sessions.loading && <Loading />}
      {sessions.data && sessions.data.items.length === 0 && <Empty>No trace of this project carries a session.id yet.</Empty>}
      {sessions.data && sessions.data.items.length > 0 && (
        <div class="table-wrap">
          <table aria-label="Sessions">
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">User</th>
                <th scope="col">Traces</th>
                <th scope="col">Last activity</th>
                <th scope="col">Tokens in/out</th>
                <th scope="col">Cost</th>
                <th scope="col">Errors</th>
              </tr>
            </thead>
            <tbody>
              {sessions.data.items.map((s) => (
                <tr key={s.session_id}>
                  <td>
                    <a href={`${base}/traces${filtersToQuery({ session_id: s.session_id, sort: 'start_time', range: '30d' })}`}>{s.session_id}</a>
                  </td>
                  <td>{s.user_id ? <a href={`${base}/sessions${filtersToQuery({ user_id: s.user_id })}`}>{s.user_id}</a> : '—'}</td>
                  <td>{s.trace_count}</td>
                  <td>{formatDateTime(s.last_end)}</td>
                  <td>
                    {s.tokens_input} / {s.tokens_output}
                  </td>
                  <td>{formatLlmCost(s.cost)}</td>
                  <td>{s.error_count}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {sessions.data?.pagination.next_cursor && (
        <p class="pager">
          <a href={`${base}/sessions${filtersToQuery({ ...filters, cursor: sessions.data.pagination.next_cursor })}`}>Next page</a>
        </p>
      )}
    </>
  );
}
