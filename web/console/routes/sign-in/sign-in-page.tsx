/** Password sign-in. On success the member lands where they were going (`?next=`), else on home. */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { consoleApi } from '../../shared/api';
import { useAction } from '../../shared/use-api';
import { useSession } from '../../shared/session';
import { ErrorNotice } from '../../components/ui';
import { safeNext } from './next';

export function SignInPage() {
  const { setSession } = useSession();
  const { query, route } = useLocation();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const signIn = useAction(() => consoleApi.POST('/v1/console/sign-in', { body: { email, password } }));
  const submit = async (event: Event) => {
    event.preventDefault();
    const answer = await signIn.run();
    if (answer) {
      setSession(answer.data);
      route(safeNext(query.next), true);
    }
  };
  return (
    <main id="main" class="auth">
      <form class="card auth-card" onSubmit={submit} aria-labelledby="sign-in-title">
        <h1 id="sign-in-title">Sign in to Kassa</h1>
        <label for="email">E-mail address</label>
        <input id="email" name="email" type="email" autoComplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        <label for="password">Password</label>
        <input id="password" name="password" type="password" autoComplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        <ErrorNotice message={signIn.error} />
        <button type="submit" class="primary" disabled={signIn.pending}>
          {signIn.pending ? 'Signing in…' : 'Sign in'}
        </button>
        <p class="muted small">No password yet? Ask an owner of your organization for an invite, or the operator for a sign-in link.</p>
      </form>
    </main>
  );
}
