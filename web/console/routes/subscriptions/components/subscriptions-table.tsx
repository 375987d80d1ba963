import { Badge, Empty, Money, Time } from '../../../components/ui';
import type { Subscription } from '../use-subscriptions';

const TONES: Record<string, 'good' | 'bad' | 'warn' | 'neutral'> = { ACTIVE: 'good', PAUSED: 'warn', CANCELED: 'neutral', EXPIRED: 'bad', ENDED: 'neutral' };

export function SubscriptionStatus(props: { subscription: Subscription }) {
  const s = props.subscription;
  return (
    <>
      <Badge tone={TONES[s.status]}>{s.status.charAt(0) + s.status.slice(1).toLowerCase()}</Badge>
      {s.cancelAtPeriodEnd && s.status === 'ACTIVE' ? <> <Badge tone="warn">Ends at period end</Badge></> : null}
    </>
  );
}

export function every(s: Pick<Subscription, 'billingInterval' | 'billingIntervalCount'>): string {
  const unit = String(s.billingInterval).toLowerCase();
  return s.billingIntervalCount === 1 ? `every ${unit}` : `every ${s.billingIntervalCount} ${unit}s`;
}

export function SubscriptionsTable(props: { subscriptions: Subscription[]; timeZone: string }) {
  if (props.subscriptions.length === 0) return <Empty>No subscriptions match.</Empty>;
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th scope="col">Subscription</th>
            <th scope="col" class="num">
              Price
            </th>
            <th scope="col">Status</th>
            <th scope="col" class="hide-narrow">
              Customer
            </th>
            <th scope="col" class="hide-narrow">
              Current period ends
            </th>
          </tr>
        </thead>
        <tbody>
          {props.subscriptions.map((s) => (
            <tr key={s.subscriptionId}>
              <td>
                <a href={`/console/subscriptions/${s.subscriptionId}`} class="mono">
                  {s.subscriptionId}
                </a>
                <div class="muted small">{s.productName ?? ''}</div>
              </td>
              <td class="num">
                <Money minor={s.amountCents} currency={s.currency} /> <span class="muted small">{every(s)}</span>
              </td>
              <td>
                <SubscriptionStatus subscription={s} />
              </td>
              <td class="hide-narrow">{s.customerEmail}</td>
              <td class="hide-narrow">
                <Time iso={s.currentPeriodEnd} timeZone={props.timeZone} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
