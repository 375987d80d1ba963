/** The trace page's totals and status labels, and the one rule for LLM costs (issue 37, items 20 and 23). */
import { describe, expect, it } from 'vitest';
import { spanStatus, traceTotals } from '../../web/console/routes/telemetry/lib/trace-summary.js';
import { formatLlmCost } from '../../web/console/shared/format.js';

describe('trace summary', () => {
  it("sums the trace's tokens and cost over its spans; nothing priced is not $0", () => {
    const totals = traceTotals([
      { attributes: { 'llm.model': 'gpt-4o', 'llm.tokens.input': 1200, 'llm.tokens.output': 350, 'llm.cost': 0.0065 } },
      { attributes: { 'llm.model': 'gpt-4o-mini', 'llm.tokens.input': 30, 'llm.tokens.output': 12, 'llm.cost': 0.000013 } },
      { attributes: { 'http.method': 'GET' } },
    ]);
    expect(totals).toMatchObject({ tokensInput: 1230, tokensOutput: 362, modelCalls: 2 });
    expect(totals.cost).toBeCloseTo(0.006513, 9);
    expect(traceTotals([{ attributes: { 'http.method': 'GET' } }]).cost).toBeUndefined();
  });

  it("shows OpenTelemetry's UNSET as a neutral 'Unset', never green", () => {
    expect(spanStatus('UNSET')).toMatchObject({ label: 'Unset', tone: 'neutral' });
    expect(spanStatus('OK')).toMatchObject({ label: 'OK', tone: 'good' });
    expect(spanStatus('ERROR', 'timeout')).toMatchObject({ label: 'Error: timeout', tone: 'bad' });
  });

  it('writes every LLM cost to six decimals', () => {
    expect([0.000013, 0.0038, 0.00367, 0, 1234.5].map(formatLlmCost)).toEqual(['$0.000013', '$0.003800', '$0.003670', '$0.000000', '$1,234.500000']);
    expect(formatLlmCost(undefined)).toBe('—');
  });
});
