/** Crypto receiving wallets: one address per configured chain, set or removed; a refused address is shown next to its input, which keeps what was typed. */
import { ConfirmButton } from '../../../components/confirm';
import { ErrorNotice, Loading } from '../../../components/ui';
import { consoleApi, errorMessage } from '../../../shared/api';
import { useApi } from '../../../shared/use-api';
import { useKeyedForms } from '../../../shared/use-keyed-forms';

const useReceivingWallets = () => useApi(() => consoleApi.GET('/v1/console/receiving-wallets').then((r) => ({ ...r, data: r.data?.data })), []);
const setWallet = (chainId: number, address: string) => consoleApi.PUT('/v1/console/receiving-wallets/{chainId}', { params: { path: { chainId } }, body: { address } }).then((r) => ({ ...r, data: r.data?.data }));
const deleteWallet = (chainId: number) => consoleApi.DELETE('/v1/console/receiving-wallets/{chainId}', { params: { path: { chainId } } }).then((r) => ({ ...r, data: r.data ?? {} }));

export function ReceivingWallets() {
  const wallets = useReceivingWallets();
  const forms = useKeyedForms<number>();
  if (!wallets.data) return wallets.error ? <ErrorNotice message={wallets.error} retry={wallets.reload} /> : <Loading />;
  const current = new Map(wallets.data.wallets.map((w) => [w.chainId, w]));
  const chains = [...wallets.data.chains, ...wallets.data.wallets.filter((w) => !wallets.data!.chains.some((c) => c.chainId === w.chainId)).map((w) => ({ chainId: w.chainId, chain: w.chain, chainName: w.chainName ?? w.chain }))];
  return (
    <div>
      <p class="muted small">Crypto checkouts are paid to these addresses, one per chain. Replacing one leaves quotes already issued on the old address, so no payment in flight is lost.</p>
      {chains.length === 0 && <p>No chain is configured on this Kassa.</p>}
      {chains.map((c) => {
        const wallet = current.get(c.chainId);
        const value = forms.value(c.chainId, wallet?.address ?? '');
        const id = `receiving-${c.chainId}`;
        const error = forms.error(c.chainId);
        return (
          <form
            key={c.chainId}
            class="card"
            aria-label={`Receiving wallet on ${c.chainName}`}
            onSubmit={async (e) => {
              e.preventDefault();
              if (!(await forms.submit(c.chainId, () => setWallet(c.chainId, value.trim())))) return;
              forms.forget(c.chainId);
              wallets.reload();
            }}
          >
            <label for={id}>
              {c.chainName} <span class="muted small">({c.chain})</span>
            </label>
            <div class="inline-form">
              <input
                id={id}
                class="mono"
                placeholder="0x…"
                required
                spellcheck={false}
                autoComplete="off"
                value={value}
                aria-invalid={error ? true : undefined}
                aria-describedby={error ? `${id}-error` : undefined}
                onInput={(e) => forms.input(c.chainId, e.currentTarget.value)}
              />
              <button type="submit" class="primary" disabled={forms.pending(c.chainId)}>
                Set wallet<span class="visually-hidden"> on {c.chainName}</span>
              </button>
              {wallet && (
                <ConfirmButton
                  label={`Remove ${c.chainName} wallet`}
                  title={`Remove the receiving wallet on ${c.chainName}?`}
                  confirmLabel="Remove wallet"
                  danger
                  onConfirm={async () => {
                    const answer = await deleteWallet(c.chainId);
                    if (answer.error) return errorMessage(answer.error, answer.response);
                    forms.forget(c.chainId);
                    wallets.reload();
                  }}
                >
                  <p>New crypto checkouts can no longer be paid on {c.chainName}; quotes already issued keep their address.</p>
                </ConfirmButton>
              )}
            </div>
            {error && (
              <p id={`${id}-error`} class="field-error" role="alert">
                {error}
              </p>
            )}
            {forms.saved(c.chainId) && !error && <p role="status" class="small">Wallet saved.</p>}
          </form>
        );
      })}
    </div>
  );
}
