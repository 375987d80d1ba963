/**
 * Settings → Security: the member's own passkeys (add, remove), and for owners the organization's
 * "require a second factor" switch with the members who have no passkey yet. A restricted session
 * (the organization requires a second factor, the member has no passkey) lands here, with a
 * banner saying why, until a passkey is added.
 */
import { useState } from 'preact/hooks';
import { ConfirmButton } from '../../../components/confirm';
import { Empty, ErrorNotice, Loading, Time } from '../../../components/ui';
import { consoleApi, errorMessage } from '../../../shared/api';
import { useAction } from '../../../shared/use-api';
import { useSession } from '../../../shared/session';
import { consoleTimeZone } from '../../../shared/time-zone';
import { ceremonyError, createPasskey, passkeysSupported } from '../../../shared/webauthn';
import { reloadSession, removePasskey, setRequireSecondFactor, useOrganizationSecurity, usePasskeys } from '../use-settings';

export function RestrictedBanner() {
  const { session } = useSession();
  if (!session?.secondFactor.restricted) return null;
  return (
    <div class="notice warn" role="alert">
      <strong>Add a passkey to continue.</strong> Your organization requires a second factor, and this account has no passkey yet. Until you add one below, this session can only manage its passkeys and sign out.
    </div>
  );
}

export function PasskeysSection() {
  const { session, setSession } = useSession();
  const passkeys = usePasskeys();
  const isOwner = session?.role === 'owner';
  const security = useOrganizationSecurity(isOwner);
  const [name, setName] = useState('');
  const timeZone = consoleTimeZone();

  const refresh = async () => {
    passkeys.reload();
    if (isOwner) security.reload();
    const next = await reloadSession();
    if (next.data) setSession(next.data);
  };
  const add = useAction(async () => {
    const options = await consoleApi.POST('/v1/console/passkeys/registration-options');
    if (!options.data) return options;
    let credential;
    try {
      credential = await createPasskey(options.data.data.publicKey);
    } catch (error) {
      return { error: { message: ceremonyError(error) } };
    }
    if (!credential) return { error: { message: 'The passkey prompt was closed before it answered. Try again.' } };
    return consoleApi.POST('/v1/console/passkeys', { body: { challengeId: options.data.data.challengeId, credential, ...(name.trim() ? { name: name.trim() } : {}) } });
  });
  const submit = async (event: Event) => {
    event.preventDefault();
    if (await add.run()) {
      setName('');
      await refresh();
    }
  };
  const toggle = useAction((required: boolean) => setRequireSecondFactor(required));

  return (
    <section aria-labelledby="passkeys-title">
      <h2 id="passkeys-title">Passkeys</h2>
      <p class="muted">A passkey signs you in without a password, and is the second step after your password once you have one.</p>
      {passkeys.loading && !passkeys.data ? (
        <Loading label="Loading passkeys" />
      ) : passkeys.error ? (
        <ErrorNotice message={passkeys.error} retry={passkeys.reload} />
      ) : passkeys.data && passkeys.data.length > 0 ? (
        <div class="table-wrap">
          <table aria-label="Your passkeys">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Added</th>
                <th scope="col">Last used</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {passkeys.data.map((p) => (
                <tr key={p.passkeyId}>
                  <td>{p.name}</td>
                  <td><Time iso={p.createdAt} timeZone={timeZone} /></td>
                  <td>{p.lastUsedAt ? <Time iso={p.lastUsedAt} timeZone={timeZone} /> : 'Never'}</td>
                  <td>
                    <ConfirmButton
                      label={`Remove ${p.name}`}
                      title={`Remove the passkey ${p.name}?`}
                      confirmLabel="Remove passkey"
                      danger
                      onConfirm={async () => {
                        const answer = await removePasskey(p.passkeyId);
                        if (answer.error) return errorMessage(answer.error, answer.response);
                        await refresh();
                      }}
                    >
                      <p>You will no longer be able to sign in with it. The authenticator may keep it until you delete it there too.</p>
                    </ConfirmButton>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <Empty>No passkey yet.</Empty>
      )}
      {passkeysSupported() ? (
        <form class="toolbar" onSubmit={submit} aria-label="Add a passkey">
          <label for="passkey-name">Name (optional)</label>
          <input id="passkey-name" maxLength={64} placeholder="e.g. Work laptop" value={name} onInput={(e) => setName(e.currentTarget.value)} />
          <button type="submit" class="primary" disabled={add.pending}>
            {add.pending ? 'Waiting for your authenticator…' : 'Add a passkey'}
          </button>
        </form>
      ) : (
        <p class="muted">This browser cannot create passkeys.</p>
      )}
      <ErrorNotice message={add.error} />

      {isOwner && (
        <section aria-labelledby="requirement-title">
          <h2 id="requirement-title">Second factor for every member</h2>
          {security.error ? (
            <ErrorNotice message={security.error} retry={security.reload} />
          ) : !security.data ? (
            <Loading label="Loading the organization's security" />
          ) : (
            <>
              <label class="switch">
                <input
                  type="checkbox"
                  role="switch"
                  checked={security.data.requireSecondFactor}
                  disabled={toggle.pending}
                  onChange={async (e) => {
                    const wanted = e.currentTarget.checked;
                    e.currentTarget.checked = !wanted;
                    if (await toggle.run(wanted)) security.reload();
                  }}
                />{' '}
                Require a passkey of every member of this organization
              </label>
              <p class="muted small">Members without a passkey can then only add one until they do. You need a passkey yourself to turn this on.</p>
              <ErrorNotice message={toggle.error} />
              <h3>Members without a passkey</h3>
              {security.data.membersWithoutPasskey.length === 0 ? (
                <Empty>Every member has a passkey.</Empty>
              ) : (
                <ul>
                  {security.data.membersWithoutPasskey.map((m) => (
                    <li key={m.userId}>
                      {m.email} <span class="muted">({m.role})</span>
                    </li>
                  ))}
                </ul>
              )}
            </>
          )}
        </section>
      )}
    </section>
  );
}
