/** One subscription: price and period, status history as far as the API tells it, its orders (initial and renewals). */
import type { ComponentChildren } from 'preact';
import { useRoute } from 'preact-iso';
import { ErrorNotice, Fields, Loading, Money, PageHeader, Time } from '../../components/ui';
import { consoleTimeZone } from '../../shared/time-zone';
import { OrdersTable } from '../orders/components/orders-table';
import { useOrders } from '../orders/use-orders';
import { SubscriptionStatus, every } from './components/subscriptions-table';
import { useSubscription, useSubscriptionPrice, type Subscription } from './use-subscriptions';
import { priceLabel } from '../../shared/price-label';
import { useMeters } from '../meters/use-meters';

export function SubscriptionDetailPage(props: { extra?: (subscription: Subscription, reload: () => void) => ComponentChildren }) {
  const { params } = useRoute();
  const id = params.id!;
  const timeZone = consoleTimeZone();
  const subscription = useSubscription(id);
  const orders = useOrders({ subscription_id: id, size: 50 });
  const s = subscription.data;
  const price = useSubscriptionPrice(s);
  const meters = useMeters('ACTIVE');
  const meterName = (meterId: string) => meters.data?.records.find((m) => m.id === meterId)?.name ?? meterId;
  return (
    <>
      <PageHeader title={s ? `Subscription ${s.subscriptionId}` : 'Subscription'} />
      <p>
        <a href="/console/subscriptions">← Subscriptions</a>
      </p>
      <ErrorNotice message={subscription.error} retry={subscription.reload} />
      {!s && !subscription.error && <Loading />}
      {s && (
        <>
          <div class="card">
            <Fields
              items={[
                // The catalog price by its name and terms ("Pro plan — Yearly — $90.00 per seat / year"): which of the product's prices it is.
                ...(price.data ? ([['Plan', <span data-testid="subscription-plan">{priceLabel(price.data, { productName: s.productName, withProduct: true, perSeat: true, meterName })}</span>]] as Array<[string, ComponentChildren]>) : []),
                ['Price', <><Money minor={s.amountCents} currency={s.currency} /> {every(s)}</>],
                ['Seats', String(s.quantity ?? 1)],
                ...(s.trialEnd
                  ? ([
                      [
                        'Free trial',
                        new Date(s.trialEnd).getTime() > Date.now() ? (
                          <>
                            until <Time iso={s.trialEnd} timeZone={timeZone} /> · first charge <Money minor={s.amountCents} currency={s.currency} />
                          </>
                        ) : (
                          <>
                            ended <Time iso={s.trialEnd} timeZone={timeZone} />
                          </>
                        ),
                      ],
                    ] as Array<[string, ComponentChildren]>)
                  : []),
                ...(s.scheduledChange
                  ? ([
                      [
                        'Scheduled change',
                        <>
                          {s.scheduledChange.quantity} × {s.scheduledChange.productName}, <Money minor={s.scheduledChange.amountCents} currency={s.currency} /> {every(s)}, from <Time iso={s.currentPeriodEnd} timeZone={timeZone} />
                        </>,
                      ],
                    ] as Array<[string, ComponentChildren]>)
                  : []),
                // The customer's credit from immediate downgrades (issue 39), drawn by the next renewals.
                ...(s.customerBalanceCents
                  ? ([['Credit balance', <><Money minor={s.customerBalanceCents} currency={s.currency} /> (the customer’s, used by the next renewals; <a href={`/console/customers/${s.customerId}`}>history and adjustments</a>)</>]] as Array<[string, ComponentChildren]>)
                  : []),
                ['Status', <SubscriptionStatus subscription={s} />],
                ['Product', s.productName ?? '—'],
                ['Customer', <a href={`/console/customers/${s.customerId}`}>{s.customerEmail}</a>],
                ['Started', <Time iso={s.createdAt} timeZone={timeZone} />],
                ['Current period ends', <Time iso={s.currentPeriodEnd} timeZone={timeZone} />],
                ['Canceled', <Time iso={s.canceledAt} timeZone={timeZone} />],
                ['Ended', <Time iso={s.endedAt} timeZone={timeZone} />],
              ]}
            />
          </div>
          {props.extra?.(s, () => {
            subscription.reload();
            orders.reload();
          })}
          <h2>Payments (initial order and renewals)</h2>
          <ErrorNotice message={orders.error} retry={orders.reload} />
          {orders.data && <OrdersTable orders={orders.data.records} timeZone={timeZone} caption="The subscription's orders" />}
        </>
      )}
    </>
  );
}
