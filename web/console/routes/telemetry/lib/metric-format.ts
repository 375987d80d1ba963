/** How the metrics table writes a datapoint: thousands grouped, cost by the one LLM cost rule (six decimals), others to at most 2, no value as a dash. Pure. */
import { formatLlmCost } from '../../../shared/format.js';

const FIGURE = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });

export function formatMetricValue(value: number | null | undefined, column: string): string {
  if (value === null || value === undefined) return '—';
  return column === 'cost' ? formatLlmCost(value) : FIGURE.format(Math.round(value * 100) / 100);
}
