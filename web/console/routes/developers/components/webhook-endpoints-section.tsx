/** Webhook endpoints: create (name, https URL, events), send a test event, enable/disable, delete; the signing key's location. */
import { useState } from 'preact/hooks';
import { ConfirmButton } from '../../../components/confirm';
import { Badge, Empty, ErrorNotice, Loading } from '../../../components/ui';
import { errorMessage } from '../../../shared/api';
import { useAction } from '../../../shared/use-api';
import { EVENT_TYPES, createWebhookEndpoint, deleteWebhookEndpoint, sendTestEvent, updateWebhookEndpoint, useWebhookEndpoints, type WebhookEventType } from '../use-developers';

export function WebhookEndpointsSection() {
  const endpoints = useWebhookEndpoints();
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<WebhookEventType[]>([]);
  const create = useAction(createWebhookEndpoint);
  const toggle = useAction(updateWebhookEndpoint);
  const test = useAction(sendTestEvent);
  const [tested, setTested] = useState<{ endpoint: string; deliveryId: string } | undefined>();
  const submit = async (event: Event) => {
    event.preventDefault();
    if (await create.run({ name, url, events, enabled: true })) {
      setName('');
      setUrl('');
      setEvents([]);
      endpoints.reload();
    }
  };
  return (
    <section aria-labelledby="endpoints-title">
      <h2 id="endpoints-title">Webhook endpoints</h2>
      <p class="muted small">
        Deliveries are signed with the Ed25519 key published at <code>GET /v1/webhooks/signing-key</code> on the API listener (see the <a href="/docs">API reference</a> and <a href="/console/developers/signing-keys">Signing keys</a>).
      </p>
      <form class="card" onSubmit={submit} aria-labelledby="new-endpoint-title">
        <h3 id="new-endpoint-title">New endpoint</h3>
        <label for="endpoint-name">Name</label>
        <input id="endpoint-name" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <label for="endpoint-url">URL (https)</label>
        <input id="endpoint-url" type="url" required placeholder="https://shop.example.com/hooks/kassa" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
        <fieldset>
          <legend>Events (none: every event, also those added later)</legend>
          {EVENT_TYPES.map((type) => (
            <label key={type} class="check">
              <input type="checkbox" checked={events.includes(type)} onChange={(e) => setEvents(e.currentTarget.checked ? [...events, type] : events.filter((t) => t !== type))} /> <code>{type}</code>
            </label>
          ))}
        </fieldset>
        <ErrorNotice message={create.error} />
        <button type="submit" class="primary" disabled={create.pending}>
          Add endpoint
        </button>
      </form>
      <ErrorNotice message={endpoints.error ?? toggle.error ?? test.error} retry={endpoints.reload} />
      {tested && (
        <p role="status" class="card">
          A <code>webhook.test</code> event was queued for {tested.endpoint}: <a href={`/console/developers/deliveries/${tested.deliveryId}`}>follow its delivery</a>.
        </p>
      )}
      {!endpoints.data && !endpoints.error && <Loading />}
      {endpoints.data && endpoints.data.records.length === 0 && <Empty>No webhook endpoints yet.</Empty>}
      {endpoints.data && endpoints.data.records.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Endpoint</th>
                <th scope="col" class="hide-narrow">
                  Events
                </th>
                <th scope="col">State</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {endpoints.data.records.map((endpoint) => (
                <tr key={endpoint.id}>
                  <td>
                    <strong>{endpoint.name}</strong>
                    <div class="mono small">{endpoint.url}</div>
                  </td>
                  <td class="hide-narrow small">{endpoint.events.length ? endpoint.events.join(', ') : 'every event'}</td>
                  <td>{endpoint.enabled ? <Badge tone="good">Enabled</Badge> : <Badge tone="neutral">Disabled</Badge>}</td>
                  <td>
                    {endpoint.enabled && (
                      <>
                        <button type="button" disabled={test.pending} onClick={async () => {
                          const delivery = await test.run(endpoint.id);
                          if (delivery) setTested({ endpoint: endpoint.name, deliveryId: delivery.deliveryId });
                        }}>
                          {`Send test event to ${endpoint.name}`}
                        </button>{' '}
                      </>
                    )}
                    <button type="button" onClick={async () => (await toggle.run(endpoint.id, { enabled: !endpoint.enabled })) && endpoints.reload()}>
                      {endpoint.enabled ? `Disable ${endpoint.name}` : `Enable ${endpoint.name}`}
                    </button>{' '}
                    <ConfirmButton
                      label={`Delete ${endpoint.name}`}
                      title={`Delete the endpoint ${endpoint.name}?`}
                      confirmLabel="Delete endpoint"
                      danger
                      onConfirm={async () => {
                        const answer = await deleteWebhookEndpoint(endpoint.id);
                        if (answer.error) return errorMessage(answer.error, answer.response);
                        endpoints.reload();
                      }}
                    >
                      <p>No more events will be sent to {endpoint.url}.</p>
                    </ConfirmButton>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
