/** How the metrics table writes a datapoint: thousands grouped, cost to 4 decimals, others to at most 2, no value as a dash. Pure. */
const COST = new Intl.NumberFormat('en-US', { minimumFractionDigits: 4, maximumFractionDigits: 4 });
const FIGURE = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });

export function formatMetricValue(value: number | null | undefined, column: string): string {
  if (value === null || value === undefined) return '—';
  return column === 'cost' ? COST.format(value) : FIGURE.format(Math.round(value * 100) / 100);
}
