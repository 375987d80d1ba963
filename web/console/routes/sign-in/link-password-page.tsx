/**
 * The pages of the links Kassa sends: accepting an invite (`/console/accept-invite#token=…`:
 * choose a password, then signed in) and resetting a password (`/console/reset-password#token=…`).
 * The token stays in the fragment (never sent to a server) until the form posts it.
 */
import { useRef, useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { consoleApi } from '../../shared/api';
import { useAction } from '../../shared/use-api';
import { useSession } from '../../shared/session';
import { ErrorNotice } from '../../components/ui';
import { tokenFromFragment } from './sign-in-link-page';

export function LinkPasswordPage(props: { kind: 'invite' | 'reset' }) {
  const { setSession } = useSession();
  const { route } = useLocation();
  const token = useRef(tokenFromFragment(location.hash));
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [done, setDone] = useState(false);
  const accept = useAction(() => consoleApi.POST('/v1/console/invites/accept', { body: { token: token.current ?? '', password, ...(name ? { name } : {}) } }).then((r) => ({ ...r, data: r.data?.data })));
  const reset = useAction(() => consoleApi.POST('/v1/console/password-resets/complete', { body: { token: token.current ?? '', password } }).then((r) => ({ ...r, data: r.response.ok ? true : undefined })));
  const action = props.kind === 'invite' ? accept : reset;
  const submit = async (event: Event) => {
    event.preventDefault();
    if (props.kind === 'invite') {
      const session = await accept.run();
      if (session) {
        setSession(session);
        route('/console/', true);
      }
    } else if (await reset.run()) setDone(true);
  };
  const title = props.kind === 'invite' ? 'Join your organization on Kassa' : 'Choose a new password';
  return (
    <main id="main" class="auth">
      <form class="card auth-card" onSubmit={submit} aria-labelledby="link-title">
        <h1 id="link-title">{title}</h1>
        {!token.current && <ErrorNotice message="This link has no token. Open the whole link as it was sent to you." />}
        {done ? (
          <p role="status">
            Your password is set. <a href="/console/sign-in">Sign in</a>.
          </p>
        ) : (
          <>
            {props.kind === 'invite' && (
              <>
                <label for="name">Your name (optional)</label>
                <input id="name" autoComplete="name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
              </>
            )}
            <label for="new-password">Password (12 characters or more)</label>
            <input id="new-password" type="password" autoComplete="new-password" minLength={12} maxLength={256} required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
            <ErrorNotice message={action.error && `${action.error} An invite works for 7 days, a reset link for an hour, each once: ask for a new one if it has expired.`} />
            <button type="submit" class="primary" disabled={action.pending || !token.current}>
              {props.kind === 'invite' ? 'Join' : 'Set password'}
            </button>
          </>
        )}
      </form>
    </main>
  );
}
