/** A table of orders (the orders list, a customer's orders): each row links to the order. */
import { EmailAddress, Empty, Money, Time } from '../../../components/ui';
import type { Order } from '../use-orders';
import { OrderStatus } from './order-status';

export function OrdersTable(props: { orders: Order[]; timeZone: string; caption: string }) {
  if (props.orders.length === 0) return <Empty>No orders match.</Empty>;
  return (
    <div class="table-wrap">
      <table>
        <caption class="visually-hidden">{props.caption}</caption>
        <thead>
          <tr>
            <th scope="col">Order</th>
            <th scope="col" class="num">
              Amount
            </th>
            <th scope="col">Status</th>
            <th scope="col" class="hide-narrow">
              Customer
            </th>
            <th scope="col" class="hide-narrow">
              Product
            </th>
            <th scope="col" class="hide-narrow">
              Created
            </th>
          </tr>
        </thead>
        <tbody>
          {props.orders.map((order) => (
            <tr key={order.orderId}>
              <td>
                <a href={`/console/orders/${order.orderId}`} class="mono id" title={order.orderId}>
                  {order.orderId}
                </a>
                <div class="only-narrow muted small break-words" data-field="buyer">
                  <EmailAddress email={order.customerEmail} />
                </div>
              </td>
              <td class="num">
                <Money minor={order.amountCents} currency={order.currency} />
              </td>
              <td>
                <OrderStatus order={order} />
              </td>
              <td class="hide-narrow">
                <EmailAddress email={order.customerEmail} />
              </td>
              <td class="hide-narrow">{order.productName ?? '—'}</td>
              <td class="hide-narrow">
                <Time iso={order.createdAt} timeZone={props.timeZone} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
