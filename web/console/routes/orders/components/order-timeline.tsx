/**
 * An order's history from what the API returns: created, paid or failed, each refund and each
 * dispute, oldest first. `orderTimeline` is pure (tested); the component draws it.
 */
import { Time } from '../../../components/ui';
import { formatMoney } from '../../../shared/format';
import type { Dispute, Order, Refund } from '../use-orders';

export interface TimelineEntry {
  at: string;
  label: string;
}

export function orderTimeline(order: Order, refunds: Refund[], disputes: Dispute[]): TimelineEntry[] {
  const entries: TimelineEntry[] = [{ at: order.createdAt, label: 'Created' }];
  if (order.status === 'PAID' || order.status === 'REFUNDED') entries.push({ at: order.updatedAt, label: `Paid ${formatMoney(order.amountCents, order.currency)}` });
  if (order.status === 'FAILED') entries.push({ at: order.updatedAt, label: 'Payment failed' });
  if (order.status === 'UNDERPAID') entries.push({ at: order.updatedAt, label: 'Underpaid' });
  for (const refund of refunds) {
    const what = refund.status === 'succeeded' ? 'Refunded' : refund.status === 'failed' ? 'Refund failed' : refund.status === 'canceled' ? 'Refund canceled' : 'Refund pending';
    entries.push({ at: refund.createdAt, label: `${what} ${formatMoney(refund.amountCents, refund.currency)}${refund.reason ? ` (${refund.reason.replaceAll('_', ' ')})` : ''}` });
  }
  for (const dispute of disputes) {
    entries.push({ at: dispute.createdAt, label: `Dispute opened: ${formatMoney(dispute.amountCents, dispute.currency)}` });
    if (dispute.closedAt) entries.push({ at: dispute.closedAt, label: `Dispute closed${dispute.outcome ? `: ${dispute.outcome}` : ''}` });
  }
  // Paid can be no earlier than created; a refund's row can predate the order's last update.
  return entries.map((e, i) => ({ ...e, i })).sort((a, b) => a.at.localeCompare(b.at) || a.i - b.i).map(({ at, label }) => ({ at, label }));
}

export function OrderTimeline(props: { entries: TimelineEntry[]; timeZone: string }) {
  return (
    <ol class="timeline">
      {props.entries.map((entry, i) => (
        <li key={i}>
          <strong>{entry.label}</strong>
          <div class="muted small">
            <Time iso={entry.at} timeZone={props.timeZone} />
          </div>
        </li>
      ))}
    </ol>
  );
}
