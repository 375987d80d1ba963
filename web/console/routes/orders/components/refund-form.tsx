/**
 * Refund an order, fully or partly, with a reason (members whose role holds `orders:refund`;
 * the API refuses anyone else anyway). The amount is asked in the currency's units and confirmed
 * in a dialog; a refused refund keeps the form's input and says why.
 */
import { useRef, useState } from 'preact/hooks';
import { ConfirmButton } from '../../../components/confirm';
import { consoleApi, errorMessage } from '../../../shared/api';
import { formatMoney, minorToInput, parseMoney } from '../../../shared/format';
import type { Order } from '../use-orders';

const REASONS = [
  ['requested_by_customer', 'Requested by the customer'],
  ['duplicate', 'Duplicate payment'],
  ['fraudulent', 'Fraudulent'],
] as const;

export function RefundForm(props: { order: Order; onRefunded(): void }) {
  const { order } = props;
  const refundable = order.amountCents - order.amountRefundedCents;
  const [amount, setAmount] = useState(minorToInput(refundable, order.currency));
  const [reason, setReason] = useState<(typeof REASONS)[number][0]>('requested_by_customer');
  const [done, setDone] = useState<string | undefined>();
  // One key per intended refund: a retry after a lost answer is the same refund, not a second one.
  const idempotencyKey = useRef(crypto.randomUUID());
  const notice = done && (
    <p class="notice success" role="status">
      {done}
    </p>
  );
  // Nothing left to refund (a full refund just made): the form goes, its outcome stays.
  if (refundable <= 0 || (order.status !== 'PAID' && order.status !== 'UNDERPAID')) {
    return notice ? (
      <div class="card">
        <h2>Refund</h2>
        {notice}
      </div>
    ) : null;
  }
  const minor = parseMoney(amount, order.currency);
  const valid = minor !== undefined && minor <= refundable;
  return (
    <div class="card">
      <h2>Refund</h2>
      {notice}
      <div class="toolbar">
        <label>
          Amount ({order.currency}, at most {formatMoney(refundable, order.currency)})
          <input inputMode="decimal" value={amount} onInput={(e) => setAmount(e.currentTarget.value)} aria-invalid={!valid} />
        </label>
        <label>
          Reason
          <select value={reason} onChange={(e) => setReason(e.currentTarget.value as typeof reason)}>
            {REASONS.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </label>
        {valid ? (
          <ConfirmButton
            label="Refund…"
            title={`Refund ${formatMoney(minor, order.currency)}?`}
            confirmLabel={`Refund ${formatMoney(minor, order.currency)}`}
            danger
            onConfirm={async () => {
              const answer = await consoleApi.POST('/v1/console/orders/{id}/refund', { params: { path: { id: order.orderId }, header: { 'Idempotency-Key': `console-refund-${idempotencyKey.current}` } }, body: { amount: minor, reason } });
              if (answer.error) return errorMessage(answer.error, answer.response);
              idempotencyKey.current = crypto.randomUUID();
              setDone(`Refund of ${formatMoney(minor, order.currency)} requested.`);
              props.onRefunded();
            }}
          >
            <p>
              {formatMoney(minor, order.currency)} of {formatMoney(order.amountCents, order.currency)} goes back to {order.customerEmail} ({reason.replaceAll('_', ' ')}). This cannot be undone.
            </p>
          </ConfirmButton>
        ) : (
          <p class="muted small" role="status">
            Enter an amount up to {formatMoney(refundable, order.currency)}.
          </p>
        )}
      </div>
    </div>
  );
}
