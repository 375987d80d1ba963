/**
 * A one-time sign-in link (`/console/sign-in-link#token=…`, printed by `npm start` for the demo
 * owner): the token is in the fragment, which the browser never sends; this page redeems it once.
 */
import { useEffect, useRef } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { consoleApi } from '../../shared/api';
import { useAction } from '../../shared/use-api';
import { useSession } from '../../shared/session';
import { ErrorNotice, Loading } from '../../components/ui';

export function tokenFromFragment(hash: string): string | undefined {
  return new URLSearchParams(hash.replace(/^#/, '')).get('token') ?? undefined;
}

export function SignInLinkPage() {
  const { setSession } = useSession();
  const { route } = useLocation();
  const token = useRef(tokenFromFragment(location.hash));
  const redeem = useAction((value: string) => consoleApi.POST('/v1/console/sign-in-links/redeem', { body: { token: value } }));
  useEffect(() => {
    const value = token.current;
    if (!value) return;
    // The token leaves the address bar (and the history) before it is spent.
    history.replaceState(null, '', location.pathname);
    redeem.run(value).then((answer) => {
      if (answer) {
        setSession(answer.data);
        route('/console/', true);
      }
    });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  return (
    <main id="main" class="auth">
      <div class="card auth-card">
        <h1>Signing you in</h1>
        {!token.current && <ErrorNotice message="This link has no token. Open the whole link as it was printed or sent to you." />}
        {token.current && !redeem.error && <Loading label="Checking the link…" />}
        {redeem.error && <ErrorNotice message={`${redeem.error} A sign-in link works once and for 15 minutes: ask for a new one, or sign in with your password.`} />}
        <p>
          <a href="/console/sign-in">Sign in with a password</a>
        </p>
      </div>
    </main>
  );
}
