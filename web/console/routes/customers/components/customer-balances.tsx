/**
 * A customer's balance per meter (console getConsoleCustomerUsage `balances`, the merchant API's
 * getCustomerMeterBalances figures): what was used in the counted range, the included units and
 * prepaid credits left, and what may still be consumed before overage (a subscription's meter) or
 * before access closes (a prepaid meter, exhausted at 0).
 */
import type { components } from '../../../../../generated/merchant';
import { Badge, Empty, Time } from '../../../components/ui';
import { formatQuantity } from '../../../shared/format';

type MeterBalance = components['schemas']['MeterBalance'];

const units = (n: number) => formatQuantity(String(n));

export function CustomerBalances(props: { balances: MeterBalance[]; timeZone: string }) {
  return (
    <section aria-labelledby="balances-title" data-testid="customer-balances">
      <h2 id="balances-title">Credits and balances</h2>
      {props.balances.length === 0 && <Empty>No metered subscription and no credits.</Empty>}
      {props.balances.length > 0 && (
        <div class="table-wrap">
          <table data-testid="balances-table">
            <caption class="visually-hidden">The customer's balance per meter: used, included units and credits left, what remains</caption>
            <thead>
              <tr>
                <th scope="col">Meter</th>
                <th scope="col" class="num">Used</th>
                <th scope="col" class="num hide-narrow">Included left</th>
                <th scope="col" class="num">Credits left</th>
                <th scope="col" class="num">Remaining</th>
              </tr>
            </thead>
            <tbody>
              {props.balances.map((b) => (
                <tr key={b.meterId} data-testid="balance-row">
                  <td>
                    <a href={`/console/meters/${b.meterId}`}>{b.meterName}</a>
                    <div class="muted small">
                      {b.basis === 'SUBSCRIPTION' ? (
                        <>
                          This period, from <Time iso={b.periodStart} timeZone={props.timeZone} />
                        </>
                      ) : (
                        <>
                          Prepaid, since <Time iso={b.periodStart} timeZone={props.timeZone} />
                        </>
                      )}
                    </div>
                  </td>
                  <td class="num">{units(b.consumedUnits)}</td>
                  <td class="num hide-narrow">{b.basis === 'SUBSCRIPTION' ? `${units(b.includedRemaining)} of ${units(b.includedUnits)}` : '—'}</td>
                  <td class="num">
                    {units(b.creditsRemaining)}
                    {b.creditBalance > 0 && <div class="muted small note">{`of ${units(b.creditBalance)} held${b.basis === 'SUBSCRIPTION' && b.creditsPending > 0 ? `, ${units(b.creditsPending)} drawn at the close` : ''}`}</div>}
                  </td>
                  <td class="num">
                    {units(b.remainingUnits)}
                    {b.exhausted && (
                      <div>
                        <Badge tone="bad">Exhausted</Badge>
                      </div>
                    )}
                    {!b.exhausted && b.overageUnits > 0 && <div class="muted small note">{`${units(b.overageUnits)} over: billed at the close`}</div>}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
