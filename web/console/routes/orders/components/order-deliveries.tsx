/**
 * The order's webhook deliveries (issue 30): every delivery of an event about this order (the
 * delivery log's `order_id` filter), each linking to its page in the delivery log (payload,
 * attempts, redeliver). Roles that cannot read the log (it needs `webhooks:write`) are told so.
 */
import { Badge, Empty, ErrorNotice, Loading, Time } from '../../../components/ui';
import { filtersToQuery } from '../../../shared/format';
import { useSession } from '../../../shared/session';
import { useOrderDeliveries } from '../use-orders';

const TONES = { succeeded: 'good', failed: 'bad', pending: 'warn' } as const;

export function OrderDeliveries(props: { orderId: string; timeZone: string }) {
  const { can, loading } = useSession();
  const allowed = can('webhooks:write');
  const deliveries = useOrderDeliveries(props.orderId, allowed);
  const log = `/console/developers/deliveries${filtersToQuery({ order_id: props.orderId })}`;
  const records = deliveries.data?.records;
  return (
    <section class="card" aria-labelledby="order-deliveries-title">
      <h2 id="order-deliveries-title">Webhook deliveries</h2>
      {!allowed && !loading && <p class="muted">Your role cannot read the webhook delivery log (owners, admins and developers can).</p>}
      {allowed && (
        <>
          <ErrorNotice message={deliveries.error} retry={deliveries.reload} />
          {!deliveries.data && !deliveries.error && <Loading />}
          {records && records.length === 0 && <Empty>No webhook deliveries for this order yet: none of your endpoints has been sent an event about it.</Empty>}
          {records && records.length > 0 && (
            <div class="table-wrap">
              <table>
                <caption class="visually-hidden">Webhook deliveries of this order, newest first</caption>
                <thead>
                  <tr>
                    <th scope="col">Event</th>
                    <th scope="col">Status</th>
                    <th scope="col">Attempts</th>
                    <th scope="col" class="hide-narrow">
                      Time
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {records.map((d) => (
                    <tr key={d.deliveryId}>
                      <td>
                        <a href={`/console/developers/deliveries/${d.deliveryId}`}>
                          {d.eventType}
                          <span class="visually-hidden"> delivery {d.deliveryId}</span>
                        </a>
                        {/* At 390 px the time column is hidden (display: none, for screen readers too): the time goes under the event. */}
                        <div class="muted small only-narrow">
                          <Time iso={d.createdAt} timeZone={props.timeZone} />
                        </div>
                      </td>
                      <td>
                        <Badge tone={TONES[d.status]}>{d.status}</Badge>
                        {d.lastStatusCode ? <span class="muted small"> HTTP {d.lastStatusCode}</span> : null}
                      </td>
                      <td>{d.attemptCount}</td>
                      <td class="hide-narrow">
                        <Time iso={d.createdAt} timeZone={props.timeZone} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          {records && (
            <p>
              <a href={log}>{deliveries.data?.nextCursor ? 'All deliveries of this order in the delivery log →' : 'This order in the delivery log →'}</a>
            </p>
          )}
        </>
      )}
    </section>
  );
}
