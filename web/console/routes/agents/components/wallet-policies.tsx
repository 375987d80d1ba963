/** A wallet's policies: what its agents may sign (the default allows USDC transfers up to 5 USDC, the x402 payment). */
import { useState } from 'preact/hooks';
import { ConfirmButton } from '../../../components/confirm';
import { useAction } from '../../../shared/use-api';
import { Empty, ErrorNotice, Loading } from '../../../components/ui';
import { errorMessage } from '../../../shared/api';
import { createPolicy, deletePolicy, usePolicies, type TransferRuleInput } from '../use-agents';

export function WalletPolicies(props: { walletId: string }) {
  const policies = usePolicies(props.walletId);
  const empty: TransferRuleInput = { name: '', action: 'DENY', operator: 'gt', valueMinor: '' };
  const [form, setForm] = useState<TransferRuleInput>(empty);
  const create = useAction(createPolicy);
  const id = (field: string) => `policy-${field}-${props.walletId}`;
  return (
    <div>
      <h4>Policies</h4>
      <p class="muted small">
        Everything not allowed by a policy is denied, and a matching deny rule wins over any allow. The default x402 policy, made with the wallet, allows an x402 payment: an EIP-712 USDC{' '}
        <code>TransferWithAuthorization</code> (EIP-3009) of at most 5 USDC (5000000 base units) per signature, on each configured chain and only for that chain's USDC contract. Delete it to allow
        nothing; add policies to allow more or to deny some of it.
      </p>
      <ErrorNotice message={policies.error} retry={policies.reload} />
      {!policies.data && !policies.error && <Loading />}
      {policies.data && policies.data.length === 0 && <Empty>No policy: every signature is denied.</Empty>}
      {policies.data?.map((p) => (
        <details key={p.id} class="card">
          <summary>
            {p.name} <span class="muted small">({p.rules.length} rules)</span>
          </summary>
          <pre class="mono small payload">{JSON.stringify({ rules: p.rules, spendLimits: p.spendLimits }, null, 2)}</pre>
          <ConfirmButton
            label={`Delete policy ${p.name}`}
            title={`Delete the policy ${p.name}?`}
            danger
            onConfirm={async () => {
              const answer = await deletePolicy(p.id);
              if (answer.error) return errorMessage(answer.error, answer.response);
              policies.reload();
            }}
          >
            <p>What it allowed is denied from now on.</p>
          </ConfirmButton>
        </details>
      ))}
      <form
        class="card"
        aria-label={`New policy for wallet ${props.walletId}`}
        onSubmit={async (e) => {
          e.preventDefault();
          if (await create.run(props.walletId, form)) {
            setForm(empty);
            policies.reload();
          }
        }}
      >
        <h5>New policy: an x402 payment rule</h5>
        <div class="toolbar">
          <div>
            <label for={id('name')}>Policy name</label>
            <input id={id('name')} required maxLength={200} value={form.name} onInput={(e) => setForm({ ...form, name: e.currentTarget.value })} />
          </div>
          <div>
            <label for={id('action')}>Decision</label>
            <select id={id('action')} value={form.action} onChange={(e) => setForm({ ...form, action: e.currentTarget.value as TransferRuleInput['action'] })}>
              <option value="DENY">Deny</option>
              <option value="ALLOW">Allow</option>
            </select>
          </div>
          <div>
            <label for={id('operator')}>USDC transfer value</label>
            <select id={id('operator')} value={form.operator} onChange={(e) => setForm({ ...form, operator: e.currentTarget.value as TransferRuleInput['operator'] })}>
              <option value="gt">over</option>
              <option value="lte">up to</option>
            </select>
          </div>
          <div>
            <label for={id('value')}>Base units (1 USDC = 1000000)</label>
            <input id={id('value')} required inputMode="numeric" pattern="[0-9]{1,30}" value={form.valueMinor} onInput={(e) => setForm({ ...form, valueMinor: e.currentTarget.value })} />
          </div>
        </div>
        <ErrorNotice message={create.error} />
        <button type="submit" class="primary" disabled={create.pending}>
          Add policy
        </button>
      </form>
    </div>
  );
}
