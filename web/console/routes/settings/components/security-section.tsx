/** The member's own session: where it ends, and signing out of every session at once. */
import { ConfirmButton } from '../../../components/confirm';
import { Fields, Time } from '../../../components/ui';
import { errorMessage } from '../../../shared/api';
import { useSession } from '../../../shared/session';
import { consoleTimeZone } from '../../../shared/time-zone';
import { signOutEverywhere } from '../use-settings';

export function SecuritySection() {
  const { session, setSession } = useSession();
  if (!session) return null;
  return (
    <section aria-labelledby="security-title">
      <h2 id="security-title">Your account</h2>
      <div class="card">
        <Fields
          items={[
            ['E-mail', session.user.email],
            ['Role', session.role],
            ['This session ends', <Time iso={session.expiresAt} timeZone={consoleTimeZone()} />],
          ]}
        />
      </div>
      <ConfirmButton
        label="Sign out everywhere"
        title="Sign out of every session?"
        danger
        onConfirm={async () => {
          const answer = await signOutEverywhere();
          if (answer.error) return errorMessage(answer.error, answer.response);
          setSession(undefined);
        }}
      >
        <p>Every browser signed in as {session.user.email} is signed out, this one too.</p>
      </ConfirmButton>
      <p class="muted small">Passkeys: <a href="/console/settings/security">Settings → Security</a>.</p>
    </section>
  );
}
