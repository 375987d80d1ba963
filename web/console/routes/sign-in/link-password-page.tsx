/**
 * The pages of the links Kassa sends: accepting an invite (`/console/accept-invite#token=…`: a new
 * account chooses a password; an address that has an account signs in first and joins as itself)
 * and resetting a password (`/console/reset-password#token=…`). The token stays in the fragment
 * (never sent to a server) until the form posts it; while the invitee signs in, the invite's token
 * waits in this tab's sessionStorage (never in a URL).
 */
import { useRef, useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { consoleApi } from '../../shared/api';
import { useAction } from '../../shared/use-api';
import { useSession } from '../../shared/session';
import { ErrorNotice } from '../../components/ui';
import { tokenFromFragment } from './sign-in-link-page';

const PENDING_INVITE = 'kassa-pending-invite';

/** The invite's token: the link's fragment, or the one kept while the invitee signed in first. */
function inviteToken(): string | undefined {
  const fromLink = tokenFromFragment(location.hash);
  try {
    if (fromLink) sessionStorage.setItem(PENDING_INVITE, fromLink);
    return fromLink ?? sessionStorage.getItem(PENDING_INVITE) ?? undefined;
  } catch {
    return fromLink;
  }
}

export function LinkPasswordPage(props: { kind: 'invite' | 'reset' }) {
  const { session, setSession } = useSession();
  const { route } = useLocation();
  const token = useRef(props.kind === 'invite' ? inviteToken() : tokenFromFragment(location.hash));
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [done, setDone] = useState(false);
  const [signInFirst, setSignInFirst] = useState(false);
  // Signed in: the account joins as itself (no password); otherwise the invite makes a new account.
  const accept = useAction(() =>
    consoleApi.POST('/v1/console/invites/accept', { body: session ? { token: token.current ?? '' } : { token: token.current ?? '', password, ...(name ? { name } : {}) } }).then((r) => {
      setSignInFirst(r.response.status === 401);
      return { ...r, data: r.data?.data };
    }),
  );
  const reset = useAction(() => consoleApi.POST('/v1/console/password-resets/complete', { body: { token: token.current ?? '', password } }).then((r) => ({ ...r, data: r.response.ok ? true : undefined })));
  const action = props.kind === 'invite' ? accept : reset;
  const submit = async (event: Event) => {
    event.preventDefault();
    if (props.kind === 'invite') {
      const joined = await accept.run();
      if (joined) {
        try {
          sessionStorage.removeItem(PENDING_INVITE);
        } catch {
          // storage unavailable: nothing was kept
        }
        setSession(joined);
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
            {props.kind === 'invite' && session ? (
              <p data-testid="join-as">
                You are signed in as <strong>{session.user.email}</strong>. The invite joins this account to the organization.
              </p>
            ) : (
              <>
                {props.kind === 'invite' && (
                  <>
                    <p>New to Kassa? Choose a password for your account. If this address already has an account, <a href="/console/sign-in?next=/console/accept-invite">sign in</a> first.</p>
                    <label for="name">Your name (optional)</label>
                    <input id="name" autoComplete="name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
                  </>
                )}
                <label for="new-password">Password (12 characters or more)</label>
                <input id="new-password" type="password" autoComplete="new-password" minLength={12} maxLength={256} required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
              </>
            )}
            {signInFirst ? (
              <p role="alert" class="error" data-testid="sign-in-first">
                This address already has an account. <a href="/console/sign-in?next=/console/accept-invite">Sign in</a>, then you come back here to join.
              </p>
            ) : (
              <ErrorNotice message={action.error && `${action.error} An invite works for 7 days, a reset link for an hour, each once: ask for a new one if it has expired.`} />
            )}
            <button type="submit" class="primary" disabled={action.pending || !token.current}>
              {props.kind === 'invite' ? (session ? 'Join as yourself' : 'Join') : 'Set password'}
            </button>
          </>
        )}
      </form>
    </main>
  );
}
