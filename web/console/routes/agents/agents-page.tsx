/** Agent wallets: wallets (address per chain) with their policies, agents (the Agent Wallet Key shown once, rotate, assign, revoke), the credit balance, the signing history. */
import { useLocation } from 'preact-iso';
import { useState } from 'preact/hooks';
import { Tabs } from '../../components/tabs';
import { AgentHistory } from './components/agent-history';
import { ConfirmButton } from '../../components/confirm';
import { Badge, CopyButton, Empty, ErrorNotice, Loading, PageHeader, Time } from '../../components/ui';
import { errorMessage } from '../../shared/api';
import { useAction } from '../../shared/use-api';
import { useSession } from '../../shared/session';
import { consoleTimeZone } from '../../shared/time-zone';
import { WalletPolicies } from './components/wallet-policies';
import { assignAgent, createAgent, createWallet, revokeAgent, rotateAgentKey, useAgents, useCredit, useWallets } from './use-agents';

export function AgentsPage() {
  const { can, session } = useSession();
  const wallets = useWallets();
  const agents = useAgents();
  const credit = useCredit();
  const [walletName, setWalletName] = useState('');
  const [agentName, setAgentName] = useState('');
  const [agentWallet, setAgentWallet] = useState('');
  const [key, setKey] = useState<{ name: string; key: string } | undefined>();
  const newWallet = useAction(createWallet);
  const newAgent = useAction(createAgent);
  const assign = useAction(assignAgent);
  const [assigning, setAssigning] = useState<Record<string, string>>({});
  const { path } = useLocation();
  const timeZone = consoleTimeZone();
  if (!session) return <Loading />;
  if (!can('agents:manage')) {
    return (
      <>
        <PageHeader title="Agent wallets" />
        <p>Your role cannot manage agent wallets.</p>
      </>
    );
  }
  return (
    <>
      <PageHeader title="Agent wallets" />
      <Tabs
        label="Agent wallets"
        tabs={[
          { href: '/console/agents', label: 'Wallets and agents' },
          { href: '/console/agents/history', label: 'Signing history' },
        ]}
      />
      {path === '/console/agents/history' ? (
        <AgentHistory wallets={wallets.data ?? []} agents={agents.data ?? []} />
      ) : (
      <>
      <ErrorNotice message={credit.error} />
      {credit.data && (
        <p>
          Credit balance: <strong>{credit.data.balance}</strong> {credit.data.unit}
        </p>
      )}
      <section aria-labelledby="wallets-title">
        <h2 id="wallets-title">Wallets</h2>
        <ErrorNotice message={wallets.error} retry={wallets.reload} />
        {!wallets.data && !wallets.error && <Loading />}
        {wallets.data && wallets.data.length === 0 && <Empty>No wallets yet.</Empty>}
        {wallets.data?.map((w) => (
          <div class="card" key={w.walletId}>
            <h3>{w.name}</h3>
            <p class="mono small">{w.walletAddress}</p>
            <ul class="small">
              {w.chains.map((c) => (
                <li key={c.chainId}>
                  {c.name}: <span class="mono">{c.address}</span>
                </li>
              ))}
            </ul>
            <WalletPolicies walletId={w.walletId} />
          </div>
        ))}
        <form
          class="toolbar"
          aria-label="New wallet"
          onSubmit={async (e) => {
            e.preventDefault();
            if (await newWallet.run(walletName)) {
              setWalletName('');
              wallets.reload();
            }
          }}
        >
          <label>
            Wallet name
            <input required maxLength={100} value={walletName} onInput={(e) => setWalletName(e.currentTarget.value)} />
          </label>
          <button type="submit" class="primary" disabled={newWallet.pending}>
            Create wallet
          </button>
        </form>
        <ErrorNotice message={newWallet.error} />
      </section>
      <section aria-labelledby="agents-title">
        <h2 id="agents-title">Agents</h2>
        {key && (
          <div class="secret" role="status">
            <div>
              The Agent Wallet Key of <strong>{key.name}</strong>: copy it now, it is not shown again.
              <div>
                <code data-testid="agent-wallet-key">{key.key}</code>
              </div>
            </div>
            <CopyButton text={key.key} label="Copy key" />
          </div>
        )}
        <form
          class="toolbar"
          aria-label="New agent"
          onSubmit={async (e) => {
            e.preventDefault();
            const created = await newAgent.run(agentName, agentWallet || undefined);
            if (created) {
              if (created.agentWalletKey) setKey({ name: created.name, key: created.agentWalletKey });
              setAgentName('');
              agents.reload();
            }
          }}
        >
          <label>
            Agent name
            <input required maxLength={100} value={agentName} onInput={(e) => setAgentName(e.currentTarget.value)} />
          </label>
          <div>
            <label for="agent-wallet">Wallet</label>
            <select id="agent-wallet" value={agentWallet} onChange={(e) => setAgentWallet(e.currentTarget.value)}>
              <option value="">None yet</option>
              {wallets.data?.map((w) => (
                <option key={w.walletId} value={w.walletId}>
                  {w.name}
                </option>
              ))}
            </select>
          </div>
          <button type="submit" class="primary" disabled={newAgent.pending}>
            Create agent
          </button>
        </form>
        <ErrorNotice message={newAgent.error} />
        <ErrorNotice message={agents.error ?? assign.error} retry={agents.reload} />
        {agents.data && agents.data.length === 0 && <Empty>No agents yet.</Empty>}
        {agents.data && agents.data.length > 0 && (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Agent</th>
                  <th scope="col">State</th>
                  <th scope="col">Wallet</th>
                  <th scope="col" class="hide-narrow">
                    Created
                  </th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {agents.data.map((a) => (
                  <tr key={a.agentId}>
                    <td>
                      {a.name}
                      <div class="mono small">{a.agentId}</div>
                    </td>
                    <td>{a.revoked ? <Badge tone="neutral">Revoked</Badge> : <Badge tone="good">Active</Badge>}</td>
                    <td>
                      {a.revoked ? (
                        (wallets.data?.find((w) => w.walletId === a.walletId)?.name ?? '—')
                      ) : (
                        <form
                          class="inline-form"
                          aria-label={`Assign a wallet to ${a.name}`}
                          onSubmit={async (e) => {
                            e.preventDefault();
                            const walletId = assigning[a.agentId] ?? a.walletId ?? '';
                            if (await assign.run(a.agentId, walletId || null)) agents.reload();
                          }}
                        >
                          <label class="visually-hidden" for={`assign-${a.agentId}`}>
                            Wallet of {a.name}
                          </label>
                          <select id={`assign-${a.agentId}`} value={assigning[a.agentId] ?? a.walletId ?? ''} onChange={(e) => setAssigning({ ...assigning, [a.agentId]: e.currentTarget.value })}>
                            <option value="">None (signs nothing)</option>
                            {wallets.data?.map((w) => (
                              <option key={w.walletId} value={w.walletId}>
                                {w.name}
                              </option>
                            ))}
                          </select>{' '}
                          <button type="submit" disabled={assign.pending || (assigning[a.agentId] ?? a.walletId ?? '') === (a.walletId ?? '')}>
                            Assign<span class="visually-hidden"> wallet to {a.name}</span>
                          </button>
                        </form>
                      )}
                    </td>
                    <td class="hide-narrow">
                      <Time iso={a.createdAt} timeZone={timeZone} />
                    </td>
                    <td>
                      {!a.revoked && (
                        <ConfirmButton
                          label={`Rotate key of ${a.name}`}
                          title={`Rotate the key of ${a.name}?`}
                          confirmLabel="Rotate key"
                          onConfirm={async () => {
                            const answer = await rotateAgentKey(a.agentId);
                            if (answer.error || !answer.data) return errorMessage(answer.error, answer.response);
                            if (answer.data.agentWalletKey) setKey({ name: a.name, key: answer.data.agentWalletKey });
                            agents.reload();
                          }}
                        >
                          <p>The current key stops working at once; the new key is shown once.</p>
                        </ConfirmButton>
                      )}{' '}
                      {!a.revoked && (
                        <ConfirmButton
                          label={`Revoke ${a.name}`}
                          title={`Revoke the agent ${a.name}?`}
                          confirmLabel="Revoke agent"
                          danger
                          onConfirm={async () => {
                            const answer = await revokeAgent(a.agentId);
                            if (answer.error) return errorMessage(answer.error, answer.response);
                            agents.reload();
                          }}
                        >
                          <p>Its key stops signing at once.</p>
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
      </>
      )}
    </>
  );
}
