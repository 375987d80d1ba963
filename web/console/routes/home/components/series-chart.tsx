/**
 * One figure of one currency over the buckets, drawn by uPlot (canvas, ~50 KB minified). The
 * same numbers are in a table below the chart for keyboards and screen readers.
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { formatAxisValue } from '../../../shared/format';

function shortDate(date: string): string {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  if (!y) return '';
  return new Intl.DateTimeFormat('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' }).format(new Date(Date.UTC(y, m - 1, d)));
}

export function SeriesChart(props: { title: string; labels: string[]; values: number[]; currency?: string }) {
  const host = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = host.current;
    if (!element) return;
    const width = Math.max(280, element.clientWidth);
    const format = (v: number) => formatAxisValue(v, props.currency);
    const xs = props.labels.map((_, i) => i);
    const plot = new uPlot(
      {
        width,
        height: 220,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: false } },
        axes: [
          // The buckets by their first local date (a day, a week's Monday, a month), at whole steps.
          { stroke: '#475467', incrs: [1, 2, 3, 4, 5, 7, 10, 14, 15, 30], values: (_u, ticks) => ticks.map((i) => (Number.isInteger(i) ? shortDate(props.labels[i] ?? '') : '')) },
          { stroke: '#475467', size: 64, values: (_u, ticks) => ticks.map(format) },
        ],
        series: [{}, { label: props.title, stroke: '#4338ca', width: 2, fill: 'rgba(67,56,202,0.08)' }],
      },
      [xs, props.values],
      element,
    );
    const resize = () => plot.setSize({ width: Math.max(280, element.clientWidth), height: 220 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.destroy();
    };
  }, [props.title, props.labels, props.values, props.currency]);
  return <div class="chart" ref={host} role="img" aria-label={`${props.title}, chart; the values are in the table below`} />;
}
