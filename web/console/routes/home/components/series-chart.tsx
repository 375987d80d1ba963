/**
 * One figure of one currency over the buckets, drawn by uPlot (canvas, ~50 KB minified). The
 * same numbers are in a table below the chart for keyboards and screen readers.
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { formatMoney } from '../../../shared/format';

export function SeriesChart(props: { title: string; labels: string[]; starts: number[]; values: number[]; currency?: string }) {
  const host = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = host.current;
    if (!element) return;
    const width = Math.max(280, element.clientWidth);
    const format = (v: number) => (props.currency ? formatMoney(Math.round(v), props.currency) : String(Math.round(v)));
    const plot = new uPlot(
      {
        width,
        height: 220,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true } },
        axes: [{ stroke: '#475467' }, { stroke: '#475467', size: 80, values: (_u, ticks) => ticks.map(format) }],
        series: [{}, { label: props.title, stroke: '#4338ca', width: 2, fill: 'rgba(67,56,202,0.08)' }],
      },
      [props.starts, props.values],
      element,
    );
    const resize = () => plot.setSize({ width: Math.max(280, element.clientWidth), height: 220 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.destroy();
    };
  }, [props.title, props.starts, props.values, props.currency]);
  return <div class="chart" ref={host} role="img" aria-label={`${props.title}, chart; the values are in the table below`} />;
}
