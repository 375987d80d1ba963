/**
 * The customer's credit balance per currency, its ledger (newest first, older pages by cursor) and
 * an "Adjust balance" form (merchant API getCustomerBalance, listCustomerBalanceTransactions,
 * createCustomerBalanceTransaction). The adjustment is confirmed in a dialog and sent conditional
 * on the balance shown, so one made elsewhere meanwhile is refused rather than stacked blindly.
 */
import { useRef, useState } from 'preact/hooks';
import { ConfirmButton } from '../../../components/confirm';
import { Empty, ErrorNotice, Time } from '../../../components/ui';
import { errorMessage, merchantApi } from '../../../shared/api';
import { formatMoney, parseMoney } from '../../../shared/format';
import { useCustomerBalance, useCustomerBalanceTransactions } from '../use-customers';

const TYPE_LABEL = {
  CARRIED: 'Downgrade credit',
  APPLIED: 'Applied to a renewal',
  RESTORED: 'Given back (renewal not paid)',
  ADJUSTMENT: 'Adjustment',
} as const;

const signed = (minor: number, currency: string) => (minor > 0 ? `+${formatMoney(minor, currency)}` : formatMoney(minor, currency).replace('-', '−'));

/**
 * `currency`: the customer's own currency when they hold no balance yet (their subscription's or
 * last order's), the adjustment form's default — not USD for a customer who pays in EUR.
 */
