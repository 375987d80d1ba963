/**
 * Home: today against yesterday, and each figure over 7 / 30 / 90 days, 12 months or a custom
 * range, per currency, in the organization's time zone (Settings → Organization; the page says
 * which). The range is in the URL (`?range=30d`, `?from=…&to=…`), so a view can be bookmarked and
 * shared.
 */
import { useMemo } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { addDays, filtersToQuery, formatMoney, localDate, rangeFor, type DateRange, type RangeKey } from '../../shared/format';
import { useOrganizationTimeZone } from '../../shared/time-zone';
import { FIGURES, TodayCards } from './components/figure-cards';
import { SeriesChart } from './components/series-chart';
import { useCommerceMetrics } from './use-commerce-metrics';

const RANGES: Array<[RangeKey, string]> = [
  ['7d', '7 days'],
  ['30d', '30 days'],
  ['90d', '90 days'],
  ['12m', '12 months'],
];
const DATE = /^\d{4}-\d{2}-\d{2}$/;

export function HomePage() {
  const zone = useOrganizationTimeZone();
  return (
    <>
      <PageHeader title="Home" />
      <ErrorNotice message={zone.error} retry={zone.reload} />
      {zone.data ? <HomeFigures timeZone={zone.data} /> : !zone.error && <Loading />}
    </>
  );
}

function HomeFigures(props: { timeZone: string }) {
  const { query, route } = useLocation();
  const { timeZone } = props;
  const today = localDate(new Date(), timeZone);
  const rangeKey = (RANGES.some(([k]) => k === query.range) ? query.range : '30d') as RangeKey;
  const custom = DATE.test(query.from ?? '') && DATE.test(query.to ?? '') && query.from! <= query.to!;
  const range: DateRange = custom ? { start: query.from!, end: query.to!, interval: (query.interval as DateRange['interval']) ?? 'day' } : rangeFor(rangeKey, today);
  const todayMetrics = useCommerceMetrics({ start: addDays(today, -1), end: today, interval: 'day', timeZone });
  const series = useCommerceMetrics({ ...range, timeZone });
  const figure = FIGURES.find((f) => f.key === query.figure) ?? FIGURES[0]!;
  const labels = useMemo(() => series.data?.buckets.map((b) => b.date) ?? [], [series.data]);
  return (
    <>
      <p class="muted small">
        Times in {timeZone}, the organization's time zone (<a href="/console/settings/organization">change it in Settings</a>).
      </p>
      <ErrorNotice message={todayMetrics.error} retry={todayMetrics.reload} />
      {todayMetrics.data ? <TodayCards metrics={todayMetrics.data} /> : !todayMetrics.error && <Loading />}
      <section aria-labelledby="series-title">
        <h2 id="series-title">Over time</h2>
        <form
          class="toolbar"
          onSubmit={(e) => {
            e.preventDefault();
            const data = new FormData(e.currentTarget);
            route(`/console/${filtersToQuery({ from: String(data.get('from') ?? ''), to: String(data.get('to') ?? ''), interval: String(data.get('interval') ?? 'day'), figure: figure.key })}`);
          }}
        >
          <div class="segmented" role="group" aria-label="Range">
            {RANGES.map(([key, label]) => (
              <a key={key} href={`/console/${filtersToQuery({ range: key, figure: figure.key })}`} aria-current={!custom && key === rangeKey ? 'true' : undefined}>
                {label}
              </a>
            ))}
          </div>
          <label>
            From <input type="date" name="from" defaultValue={range.start} max={today} required />
          </label>
          <label>
            To <input type="date" name="to" defaultValue={range.end} required />
          </label>
          <label>
            Buckets{' '}
            <select name="interval" defaultValue={range.interval}>
              <option value="day">Days</option>
              <option value="week">Weeks</option>
              <option value="month">Months</option>
            </select>
          </label>
          <button type="submit">Show range</button>
        </form>
        <label>
          Figure{' '}
          <select
            value={figure.key}
            onChange={(e) => route(`/console/${filtersToQuery({ ...(custom ? { from: query.from, to: query.to, interval: query.interval } : { range: rangeKey }), figure: e.currentTarget.value })}`, true)}
          >
            {FIGURES.map((f) => (
              <option key={f.key} value={f.key}>
                {f.label}
              </option>
            ))}
          </select>
        </label>
        <ErrorNotice message={series.error} retry={series.reload} />
        {!series.data && !series.error && <Loading />}
        {series.data && series.data.currencies.length === 0 && <p class="muted">Nothing happened in this range.</p>}
        {series.data?.currencies.map((currency) => {
          const values = currency.series.map(figure.value);
          return (
            <div key={currency.currency} class="card">
              <h3>
                {figure.label} · {currency.currency}
              </h3>
              <SeriesChart title={`${figure.label} in ${currency.currency}`} labels={labels} values={values} currency={figure.money ? currency.currency : undefined} />
              <details>
                <summary>Table</summary>
                <table>
                  <thead>
                    <tr>
                      <th scope="col">From</th>
                      <th scope="col">{figure.label}</th>
                    </tr>
                  </thead>
                  <tbody>
                    {series.data!.buckets.map((bucket, i) => (
                      <tr key={bucket.date}>
                        <td>{bucket.date}</td>
                        <td>{figure.money ? formatMoney(values[i] ?? 0, currency.currency) : values[i]}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </details>
            </div>
          );
        })}
      </section>
    </>
  );
}
