/** Members and their roles; invites (e-mailed to the address, or handed over by the operator: never shown here), revoke. */
import { useState } from 'preact/hooks';
import { ConfirmButton } from '../../../components/confirm';
import { Badge, CopyButton, EmailAddress, ErrorNotice, Loading, Time } from '../../../components/ui';
import { errorMessage } from '../../../shared/api';
import { useSession } from '../../../shared/session';
import { useAction } from '../../../shared/use-api';
import { consoleTimeZone } from '../../../shared/time-zone';
import { ROLES, changeRole, createInvite, removeMember, revokeInvite, useInvites, useMembers, type Role } from '../use-settings';

export function MembersSection() {
  const { session } = useSession();
  const members = useMembers();
  const invites = useInvites();
  const timeZone = consoleTimeZone();
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const [link, setLink] = useState<{ email: string; inviteId: string; emailed: boolean } | undefined>();
  const [removed, setRemoved] = useState<string | undefined>();
  const invite = useAction(createInvite);
  const roleChange = useAction(changeRole);
  return (
    <>
      <section aria-labelledby="members-title">
        <h2 id="members-title">Members</h2>
        <ErrorNotice message={members.error ?? roleChange.error} retry={members.reload} />
        {removed && (
          <p role="status" class="card">
            {removed}
          </p>
        )}
        {!members.data && !members.error && <Loading />}
        {members.data && (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Member</th>
                  <th scope="col">Role</th>
                  <th scope="col" class="hide-narrow">
                    Joined
                  </th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {members.data.map((m) => (
                  <tr key={m.userId}>
                    <td class="break-words">
                      {m.name ?? <EmailAddress email={m.email} />}
                      {m.name && (
                        <div class="muted small">
                          <EmailAddress email={m.email} />
                        </div>
                      )}
                    </td>
                    <td>
                      <select
                        aria-label={`Role of ${m.email}`}
                        value={m.role}
                        onChange={async (e) => {
                          if (await roleChange.run(m.userId, e.currentTarget.value as Role)) members.reload();
                          else members.reload();
                        }}
                      >
                        {ROLES.map((r) => (
                          <option key={r} value={r}>
                            {r}
                          </option>
                        ))}
                      </select>
                    </td>
                    <td class="hide-narrow">
                      <Time iso={m.joinedAt} timeZone={timeZone} />
                    </td>
                    <td>
                      {m.userId !== session?.user.userId && (
                        <ConfirmButton
                          label="Remove"
                          labelSuffix={m.email}
                          title={`Remove ${m.email}?`}
                          confirmLabel="Remove member"
                          danger
                          onConfirm={async () => {
                            const answer = await removeMember(m.userId);
                            if (answer.error) return errorMessage(answer.error, answer.response);
                            setRemoved(removalSummary(m.email, answer.data?.data.revoked));
                            members.reload();
                            invites.reload();
                          }}
                        >
                          <p>
                            Their sessions in this organization end at once. What they made here goes with them: the API keys, telemetry keys and
                            agents' keys they created, and their pending invites. Keys made by the operator stay.
                          </p>
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
      <section aria-labelledby="invites-title">
        <h2 id="invites-title">Invites</h2>
        {link && (
          <p role="status" data-testid="invite-sent">
            {link.emailed ? (
              <>
                The invite was e-mailed to <strong>{link.email}</strong> (valid 7 days).
              </>
            ) : (
              <>
                Invite created for <strong>{link.email}</strong>. This server sends no e-mail: the operator gives the link to that address (<code>npm run -s admin -- user invite-link --org {session?.organization.orgId} --invite {link.inviteId}</code>). The link proves the address, so it is not shown here.
              </>
            )}
          </p>
        )}
        <form
          class="toolbar"
          aria-label="Invite a member"
          onSubmit={async (e) => {
            e.preventDefault();
            const created = await invite.run(email, role);
            if (created) {
              setLink({ email: created.email, inviteId: created.inviteId, emailed: created.emailed });
              setEmail('');
              invites.reload();
            }
          }}
        >
          <label>
            E-mail address
            <input type="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
          </label>
          <label>
            Role
            <select value={role} onChange={(e) => setRole(e.currentTarget.value as Role)}>
              {ROLES.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          </label>
          <button type="submit" class="primary" disabled={invite.pending}>
            Invite
          </button>
        </form>
        <ErrorNotice message={invite.error} />
        <ErrorNotice message={invites.error} retry={invites.reload} />
        {invites.data && invites.data.length > 0 && (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">E-mail</th>
                  <th scope="col">Role</th>
                  <th scope="col">Status</th>
                  <th scope="col" class="hide-narrow">
                    Expires
                  </th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {invites.data.map((i) => (
                  <tr key={i.inviteId}>
                    <td class="break-words">
                      <EmailAddress email={i.email} />
                    </td>
                    <td>{i.role}</td>
                    <td>
                      <Badge tone={i.status === 'PENDING' ? 'warn' : 'neutral'}>{i.status.toLowerCase()}</Badge>
                    </td>
                    <td class="hide-narrow">{i.status === 'PENDING' ? <Time iso={i.expiresAt} timeZone={timeZone} /> : '—'}</td>
                    <td>
                      {i.status === 'PENDING' && (
                        <ConfirmButton
                          label="Revoke"
                          labelSuffix={`invite for ${i.email}`}
                          title={`Revoke the invite for ${i.email}?`}
                          confirmLabel="Revoke invite"
                          danger
                          onConfirm={async () => {
                            const answer = await revokeInvite(i.inviteId);
                            if (answer.error) return errorMessage(answer.error, answer.response);
                            invites.reload();
                          }}
                        />
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </>
  );
}

type Revoked = { sessions: number; apiKeys: Array<{ name: string }>; telemetryKeys: Array<{ name: string }>; agents: Array<{ name: string }>; invites: Array<{ email: string }> };

/** "Removed ada@…; revoked 2 API keys (deploy, ci), 1 pending invite (bob@…)." from the removal's answer. */
export function removalSummary(email: string, revoked: Revoked | undefined): string {
  if (!revoked) return `Removed ${email}.`;
  const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;
  const named = (list: Array<{ name?: string; email?: string }>, one: string, many: string) =>
    list.length === 0 ? '' : `${count(list.length, one, many)} (${list.map((x) => x.name ?? x.email).join(', ')})`;
  const parts = [
    named(revoked.apiKeys, 'API key', 'API keys'),
    named(revoked.telemetryKeys, 'telemetry key', 'telemetry keys'),
    named(revoked.agents, 'agent', 'agents'),
    named(revoked.invites, 'pending invite', 'pending invites'),
  ].filter(Boolean);
  const sessions = count(revoked.sessions, 'session', 'sessions');
  return parts.length === 0 ? `Removed ${email}; ${sessions} ended, nothing else to revoke.` : `Removed ${email}; ${sessions} ended; revoked ${parts.join(', ')}.`;
}