export function CustomerCreditBalance(props: { id: string; timeZone: string; currency?: string }) {
  const [cursors, setCursors] = useState<string[]>([]);
  const balance = useCustomerBalance(props.id);
  const ledger = useCustomerBalanceTransactions(props.id, cursors[cursors.length - 1]);
  const reload = () => {
    setCursors([]);
    balance.reload();
    ledger.reload();
  };
  return (
    <section aria-labelledby="credit-balance-title" data-testid="credit-balance">
      <h2 id="credit-balance-title">Credit balance</h2>
      <p class="muted small">Credit held for the customer: taken off their next renewals in that currency, never paid out.</p>
      <ErrorNotice message={balance.error} retry={balance.reload} />
      {balance.data && balance.data.balances.length === 0 && <Empty>No credit balance.</Empty>}
      {balance.data && balance.data.balances.length > 0 && (
        <ul class="plain" data-testid="credit-balance-amounts">
          {balance.data.balances.map((b) => (
            <li key={b.currency}>
              <strong>{formatMoney(b.amountCents, b.currency)}</strong> <span class="muted small">{b.currency}</span>
            </li>
          ))}
        </ul>
      )}
      {balance.data && <AdjustBalanceForm id={props.id} balances={balance.data.balances} currency={props.currency} onAdjusted={reload} />}
      <h3 id="credit-ledger-title">Balance history</h3>
      <ErrorNotice message={ledger.error} retry={ledger.reload} />
      {ledger.data && ledger.data.items.length === 0 && cursors.length === 0 && <Empty>No balance changes yet.</Empty>}
      {ledger.data && ledger.data.items.length > 0 && (
        <div class="table-wrap">
          <table data-testid="credit-ledger" aria-labelledby="credit-ledger-title">
            <thead>
              <tr>
                <th scope="col">Date</th>
                <th scope="col">Change</th>
                <th scope="col" class="num">Amount</th>
                <th scope="col" class="num hide-narrow">Balance after</th>
              </tr>
            </thead>
            <tbody>
              {ledger.data.items.map((t) => (
                <tr key={t.transactionId} data-testid="credit-ledger-row">
                  <td>
                    <Time iso={t.createdAt} timeZone={props.timeZone} />
                  </td>
                  <td>
                    {TYPE_LABEL[t.type]}
                    {t.description && <div class="muted small">{t.description}</div>}
                    {t.orderId && (
                      <div class="small">
                        <a href={`/console/orders/${t.orderId}`}>Order</a>
                      </div>
                    )}
                  </td>
                  <td class="num">{signed(t.amountCents, t.currency)}</td>
                  <td class="num hide-narrow">{formatMoney(t.endingBalanceCents, t.currency)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {(cursors.length > 0 || ledger.data?.hasMore) && (
        <div class="toolbar">
          {cursors.length > 0 && (
            <button type="button" onClick={() => setCursors(cursors.slice(0, -1))}>
              ← Newer
            </button>
          )}
          {ledger.data?.hasMore && ledger.data.nextCursor && (
            <button type="button" onClick={() => setCursors([...cursors, ledger.data!.nextCursor!])}>
              Older →
            </button>
          )}
        </div>
      )}
    </section>
  );
}

function AdjustBalanceForm(props: { id: string; balances: Array<{ currency: string; amountCents: number }>; currency?: string; onAdjusted(): void }) {
  // The default follows the customer's currency (a balance's, else their subscription's or last
  // order's, which may load after this form) until the merchant types one; USD only without any.
  const [typed, setCurrency] = useState<string | undefined>();
  const currency = typed ?? props.balances[0]?.currency ?? props.currency ?? 'USD';
  const [direction, setDirection] = useState<'credit' | 'debit'>('credit');
  const [amount, setAmount] = useState('');
  const [description, setDescription] = useState('');
  const [done, setDone] = useState<string | undefined>();
  // One key per intended adjustment: a retry after a lost answer is the same adjustment.
  const idempotencyKey = useRef(crypto.randomUUID());
  const code = currency.trim().toUpperCase();
  const validCurrency = /^[A-Z]{3,5}$/.test(code);
  const held = props.balances.find((b) => b.currency === code)?.amountCents ?? 0;
  const minor = validCurrency ? parseMoney(amount, code) : undefined;
  const validAmount = minor !== undefined && minor > 0 && (direction === 'credit' || minor <= held);
  const valid = validCurrency && validAmount && description.trim().length > 0;
  const signedMinor = minor === undefined ? 0 : direction === 'credit' ? minor : -minor;
  return (
    <form class="card" aria-labelledby="adjust-balance-title" onSubmit={(e) => e.preventDefault()}>
      <h3 id="adjust-balance-title">Adjust balance</h3>
      {done && (
        <p class="notice success" role="status">
          {done}
        </p>
      )}
      <fieldset class="choices">
        <legend>Kind</legend>
        <label class="check">
          <input type="radio" name="adjust-direction" value="credit" checked={direction === 'credit'} onChange={() => setDirection('credit')} /> Credit
        </label>
        <label class="check">
          <input type="radio" name="adjust-direction" value="debit" checked={direction === 'debit'} onChange={() => setDirection('debit')} /> Debit
        </label>
      </fieldset>
      <div class="toolbar">
        <label>
          Currency
          <input value={currency} maxLength={5} size={6} autoComplete="off" onInput={(e) => setCurrency(e.currentTarget.value)} aria-invalid={!validCurrency} />
        </label>
        <label>
          Amount{validCurrency && direction === 'debit' ? ` (at most ${formatMoney(held, code)})` : ''}
          <input inputMode="decimal" value={amount} onInput={(e) => setAmount(e.currentTarget.value)} aria-invalid={amount !== '' && !validAmount} />
        </label>
        <label>
          Description
          <input value={description} maxLength={350} onInput={(e) => setDescription(e.currentTarget.value)} />
        </label>
      </div>
      {valid ? (
        <ConfirmButton
          label="Adjust balance…"
          title={`${direction === 'credit' ? 'Credit' : 'Debit'} ${formatMoney(minor!, code)}?`}
          confirmLabel={`${direction === 'credit' ? 'Credit' : 'Debit'} ${formatMoney(minor!, code)}`}
          danger={direction === 'debit'}
          onConfirm={async () => {
            const answer = await merchantApi.POST('/v1/customers/{id}/balance-transactions', {
              params: { path: { id: props.id }, header: { 'Idempotency-Key': `console-balance-${idempotencyKey.current}` } },
              body: { currency: code, amountCents: signedMinor, description: description.trim(), expectedBalanceCents: held },
            });
            if (answer.error) {
              const message = errorMessage(answer.error, answer.response);
              return answer.response.status === 409 ? `${message} (amounts in minor units). Reload the page to see the balance as it is now.` : message;
            }
            idempotencyKey.current = crypto.randomUUID();
            setDone(`Balance ${direction === 'credit' ? 'credited' : 'debited'}: ${formatMoney(answer.data.data.endingBalanceCents, code)} now.`);
            setAmount('');
            setDescription('');
            props.onAdjusted();
          }}
        >
          <p>
            The {code} balance goes from {formatMoney(held, code)} to {formatMoney(held + signedMinor, code)}. The next renewals in {code} draw it.
          </p>
        </ConfirmButton>
      ) : (
        <p class="muted small" role="status">
          Enter a currency, an amount{direction === 'debit' ? ' up to the balance' : ''} and a description.
        </p>
      )}
    </form>
  );
}
