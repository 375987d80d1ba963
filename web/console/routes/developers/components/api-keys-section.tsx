/**
 * API keys: create with permissions (the key is shown once, with a copy button), the list with
 * last use, revoke with confirmation.
 */
import { useState } from 'preact/hooks';
import { ConfirmButton } from '../../../components/confirm';
import { Badge, CopyButton, Empty, ErrorNotice, Loading, Time } from '../../../components/ui';
import { errorMessage } from '../../../shared/api';
import { useAction } from '../../../shared/use-api';
import { useSession } from '../../../shared/session';
import { consoleTimeZone } from '../../../shared/time-zone';
import { KEY_PERMISSIONS, createApiKey, revokeApiKey, useApiKeys, type KeyPermission } from '../use-developers';

export function ApiKeysSection() {
  const { can, session } = useSession();
  const keys = useApiKeys();
  const [name, setName] = useState('');
  const [permissions, setPermissions] = useState<KeyPermission[]>([]);
  const [created, setCreated] = useState<{ name: string; key: string } | undefined>();
  const create = useAction(createApiKey);
  const timeZone = consoleTimeZone();
  const submit = async (event: Event) => {
    event.preventDefault();
    const answer = await create.run(name, permissions);
    if (answer) {
      setCreated({ name: answer.name, key: answer.key });
      setName('');
      setPermissions([]);
      keys.reload();
    }
  };
  if (!session) return <Loading />;
  if (!can('api_keys:manage')) return <p>Your role cannot manage API keys.</p>;
  return (
    <section aria-labelledby="keys-title">
      <h2 id="keys-title">API keys</h2>
      {created && (
        <div class="secret" role="status">
          <div>
            <strong>{created.name}</strong>: copy the key now, it is not shown again.
            <div>
              <code data-testid="new-api-key">{created.key}</code>
            </div>
          </div>
          <CopyButton text={created.key} label="Copy key" />
          <button type="button" onClick={() => setCreated(undefined)}>
            Done
          </button>
        </div>
      )}
      <form class="card" onSubmit={submit} aria-labelledby="new-key-title">
        <h3 id="new-key-title">New API key</h3>
        <label for="key-name">Name</label>
        <input id="key-name" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <fieldset>
          <legend>Permissions (none: every permission your role allows)</legend>
          {/* A key never holds more than its creator's role allows (a developer's has no subscriptions:manage). */}
          {KEY_PERMISSIONS.filter((permission) => can(permission)).map((permission) => (
            <label key={permission} class="check">
              <input
                type="checkbox"
                checked={permissions.includes(permission)}
                onChange={(e) => setPermissions(e.currentTarget.checked ? [...permissions, permission] : permissions.filter((p) => p !== permission))}
              />{' '}
              <code>{permission}</code>
              {permission === 'subscriptions:manage' && ' (customer portal sessions it opens may cancel and keep subscriptions)'}
            </label>
          ))}
        </fieldset>
        <ErrorNotice message={create.error} />
        <button type="submit" class="primary" disabled={create.pending}>
          Create key
        </button>
      </form>
      <ErrorNotice message={keys.error} retry={keys.reload} />
      {!keys.data && !keys.error && <Loading />}
      {keys.data && keys.data.length === 0 && <Empty>No API keys yet.</Empty>}
      {keys.data && keys.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col" class="hide-narrow">
                  Permissions
                </th>
                <th scope="col" class="hide-narrow">
                  Last used
                </th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.data.map((key) => (
                <tr key={key.apiKeyId}>
                  <td>{key.name}</td>
                  <td>
                    <code>{key.prefix}…</code>
                  </td>
                  <td class="hide-narrow small">{key.permissions.join(', ')}</td>
                  <td class="hide-narrow">
                    <Time iso={key.lastUsedAt} timeZone={timeZone} />
                  </td>
                  <td>
                    {key.revoked ? (
                      <Badge tone="neutral">Revoked</Badge>
                    ) : (
                      <ConfirmButton
                        label={`Revoke ${key.name}`}
                        title={`Revoke the key ${key.name}?`}
                        confirmLabel="Revoke key"
                        danger
                        onConfirm={async () => {
                          const answer = await revokeApiKey(key.apiKeyId);
                          if (answer.error) return errorMessage(answer.error, answer.response);
                          keys.reload();
                        }}
                      >
                        <p>Requests with this key will be refused at once. This cannot be undone.</p>
                      </ConfirmButton>
                    )}
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
