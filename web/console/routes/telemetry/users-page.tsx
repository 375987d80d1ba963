/** A project's end users (`user.id` / `enduser.id`) with sessions, traces, tokens, cost and errors; a user opens their sessions. */
import { useLocation } from 'preact-iso';
import { Empty, ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { filtersToQuery, formatDateTime, formatLlmCost, queryToFilters } from '../../shared/format';
import { useUsers } from './use-telemetry';

export function UsersPage(props: { projectId: string }) {
  const { query } = useLocation();
  const filters = queryToFilters(query, ['cursor'] as const);
  const users = useUsers(props.projectId, filters.cursor ? { cursor: filters.cursor } : {});
  const base = `/console/telemetry/${props.projectId}`;
  return (
    <>
      <PageHeader title="Users">
        <a href={`${base}/sessions`}>Sessions</a> <a href={`${base}/traces`}>Traces</a>
      </PageHeader>
      <ErrorNotice message={users.error} retry={users.reload} />
      {!users.data && users.loading && <Loading />}
      {users.data && users.data.items.length === 0 && <Empty>No trace of this project names a user (user.id or enduser.id) yet.</Empty>}
      {users.data && users.data.items.length > 0 && (
        <div class="table-wrap">
          <table aria-label="Users">
            <thead>
              <tr>
                <th scope="col">User</th>
                <th scope="col">Sessions</th>
                <th scope="col">Traces</th>
                <th scope="col">Last activity</th>
                <th scope="col">Tokens in/out</th>
                <th scope="col">Cost</th>
                <th scope="col">Errors</th>
              </tr>
            </thead>
            <tbody>
              {users.data.items.map((u) => (
                <tr key={u.user_id} data-user={u.user_id}>
                  <td>
                    <a href={`${base}/sessions${filtersToQuery({ user_id: u.user_id })}`}>{u.user_id}</a>
                  </td>
                  <td>{u.session_count}</td>
                  <td>{u.trace_count}</td>
                  <td>{formatDateTime(u.last_end)}</td>
                  <td>
                    {u.tokens_input} / {u.tokens_output}
                  </td>
                  <td>{formatLlmCost(u.cost)}</td>
                  <td>{u.error_count}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {users.data?.pagination.next_cursor && (
        <p class="pager">
          <a href={`${base}/users${filtersToQuery({ cursor: users.data.pagination.next_cursor })}`}>Next page</a>
        </p>
      )}
    </>
  );
}
