/**
 * A customer's usage this period, per metered subscription: each meter's quantity so far, the
 * units included, the estimated amount, and the estimated next charge (fee + usage, priced like
 * the renewal; credits are drawn at the close, not in the estimate). Then their credits and
 * balances per meter, from the same console operation.
 */
import { Empty, ErrorNotice, Loading, Money, Time } from '../../../components/ui';
import { CustomerBalances } from './customer-balances';
import { formatQuantity } from '../../../shared/format';
import { usageDetail } from '../../orders/components/order-lines';
import { useCustomerUsage } from '../use-customers';

export function CustomerUsage(props: { id: string; timeZone: string }) {
  const usage = useCustomerUsage(props.id);
  return (
    <>
      <section aria-labelledby="usage-title" data-testid="customer-usage">
        <h2 id="usage-title">Usage this period</h2>
        <ErrorNotice message={usage.error} retry={usage.reload} />
        {!usage.data && !usage.error && <Loading />}
        {usage.data && usage.data.subscriptions.length === 0 && <Empty>No active subscription bills usage.</Empty>}
        {usage.data?.subscriptions.map((s) => {
          const fee = s.lines.filter((l) => l.kind !== 'USAGE');
          const metered = s.lines.filter((l) => l.kind === 'USAGE');
          const caption = `${s.productName}: usage from the period start`;
          return (
            <div class="card" key={s.subscriptionId} data-testid="usage-subscription">
              <h3>
                <a href={`/console/subscriptions/${s.subscriptionId}`}>{s.productName}</a>
              </h3>
              <p class="muted small">
                Period <Time iso={s.periodStart} timeZone={props.timeZone} /> – <Time iso={s.periodEnd} timeZone={props.timeZone} />; charged about{' '}
                <Time iso={s.estimatedChargeAt} timeZone={props.timeZone} />
                {s.cancelAtPeriodEnd ? ' (usage only: it ends then)' : ''}.
              </p>
              <div class="table-wrap">
                <table data-testid="usage-table">
                  <caption class="visually-hidden">{caption}</caption>
                  <thead>
                    <tr>
                      <th scope="col">Meter</th>
                      <th scope="col" class="num">Used</th>
                      <th scope="col" class="num hide-narrow">Included</th>
                      <th scope="col" class="num">Estimated</th>
                    </tr>
                  </thead>
                  <tbody>
                    {metered.map((l) => (
                      <tr key={l.usage?.meterId} data-testid="usage-row">
                        <td>
                          <a href={`/console/meters/${l.usage?.meterId ?? ''}`}>{l.description}</a>
                          <div class="muted small">{usageDetail(l, s.currency)}</div>
                        </td>
                        <td class="num">{formatQuantity(l.quantity ?? '0')}</td>
                        <td class="num hide-narrow">{formatQuantity(String(l.usage?.includedUnits ?? 0))}</td>
                        <td class="num">
                          <Money minor={l.amountCents} currency={s.currency} />
                        </td>
                      </tr>
                    ))}
                    {fee.map((l, i) => (
                      <tr key={`fee-${i}`}>
                        <td>
                          {l.description}
                          {l.kind === 'PRICE' ? " (next period's fee)" : ''}
                        </td>
                        <td class="num">—</td>
                        <td class="num hide-narrow">—</td>
                        <td class="num">
                          <Money minor={l.amountCents} currency={s.currency} />
                        </td>
                      </tr>
                    ))}
                  </tbody>
                  <tfoot>
                    <tr>
                      <th scope="row">Estimated next charge</th>
                      <td />
                      <td class="hide-narrow" />
                      <td class="num" data-testid="usage-estimate-total">
                        <strong>
                          <Money minor={s.estimatedTotalCents} currency={s.currency} />
                        </strong>
                      </td>
                    </tr>
                  </tfoot>
                </table>
              </div>
            </div>
          );
        })}
      </section>
      {usage.data && <CustomerBalances balances={usage.data.balances} timeZone={props.timeZone} />}
    </>
  );
}
