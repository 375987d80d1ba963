/** The live preview of a meter definition: its quantity per UTC day over the last 30 days (a chart, and the same numbers in a table). */
import { ErrorNotice } from '../../../components/ui';
import { SeriesChart } from '../../home/components/series-chart';
import { bucketDay, formatMeasured } from '../lib/meter-form';
import type { MeterPreview as Preview } from '../use-meters';

const READ: Record<Preview['read'], string> = {
  ROLLUP: "read from the saved meter's hourly rollup",
  EVENTS: 'computed from the usage events',
  SPANS: 'computed from the telemetry spans',
};

export function MeterPreview(props: { state: { data?: Preview; error?: string; loading: boolean }; hint?: string }) {
  const { data, error, loading } = props.state;
  return (
    <section class="card" aria-labelledby="preview-title" data-testid="meter-preview">
      <h3 id="preview-title">Preview: last 30 days</h3>
      {/* Announced when the figures change, not on every keystroke. */}
      <p role="status" class="muted small" data-testid="preview-status">
        {props.hint ?? (loading ? 'Updating the preview…' : data ? `Total ${formatMeasured(data.total)} for all customers, ${READ[data.read]}.` : '')}
      </p>
      <ErrorNotice message={error} />
      {data && !props.hint && (
        <>
          <SeriesChart title="Quantity per day" labels={data.buckets.map((b) => bucketDay(b.start))} values={data.buckets.map((b) => b.quantity)} />
          <details>
            <summary>Table</summary>
            <div class="table-wrap">
              <table data-testid="preview-table">
                <caption class="visually-hidden">Quantity per UTC day</caption>
                <thead>
                  <tr>
                    <th scope="col">Day (UTC)</th>
                    <th scope="col" class="num">Quantity</th>
                  </tr>
                </thead>
                <tbody>
                  {data.buckets.map((b) => (
                    <tr key={b.start}>
                      <td>{bucketDay(b.start)}</td>
                      <td class="num">{formatMeasured(b.quantity)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </details>
        </>
      )}
    </section>
  );
}
