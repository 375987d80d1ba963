/** The agents' signing history: filters (wallet, agent, status) and the cursor in the URL; resource URLs, decisions and denial reasons. */
import { useLocation } from 'preact-iso';
import { Badge, Empty, ErrorNotice, Loading, Time } from '../../../components/ui';
import { filtersToQuery, formatAmount, queryToFilters } from '../../../shared/format';
import { consoleTimeZone } from '../../../shared/time-zone';
import { useHistory, type HistoryQuery } from '../use-agents';

const KEYS = ['wallet_id', 'agent_id', 'status', 'starting_after'] as const;
const PATH = '/console/agents/history';
const TONES = { signed: 'good', confirmed: 'good', denied: 'bad', failed: 'bad', pending: 'warn' } as const;

export function AgentHistory(props: { wallets: Array<{ walletId: string; name: string }>; agents: Array<{ agentId: string; name: string }> }) {
  const { query, route } = useLocation();
  const filters = queryToFilters(query, KEYS);
  const history = useHistory(filters as HistoryQuery);
  const timeZone = consoleTimeZone();
  const agentName = new Map(props.agents.map((a) => [a.agentId, a.name]));
  return (
    <section aria-labelledby="history-title">
      <h2 id="history-title">Signing history</h2>
      <form
        class="toolbar"
        aria-label="Filter the signing history"
        onSubmit={(e) => {
          e.preventDefault();
          const data = new FormData(e.currentTarget);
          route(`${PATH}${filtersToQuery({ wallet_id: String(data.get('wallet_id') ?? ''), agent_id: String(data.get('agent_id') ?? ''), status: String(data.get('status') ?? '') })}`);
        }}
      >
        <div>
          <label for="history-wallet">Wallet</label>
          <select id="history-wallet" name="wallet_id" defaultValue={filters.wallet_id ?? ''}>
            <option value="">Any</option>
            {props.wallets.map((w) => (
              <option key={w.walletId} value={w.walletId}>
                {w.name}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="history-agent">Agent</label>
          <select id="history-agent" name="agent_id" defaultValue={filters.agent_id ?? ''}>
            <option value="">Any</option>
            {props.agents.map((a) => (
              <option key={a.agentId} value={a.agentId}>
                {a.name}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="history-status">Decision</label>
          <select id="history-status" name="status" defaultValue={filters.status ?? ''}>
            <option value="">Any</option>
            {['signed', 'denied', 'failed', 'pending', 'confirmed'].map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <button type="submit">Filter</button>
      </form>
      <ErrorNotice message={history.error} retry={history.reload} />
      {!history.data && !history.error && <Loading />}
      {history.data && history.data.records.length === 0 && <Empty>No signing requests{filters.starting_after ? ' after this point' : ''}.</Empty>}
      {history.data && history.data.records.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Request</th>
                <th scope="col">Decision</th>
                <th scope="col" class="hide-narrow">
                  Agent
                </th>
                <th scope="col" class="hide-narrow">
                  When
                </th>
              </tr>
            </thead>
            <tbody>
              {history.data.records.map((r) => (
                <tr key={r.id} data-testid="history-entry">
                  <td>
                    <code>{r.type}</code>
                    {r.resourceUrl && <div class="small mono">{r.resourceUrl}</div>}
                    {r.amount && (
                      <div class="small">
                        {formatAmount(r.amount, r.asset)}{r.destination ? <> to <span class="mono">{r.destination}</span></> : null}
                      </div>
                    )}
                  </td>
                  <td>
                    <Badge tone={TONES[r.status as keyof typeof TONES] ?? 'neutral'}>{r.status}</Badge>
                    {r.failureMessage && <div class="small">{r.failureMessage}</div>}
                  </td>
                  <td class="hide-narrow small">{agentName.get(r.agentId ?? '') ?? r.agentId}</td>
                  <td class="hide-narrow">
                    <Time iso={r.createdAt} timeZone={timeZone} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <nav class="pager" aria-label="Pages">
        {filters.starting_after && (
          <a class="button" href={`${PATH}${filtersToQuery({ ...filters, starting_after: undefined })}`}>
            Newest
          </a>
        )}{' '}
        {history.data?.hasMore && history.data.nextCursor && (
          <a class="button" href={`${PATH}${filtersToQuery({ ...filters, starting_after: history.data.nextCursor })}`}>
            Older →
          </a>
        )}
      </nav>
    </section>
  );
}
