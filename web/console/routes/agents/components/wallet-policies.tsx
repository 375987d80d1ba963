/** A wallet's policies: what its agents may sign (the default allows USDC transfers up to 5 USDC, the x402 payment). */
import { ConfirmButton } from '../../../components/confirm';
import { Empty, ErrorNotice, Loading } from '../../../components/ui';
import { errorMessage } from '../../../shared/api';
import { deletePolicy, usePolicies } from '../use-agents';

export function WalletPolicies(props: { walletId: string }) {
  const policies = usePolicies(props.walletId);
  return (
    <div>
      <h4>Policies</h4>
      <p class="muted small">
        Everything not allowed by a policy is denied. The default policy allows an x402 payment: a USDC transfer authorization (EIP-3009) of at most 5 USDC per signature on each chain.
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
    </div>
  );
}
