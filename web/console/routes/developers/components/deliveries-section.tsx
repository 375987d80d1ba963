/**
 * The webhook delivery log: filters (status, event type, order) in the URL, keyset pages; one
 * delivery with its payload and every attempt (status, response, duration), and redelivery.
 */
import { useLocation } from 'preact-iso';
import { Badge, Empty, ErrorNotice, Fields, Loading, Time } from '../../../components/ui';
import { filtersToQuery, queryToFilters } from '../../../shared/format';
import { useAction } from '../../../shared/use-api';
import { consoleTimeZone } from '../../../shared/time-zone';
import { EVENT_TYPES, redeliver, useDeliveries, useDelivery, type DeliveriesQuery } from '../use-developers';

const TONES = { succeeded: 'good', failed: 'bad', pending: 'warn' } as const;
const KEYS = ['status', 'event_type', 'order_id', 'starting_after'] as const;

export function DeliveriesSection() {
  const { query, route } = useLocation();
  const filters = queryToFilters(query, KEYS);
  const deliveries = useDeliveries(filters as DeliveriesQuery);
  const timeZone = consoleTimeZone();
  return (
    <section aria-labelledby="deliveries-title">
      <h2 id="deliveries-title">Webhook deliveries</h2>
      <form
        class="toolbar"
        aria-label="Filters"
        onSubmit={(e) => {
          e.preventDefault();
          const data = new FormData(e.currentTarget);
          route(`/console/developers/deliveries${filtersToQuery({ status: String(data.get('status') ?? ''), event_type: String(data.get('event_type') ?? ''), order_id: String(data.get('order_id') ?? '') })}`);
        }}
      >
        <label>
          Status
          <select name="status" defaultValue={filters.status ?? ''}>
            <option value="">Any</option>
            <option value="succeeded">Succeeded</option>
            <option value="failed">Failed</option>
            <option value="pending">Pending</option>
          </select>
        </label>
        <label>
          Event
          <select name="event_type" defaultValue={filters.event_type ?? ''}>
            <option value="">Any</option>
            {[...EVENT_TYPES, 'webhook.test'].map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        <label>
          Order
          <input name="order_id" placeholder="ORD_…" defaultValue={filters.order_id ?? ''} />
        </label>
        <button type="submit" class="primary">
          Apply
        </button>
      </form>
      <ErrorNotice message={deliveries.error} retry={deliveries.reload} />
      {!deliveries.data && !deliveries.error && <Loading />}
      {deliveries.data && deliveries.data.records.length === 0 && <Empty>No deliveries match.</Empty>}
      {deliveries.data && deliveries.data.records.length > 0 && (
        <>
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Event</th>
                  <th scope="col">Status</th>
                  <th scope="col" class="hide-narrow">
                    Attempts
                  </th>
                  <th scope="col" class="hide-narrow">
                    Created
                  </th>
                </tr>
              </thead>
              <tbody>
                {deliveries.data.records.map((d) => (
                  <tr key={d.deliveryId}>
                    <td>
                      <a href={`/console/developers/deliveries/${d.deliveryId}`}>{d.eventType}</a>
                      <div class="mono small">{d.orderId ?? d.eventId}</div>
                    </td>
                    <td>
                      <Badge tone={TONES[d.status]}>{d.status}</Badge>
                      {d.lastStatusCode ? <span class="muted small"> HTTP {d.lastStatusCode}</span> : null}
                    </td>
                    <td class="hide-narrow">{d.attemptCount}</td>
                    <td class="hide-narrow">
                      <Time iso={d.createdAt} timeZone={timeZone} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {deliveries.data.nextCursor && (
            <nav class="pager" aria-label="Pages">
              <span />
              <a class="button" href={`/console/developers/deliveries${filtersToQuery({ ...filters, starting_after: deliveries.data.nextCursor })}`}>
                Older →
              </a>
            </nav>
          )}
        </>
      )}
    </section>
  );
}

export function DeliverySection(props: { id: string }) {
  const delivery = useDelivery(props.id);
  const again = useAction(redeliver);
  const timeZone = consoleTimeZone();
  const d = delivery.data;
  return (
    <section aria-labelledby="delivery-title">
      <p>
        <a href="/console/developers/deliveries">← Deliveries</a>
      </p>
      <h2 id="delivery-title">Delivery {props.id}</h2>
      <ErrorNotice message={delivery.error} retry={delivery.reload} />
      {!d && !delivery.error && <Loading />}
      {d && (
        <>
          <div class="card">
            <Fields
              items={[
                ['Event', <code>{d.eventType}</code>],
                ['Status', <Badge tone={TONES[d.status]}>{d.status}</Badge>],
                ['Endpoint', `${d.endpoint.name}${d.endpoint.deleted ? ' (deleted)' : ''}`],
                ['URL', <span class="mono">{d.endpoint.url}</span>],
                ['Order', d.orderId ? <a href={`/console/orders/${d.orderId}`} class="mono">{d.orderId}</a> : '—'],
                ['Next attempt', <Time iso={d.nextAttemptAt} timeZone={timeZone} />],
              ]}
            />
            <p>
              <button
                type="button"
                class="primary"
                disabled={again.pending || d.endpoint.deleted}
                onClick={async () => {
                  if (await again.run(d.deliveryId)) delivery.reload();
                }}
              >
                Redeliver
              </button>
            </p>
            <ErrorNotice message={again.error} />
          </div>
          <h3>Attempts</h3>
          {d.attempts.length === 0 ? (
            <Empty>No attempt yet.</Empty>
          ) : (
            <ol class="timeline">
              {d.attempts.map((a) => (
                <li key={a.attemptNumber}>
                  <strong>
                    Attempt {a.attemptNumber}: {a.statusCode ? `HTTP ${a.statusCode}` : (a.error ?? 'no response')}
                  </strong>
                  <div class="muted small">
                    <Time iso={a.attemptedAt} timeZone={timeZone} /> · {a.durationMs} ms
                  </div>
                  {a.responseBody ? <pre class="mono small payload">{a.responseBody}</pre> : null}
                </li>
              ))}
            </ol>
          )}
          <h3>Payload</h3>
          <pre class="mono small payload" tabIndex={0} aria-label="Payload">
            {JSON.stringify(d.payload, null, 2)}
          </pre>
        </>
      )}
    </section>
  );
}
