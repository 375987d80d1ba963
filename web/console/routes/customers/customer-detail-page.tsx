/** One customer: their orders, subscriptions, credit balance, usage this period and current entitlements. */
import { useRoute } from 'preact-iso';
import { Empty, ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { consoleTimeZone } from '../../shared/time-zone';
import { OrdersTable } from '../orders/components/orders-table';
import { useOrders } from '../orders/use-orders';
import { SubscriptionsTable } from '../subscriptions/components/subscriptions-table';
import { useSubscriptions } from '../subscriptions/use-subscriptions';
import { CustomerCreditBalance } from './components/customer-credit-balance';
import { CustomerUsage } from './components/customer-usage';
import { useCustomer, useCustomerEntitlements } from './use-customers';

/** The currency the customer pays in: their active subscription's, else their newest order's (the lists are newest first). */
function customerCurrency(subscriptions: Array<{ status: string; currency: string }> | undefined, orders: Array<{ currency: string }> | undefined): string | undefined {
  return (subscriptions?.find((s) => s.status === 'ACTIVE') ?? subscriptions?.[0])?.currency ?? orders?.[0]?.currency;
}

export function CustomerDetailPage() {
  const { params } = useRoute();
  const id = params.id!;
  const timeZone = consoleTimeZone();
  const customer = useCustomer(id);
  const orders = useOrders({ customer_id: id, size: 25 });
  const subscriptions = useSubscriptions({ customer_id: id, size: 25 });
  const entitlements = useCustomerEntitlements(id);
  return (
    <>
      <PageHeader title={customer.data ? customer.data.email : 'Customer'} />
      <p>
        <a href="/console/customers">← Customers</a> · <span class="mono">{id}</span>
      </p>
      <ErrorNotice message={customer.error} retry={customer.reload} />
      {!customer.data && !customer.error && <Loading />}
      {customer.data && (
        <>
          <h2>Orders</h2>
          <ErrorNotice message={orders.error} retry={orders.reload} />
          {orders.data && <OrdersTable orders={orders.data.records} timeZone={timeZone} caption="The customer's orders" />}
          {orders.data?.hasMore && <a href={`/console/orders?customer_id=${encodeURIComponent(id)}`}>All their orders →</a>}
          <h2>Subscriptions</h2>
          <ErrorNotice message={subscriptions.error} retry={subscriptions.reload} />
          {subscriptions.data && <SubscriptionsTable subscriptions={subscriptions.data.records} timeZone={timeZone} />}
          <CustomerCreditBalance id={id} timeZone={timeZone} currency={customerCurrency(subscriptions.data?.records, orders.data?.records)} />
          <CustomerUsage id={id} timeZone={timeZone} />
          <h2>Entitlements</h2>
          <ErrorNotice message={entitlements.error} retry={entitlements.reload} />
          {entitlements.data && entitlements.data.products.length === 0 && <Empty>No access to any catalog product now.</Empty>}
          {entitlements.data && entitlements.data.products.length > 0 && (
            <ul>
              {entitlements.data.products.map((p) => (
                <li key={p.productId}>
                  {p.productName} <span class="muted small">({p.type === 'ONE_TIME' ? 'one-time purchase' : 'active subscription'})</span>
                </li>
              ))}
            </ul>
          )}
        </>
      )}
    </>
  );
}
