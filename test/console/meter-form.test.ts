/** The meter form's pure helpers (web/console/routes/meters/lib/meter-form.ts): typed text ↔ the definition sent. */
import { describe, expect, it } from 'vitest';
import { definitionOf, EMPTY_FORM, formatMeasured, formatPairs, formFromMeter, parsePairs, parseScalar } from '../../web/console/routes/meters/lib/meter-form.js';

describe('meter form', () => {
  it('reads values as numbers, booleans or text, quoted text staying text; pairs round-trip', () => {
    expect([parseScalar('42'), parseScalar('-1.5'), parseScalar('true'), parseScalar('"42"'), parseScalar(' paid ')]).toEqual([42, -1.5, true, '42', 'paid']);
    expect(parsePairs('tier=paid\n\n model = gpt-4o \nn=3')).toEqual({ pairs: { tier: 'paid', model: 'gpt-4o', n: 3 } });
    expect(parsePairs('tier')).toEqual({ error: 'Line 1: write key=value' });
    const pairs = { tier: 'paid', code: '42', flag: 'true', n: 3, on: false };
    expect(parsePairs(formatPairs(pairs))).toEqual({ pairs });
  });

  it('builds the definition of each source, or says what is missing', () => {
    expect(definitionOf(EMPTY_FORM)).toEqual({ error: 'Give the event name' });
    expect(definitionOf({ ...EMPTY_FORM, eventName: 'llm_tokens' })).toEqual({ error: 'Give the property to aggregate' });
    expect(definitionOf({ ...EMPTY_FORM, eventName: 'llm_tokens', property: 'tokens', pairs: 'tier=paid' })).toEqual({
      definition: { source: 'EVENTS', filter: { eventName: 'llm_tokens', properties: { tier: 'paid' } }, aggregation: 'sum', property: 'tokens' },
    });
    expect(definitionOf({ ...EMPTY_FORM, source: 'SPANS', aggregation: 'count', projectId: 'PRJ_1', model: 'gpt-4o' })).toEqual({ error: 'Give the span attribute naming the customer (e.g. user.id)' });
    expect(definitionOf({ ...EMPTY_FORM, source: 'SPANS', aggregation: 'count', projectId: 'PRJ_1', customerAttribute: 'user.id', property: 'ignored' })).toEqual({
      definition: { source: 'SPANS', filter: { projectId: 'PRJ_1' }, aggregation: 'count', customerAttribute: 'user.id' },
    });
  });

  it('a saved meter fills the form back to the same definition', () => {
    const meter = {
      id: 'MTR_1',
      name: 'Tokens',
      source: 'EVENTS' as const,
      filter: { eventName: 'llm_tokens', properties: { tier: 'paid', n: 2 } },
      aggregation: 'sum' as const,
      property: 'tokens',
      customerAttribute: null,
      status: 'ACTIVE' as const,
      rollupStatus: 'READY' as const,
      createdAt: '',
      updatedAt: '',
      archivedAt: null,
    };
    const defined = definitionOf(formFromMeter(meter));
    expect(defined).toEqual({ definition: { source: 'EVENTS', filter: meter.filter, aggregation: 'sum', property: 'tokens' } });
    expect([formatMeasured(15500), formatMeasured(0.0000123456789)]).toEqual(['15,500', '0.000012']);
  });
});
