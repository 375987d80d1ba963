/**
 * What the trace page says about a trace as a whole and about a span's status. Pure: tested by
 * test/console/trace-summary.test.ts.
 */
import type { Attributes } from './chat.js';

export interface TraceTotals {
  tokensInput: number;
  tokensOutput: number;
  /** USD; undefined when no span carries a cost (nothing priced), which is not the same as $0. */
  cost: number | undefined;
  /** Spans that are model calls (carry `llm.model`). */
  modelCalls: number;
}

const numberOf = (value: unknown): number | undefined => {
  const n = typeof value === 'string' ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) ? n : undefined;
};

/** The trace's tokens and cost: the sum over its spans' `llm.tokens.input`, `llm.tokens.output` and `llm.cost`. */
export function traceTotals(spans: ReadonlyArray<{ attributes: Attributes }>): TraceTotals {
  const totals: TraceTotals = { tokensInput: 0, tokensOutput: 0, cost: undefined, modelCalls: 0 };
  for (const { attributes } of spans) {
    if (attributes['llm.model'] !== undefined) totals.modelCalls++;
    totals.tokensInput += numberOf(attributes['llm.tokens.input']) ?? 0;
    totals.tokensOutput += numberOf(attributes['llm.tokens.output']) ?? 0;
    const cost = numberOf(attributes['llm.cost']);
    if (cost !== undefined) totals.cost = (totals.cost ?? 0) + cost;
  }
  return totals;
}

/**
 * A span status in words. OpenTelemetry's `UNSET` is the default of a span nobody marked: it is
 * neither a success nor a failure, so it reads "Unset" in a neutral badge (only `OK`, set on
 * purpose, is green; `ERROR` is red).
 */
export function spanStatus(code: string, message?: string): { label: string; tone: 'good' | 'bad' | 'neutral'; title: string } {
  if (code === 'ERROR') return { label: `Error${message ? `: ${message}` : ''}`, tone: 'bad', title: 'The span was marked as failed' };
  if (code === 'OK') return { label: 'OK', tone: 'good', title: 'The span was marked as successful' };
  return { label: 'Unset', tone: 'neutral', title: 'No status was set (OpenTelemetry UNSET): not marked as failed' };
}
