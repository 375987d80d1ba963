/** Customers: the list, searchable by e-mail (exact, as the API matches), keyset paging. */
import { useLocation } from 'preact-iso';
import { Empty, ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { Pager } from '../../components/pager';
import { filtersToQuery, queryToFilters } from '../../shared/format';
import { useCustomers, type CustomersQuery } from './use-customers';

const KEYS = ['email', 'starting_after', 'ending_before'] as const;

export function CustomersPage() {
  const { query, route } = useLocation();
  const filters = queryToFilters(query, KEYS);
  const apiQuery: CustomersQuery = { size: 25 };
  if (filters.email) apiQuery.email = filters.email;
  if (filters.starting_after) apiQuery.starting_after = filters.starting_after;
  else if (filters.ending_before) apiQuery.ending_before = filters.ending_before;
  const list = useCustomers(apiQuery);
  return (
    <>
      <PageHeader title="Customers" />
      <form
        class="toolbar"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          route(`/console/customers${filtersToQuery({ email: String(new FormData(e.currentTarget).get('email') ?? '') })}`);
        }}
      >
        <label>
          E-mail address
          <input name="email" type="search" defaultValue={filters.email ?? ''} />
        </label>
        <button type="submit">Search</button>
      </form>
      <ErrorNotice message={list.error} retry={list.reload} />
      {list.loading && !list.data && <Loading />}
      {list.data && list.data.records.length === 0 && <Empty>No customers match.</Empty>}
      {list.data && list.data.records.length > 0 && (
        <>
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Customer</th>
                  <th scope="col">E-mail</th>
                </tr>
              </thead>
              <tbody>
                {list.data.records.map((c) => (
                  <tr key={c.customerId}>
                    <td>
                      <a href={`/console/customers/${c.customerId}`} class="mono">
                        {c.customerId}
                      </a>
                    </td>
                    <td>{c.email}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager path="/console/customers" filters={filters} page={list.data} cursor={filters} />
        </>
      )}
    </>
  );
}
