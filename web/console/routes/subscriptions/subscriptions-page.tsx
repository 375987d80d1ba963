/** Subscriptions: the list (status and customer filters in the URL, keyset paging). */
import { useLocation } from 'preact-iso';
import { ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { Pager } from '../../components/pager';
import { filtersToQuery, queryToFilters } from '../../shared/format';
import { consoleTimeZone } from '../../shared/time-zone';
import { SubscriptionsTable } from './components/subscriptions-table';
import { useSubscriptions, type SubscriptionsQuery } from './use-subscriptions';

const KEYS = ['status', 'customer_id', 'starting_after', 'ending_before'] as const;

export function SubscriptionsPage() {
  const { query, route } = useLocation();
  const filters = queryToFilters(query, KEYS);
  const apiQuery: SubscriptionsQuery = { size: 25 };
  if (filters.status) apiQuery.status = filters.status as SubscriptionsQuery['status'];
  if (filters.customer_id) apiQuery.customer_id = filters.customer_id;
  if (filters.starting_after) apiQuery.starting_after = filters.starting_after;
  else if (filters.ending_before) apiQuery.ending_before = filters.ending_before;
  const list = useSubscriptions(apiQuery);
  return (
    <>
      <PageHeader title="Subscriptions" />
      <form
        class="toolbar"
        aria-label="Filters"
        onSubmit={(e) => {
          e.preventDefault();
          const data = new FormData(e.currentTarget);
          route(`/console/subscriptions${filtersToQuery({ status: String(data.get('status') ?? ''), customer_id: String(data.get('customer_id') ?? '') })}`);
        }}
      >
        <label>
          Status
          <select name="status" defaultValue={filters.status ?? ''}>
            <option value="">Any</option>
            <option value="ACTIVE">Active</option>
            <option value="PAUSED">Paused</option>
            <option value="CANCELED">Canceled</option>
            <option value="ENDED">Ended</option>
            <option value="EXPIRED">Expired</option>
          </select>
        </label>
        <label>
          Customer
          <input name="customer_id" placeholder="CUS_…" defaultValue={filters.customer_id ?? ''} />
        </label>
        <button type="submit" class="primary">
          Apply
        </button>
      </form>
      <ErrorNotice message={list.error} retry={list.reload} />
      {list.loading && !list.data && <Loading />}
      {list.data && (
        <>
          <SubscriptionsTable subscriptions={list.data.records} timeZone={consoleTimeZone()} />
          <Pager path="/console/subscriptions" filters={filters} page={list.data} cursor={filters} />
        </>
      )}
    </>
  );
}
