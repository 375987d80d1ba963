/**
 * Sign-in: password, then the passkey when the account has one (the API answers 202 with a
 * challenge; the browser's authenticator signs it; POST /v1/console/sign-in/second-factor), or a
 * passwordless sign-in with a passkey alone. On success the member lands where they were going
 * (`?next=`), else on home — or on Settings → Security when the session is restricted.
 */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { consoleApi } from '../../shared/api';
import { useAction } from '../../shared/use-api';
import { useSession } from '../../shared/session';
import { ErrorNotice } from '../../components/ui';
import { getPasskey, passkeysSupported, type RequestOptionsJSON } from '../../shared/webauthn';
import { safeNext } from './next';

const CANCELLED = { error: { message: 'The passkey prompt was closed before it answered. Try again.' } };

export function SignInPage() {
  const { setSession } = useSession();
  const { query, route } = useLocation();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  /** The second step's challenge, after the password was right. */
  const [secondStep, setSecondStep] = useState<{ challengeId: string; publicKey: RequestOptionsJSON } | undefined>();

  const secondFactor = useAction(async (step: { challengeId: string; publicKey: RequestOptionsJSON }) => {
    const credential = await getPasskey(step.publicKey);
    if (!credential) return CANCELLED;
    return consoleApi.POST('/v1/console/sign-in/second-factor', { body: { challengeId: step.challengeId, credential } });
  });
  const signIn = useAction(() => consoleApi.POST('/v1/console/sign-in', { body: { email, password } }));
  const passwordless = useAction(async () => {
    const options = await consoleApi.POST('/v1/console/passkeys/sign-in-options');
    if (!options.data) return options;
    const credential = await getPasskey(options.data.data.publicKey);
    if (!credential) return CANCELLED;
    return consoleApi.POST('/v1/console/passkeys/sign-in', { body: { challengeId: options.data.data.challengeId, credential } });
  });

  const land = (data: { secondFactor?: { restricted: boolean } }) => {
    setSession(data as Parameters<typeof setSession>[0]);
    route(data.secondFactor?.restricted ? '/console/settings/security' : safeNext(query.next), true);
  };
  const finishWithPasskey = async (step: { challengeId: string; publicKey: RequestOptionsJSON }) => {
    const answer = await secondFactor.run(step);
    if (answer) land(answer.data);
  };
  const submit = async (event: Event) => {
    event.preventDefault();
    if (secondStep) return finishWithPasskey(secondStep);
    const answer = await signIn.run();
    if (!answer) return;
    const data = answer.data;
    if ('secondFactorRequired' in data) {
      const step = { challengeId: data.challengeId, publicKey: data.publicKey };
      setSecondStep(step);
      await finishWithPasskey(step);
      return;
    }
    land(data);
  };
  const signInWithPasskey = async () => {
    const answer = await passwordless.run();
    if (answer) land(answer.data);
  };
  const busy = signIn.pending || secondFactor.pending || passwordless.pending;
  return (
    <main id="main" class="auth">
      <form class="card auth-card" onSubmit={submit} aria-labelledby="sign-in-title">
        <h1 id="sign-in-title">Sign in to Kassa</h1>
        {secondStep ? (
          <>
            <p role="status">Password accepted. This account also signs in with a passkey: confirm with your passkey to finish.</p>
            <ErrorNotice message={secondFactor.error} />
            <button type="submit" class="primary" disabled={busy}>
              {secondFactor.pending ? 'Waiting for your passkey…' : 'Use my passkey'}
            </button>
            <button type="button" onClick={() => setSecondStep(undefined)} disabled={busy}>
              Start again
            </button>
          </>
        ) : (
          <>
            <label for="email">E-mail address</label>
            <input id="email" name="email" type="email" autoComplete="username webauthn" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
            <label for="password">Password</label>
            <input id="password" name="password" type="password" autoComplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
            <ErrorNotice message={signIn.error ?? passwordless.error} />
            <button type="submit" class="primary" disabled={busy}>
              {signIn.pending ? 'Signing in…' : 'Sign in'}
            </button>
            {passkeysSupported() && (
              <button type="button" onClick={signInWithPasskey} disabled={busy}>
                {passwordless.pending ? 'Waiting for your passkey…' : 'Sign in with a passkey'}
              </button>
            )}
          </>
        )}
        <p class="muted small">No password yet? Ask an owner of your organization for an invite, or the operator for a sign-in link.</p>
      </form>
    </main>
  );
}
