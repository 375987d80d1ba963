/** The webhook signing keys (current first, then retired keys in their grace period) and their rotation. */
import { useState } from 'preact/hooks';
import { ConfirmButton } from '../../../components/confirm';
import { Badge, Empty, ErrorNotice, Loading, Time } from '../../../components/ui';
import { errorMessage } from '../../../shared/api';
import { consoleTimeZone } from '../../../shared/time-zone';
import { rotateSigningKey, useSigningKeys } from '../use-developers';

/** The API's 409 names when the next rotation is possible; say why it waits. */
export const ROTATION_RULE =
  'One signing key serves every organization of this Kassa, and each published key adds a signature to every delivery, so a member may rotate only when the current key is at least 24 hours old.';

export function SigningKeysSection() {
  const keys = useSigningKeys();
  const [rotated, setRotated] = useState<string | undefined>();
  const timeZone = consoleTimeZone();
  return (
    <section aria-labelledby="signing-keys-title">
      <h2 id="signing-keys-title">Webhook signing keys</h2>
      <p class="muted small">
        Deliveries are signed with Ed25519; receivers fetch the public keys from <code>GET /v1/webhooks/signing-key</code> on the API listener. The private halves never leave Kassa.
      </p>
      {rotated && (
        <p role="status" class="card">
          New current key <code>{rotated}</code>; the previous key keeps signing for 7 days, so receivers keep verifying while they refresh.
        </p>
      )}
      <ConfirmButton
        label="Rotate signing key"
        title="Rotate the webhook signing key?"
        confirmLabel="Rotate key"
        danger
        onConfirm={async () => {
          const answer = await rotateSigningKey();
          if (answer.error || !answer.data) {
            const message = errorMessage(answer.error, answer.response);
            return answer.response?.status === 409 ? `${message}. ${ROTATION_RULE}` : message;
          }
          setRotated(answer.data.keyId);
          keys.reload();
        }}
      >
        <p>A new key signs from now on; the current one stays published and signing for 7 days.</p>
        <p class="muted small">{ROTATION_RULE}</p>
      </ConfirmButton>
      <ErrorNotice message={keys.error} retry={keys.reload} />
      {!keys.data && !keys.error && <Loading />}
      {keys.data && keys.data.length === 0 && <Empty>No signing key yet: the first delivery creates one.</Empty>}
      {keys.data && keys.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col">State</th>
                <th scope="col" class="hide-narrow">
                  Created
                </th>
                <th scope="col">Published until</th>
              </tr>
            </thead>
            <tbody>
              {keys.data.map((k) => (
                <tr key={k.keyId}>
                  <td>
                    <span class="mono small">{k.keyId}</span>
                    <div class="mono small">{k.publicKey}</div>
                  </td>
                  <td>{k.current ? <Badge tone="good">Current</Badge> : <Badge tone="neutral">Retired</Badge>}</td>
                  <td class="hide-narrow">
                    <Time iso={k.createdAt} timeZone={timeZone} />
                  </td>
                  <td>{k.publishUntil ? <Time iso={k.publishUntil} timeZone={timeZone} /> : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
