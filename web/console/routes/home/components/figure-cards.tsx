/** Today against yesterday: one card per figure, per currency. */
import { formatChange, formatMoney } from '../../../shared/format';
import type { CommerceMetrics, CurrencyFigures } from '../use-commerce-metrics';

type Figure = { key: string; label: string; value(f: CurrencyFigures): number; money?: boolean };

/**
 * Gross, tax and net side by side (issue 39, item 4): gross volume holds the tax; net volume is
 * after refunds, tax included; tax and net revenue split it (net volume = net revenue + tax).
 */
export const FIGURES: Figure[] = [
  { key: 'gross', label: 'Gross volume', value: (f) => f.grossVolume, money: true },
  { key: 'net', label: 'Net volume', value: (f) => f.netVolume, money: true },
  { key: 'tax', label: 'Tax', value: (f) => f.netTaxVolume, money: true },
  { key: 'revenue', label: 'Net revenue excl. tax', value: (f) => f.netRevenue, money: true },
  { key: 'discounts', label: 'Discounts', value: (f) => f.discountVolume, money: true },
  { key: 'ok', label: 'Successful payments', value: (f) => f.successfulPayments },
  { key: 'failed', label: 'Failed payments', value: (f) => f.failedPayments },
  { key: 'mrr', label: 'MRR', value: (f) => f.mrr, money: true },
  { key: 'active', label: 'Active subscriptions', value: (f) => f.activeSubscriptions },
  { key: 'churned', label: 'Churned subscriptions', value: (f) => f.churnedSubscriptions },
  { key: 'conversion', label: 'Checkout conversion', value: (f) => (f.checkoutSessionsCreated ? Math.round((f.checkoutSessionsCompleted / f.checkoutSessionsCreated) * 1000) / 10 : 0) },
];

export function TodayCards(props: { metrics: CommerceMetrics }) {
  const { metrics } = props;
  const customers = metrics.customers.series;
  const today = customers.length - 1;
  return (
    <section aria-labelledby="today-title">
      <h2 id="today-title">Today against yesterday</h2>
      <div class="cards">
        <Card label="New customers" current={String(customers[today]?.newCustomers ?? 0)} change={formatChange(customers[today]?.newCustomers ?? 0, customers[today - 1]?.newCustomers ?? 0)} />
      </div>
      <p class="muted small" id="figures-note">
        Gross volume includes tax. Net volume is after refunds; tax and net revenue split it, each refund taking back its share of the tax.
      </p>
      {metrics.currencies.length === 0 && <p class="muted">No payments, subscriptions or checkouts yesterday or today.</p>}
      {metrics.currencies.map((currency) => {
        const now = currency.series[currency.series.length - 1];
        const before = currency.series[currency.series.length - 2];
        if (!now) return null;
        return (
          <div key={currency.currency}>
            <h3>{currency.currency}</h3>
            <div class="cards">
              {FIGURES.map((figure) => {
                const a = figure.value(now);
                const b = before ? figure.value(before) : 0;
                const shown = figure.money ? formatMoney(a, currency.currency) : figure.key === 'conversion' ? `${a}%` : String(a);
                return <Card key={figure.key} label={figure.label} current={shown} change={formatChange(a, b)} />;
              })}
            </div>
          </div>
        );
      })}
    </section>
  );
}

function Card(props: { label: string; current: string; change: string }) {
  return (
    <div class="card figure">
      <div class="figure-label">{props.label}</div>
      <div class="figure-value">{props.current}</div>
      <div class="figure-change">
        <span class="visually-hidden">Change from yesterday: </span>
        {props.change}
      </div>
    </div>
  );
}
