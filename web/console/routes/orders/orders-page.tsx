/**
 * Orders: the list with the API's filters (status, product, provider, customer, subscription,
 * merchant reference, buyer wallet, transaction hash, dates) as the page URL's query, keyset
 * paging, and a search box that goes straight to an object by id, or filters by e-mail (the
 * customers list), transaction hash (`tx_hash`) or merchant reference.
 */
import { useLocation } from 'preact-iso';
import { ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { Pager } from '../../components/pager';
import { classifySearch, filtersToQuery, localMidnightUnix, addDays, queryToFilters } from '../../shared/format';
import { consoleTimeZone } from '../../shared/time-zone';
import { OrdersTable } from './components/orders-table';
import { useOrders, type OrdersQuery } from './use-orders';

const FILTER_KEYS = ['status', 'provider', 'product_id', 'customer_id', 'subscription_id', 'merchant_reference', 'from_address', 'tx_hash', 'from', 'to', 'starting_after', 'ending_before'] as const;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** The URL's filters as the API's query (local dates → Unix seconds in the console's time zone). */
export function ordersQuery(filters: Partial<Record<(typeof FILTER_KEYS)[number], string>>, timeZone: string): OrdersQuery {
  const query: OrdersQuery = { size: 25 };
  if (filters.status) query.status = filters.status.toLowerCase() as OrdersQuery['status'];
  if (filters.provider) query.provider = filters.provider as OrdersQuery['provider'];
  if (filters.product_id) query.product_id = filters.product_id;
  if (filters.customer_id) query.customer_id = filters.customer_id;
  if (filters.subscription_id) query.subscription_id = filters.subscription_id;
  if (filters.merchant_reference) query.merchant_reference = filters.merchant_reference;
  if (filters.from_address) query.from_address = filters.from_address;
  if (filters.tx_hash) query.tx_hash = filters.tx_hash;
  if (filters.from && DATE.test(filters.from)) query.date_from = localMidnightUnix(filters.from, timeZone);
  if (filters.to && DATE.test(filters.to)) query.date_to = localMidnightUnix(addDays(filters.to, 1), timeZone);
  if (filters.starting_after) query.starting_after = filters.starting_after;
  else if (filters.ending_before) query.ending_before = filters.ending_before;
  return query;
}

export function OrdersPage() {
  const { query, route } = useLocation();
  const timeZone = consoleTimeZone();
  const filters = queryToFilters(query, FILTER_KEYS);
  const orders = useOrders(ordersQuery(filters, timeZone));
  const apply = (event: Event) => {
    event.preventDefault();
    const data = new FormData(event.currentTarget as HTMLFormElement);
    const next: Record<string, string> = {};
    for (const key of FILTER_KEYS) {
      const value = data.get(key);
      if (typeof value === 'string') next[key] = value;
    }
    route(`/console/orders${filtersToQuery(next)}`);
  };
  const search = (event: Event) => {
    event.preventDefault();
    const text = String(new FormData(event.currentTarget as HTMLFormElement).get('q') ?? '');
    const found = classifySearch(text);
    if (!found.value) return;
    if (found.kind === 'order') route(`/console/orders/${encodeURIComponent(found.value)}`);
    else if (found.kind === 'customer') route(`/console/customers/${encodeURIComponent(found.value)}`);
    else if (found.kind === 'subscription') route(`/console/subscriptions/${encodeURIComponent(found.value)}`);
    else if (found.kind === 'email') route(`/console/customers${filtersToQuery({ email: found.value })}`);
    else if (found.kind === 'tx') route(`/console/orders${filtersToQuery({ tx_hash: found.value })}`);
    else route(`/console/orders${filtersToQuery({ merchant_reference: found.value })}`);
  };
  return (
    <>
      <PageHeader title="Orders" />
      <form class="toolbar" role="search" onSubmit={search}>
        <label>
          Search
          <input name="q" type="search" placeholder="Id, e-mail or reference" title="An order (ORD_…) or customer (CUS_…) id, a buyer's e-mail address, a transaction hash or your reference" defaultValue={filters.tx_hash ?? filters.merchant_reference ?? ''} />
        </label>
        <button type="submit">Search</button>
      </form>
      <details open={Object.keys(filters).some((k) => k !== 'starting_after' && k !== 'ending_before')}>
        <summary>Filters</summary>
        <form class="toolbar" onSubmit={apply} aria-label="Filters">
          <label>
            Status
            <select name="status" defaultValue={filters.status?.toLowerCase() ?? ''}>
              <option value="">Any</option>
              <option value="paid">Paid</option>
              <option value="pending">Pending</option>
              <option value="failed">Failed</option>
              <option value="refunded">Refunded</option>
              <option value="underpaid">Underpaid</option>
            </select>
          </label>
          <label>
            Provider
            <select name="provider" defaultValue={filters.provider ?? ''}>
              <option value="">Any</option>
              <option value="STRIPE">Card (Stripe)</option>
              <option value="CRYPTO">Crypto</option>
            </select>
          </label>
          <label>
            Product
            <input name="product_id" placeholder="PRD_…" defaultValue={filters.product_id ?? ''} />
          </label>
          <label>
            Customer
            <input name="customer_id" placeholder="CUS_…" defaultValue={filters.customer_id ?? ''} />
          </label>
          <label>
            Wallet
            <input name="from_address" placeholder="0x…" pattern="^0x[0-9a-fA-F]{40}$" defaultValue={filters.from_address ?? ''} />
          </label>
          <label>
            Transaction
            <input name="tx_hash" placeholder="0x… (64 hex digits)" pattern="^0x[0-9a-fA-F]{64}$" defaultValue={filters.tx_hash ?? ''} />
          </label>
          <label>
            From
            <input name="from" type="date" defaultValue={filters.from ?? ''} />
          </label>
          <label>
            To
            <input name="to" type="date" defaultValue={filters.to ?? ''} />
          </label>
          <input type="hidden" name="subscription_id" value={filters.subscription_id ?? ''} />
          <input type="hidden" name="merchant_reference" value={filters.merchant_reference ?? ''} />
          <button type="submit" class="primary">
            Apply
          </button>
          <a class="button" href="/console/orders">
            Clear
          </a>
        </form>
      </details>
      <ErrorNotice message={orders.error} retry={orders.reload} />
      {orders.loading && !orders.data && <Loading />}
      {orders.data && (
        <>
          <OrdersTable orders={orders.data.records} timeZone={timeZone} caption="Orders" />
          <Pager path="/console/orders" filters={filters} page={orders.data} cursor={filters} />
        </>
      )}
    </>
  );
}
