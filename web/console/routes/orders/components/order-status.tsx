import { Badge } from '../../../components/ui';
import type { Order } from '../use-orders';

const TONES: Record<string, 'good' | 'bad' | 'warn' | 'neutral'> = { Paid: 'good', Failed: 'bad', Refunded: 'neutral', Underpaid: 'warn', Pending: 'warn' };

export function OrderStatus(props: { order: Pick<Order, 'displayStatus' | 'disputed' | 'amountRefundedCents' | 'refunded'> }) {
  const { order } = props;
  return (
    <>
      <Badge tone={TONES[order.displayStatus]}>{order.displayStatus}</Badge>
      {order.amountRefundedCents > 0 && !order.refunded ? <> <Badge tone="neutral">Partly refunded</Badge></> : null}
      {order.disputed ? <> <Badge tone="bad">Disputed</Badge></> : null}
    </>
  );
}
