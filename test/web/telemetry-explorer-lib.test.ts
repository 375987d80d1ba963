/** The trace view's pure helpers: span-tree flattening, the time scale, the chat parser, the traces page's filters. */
import { describe, expect, it } from 'vitest';
import { flattenSpanTree, parentIds } from '../../web/console/routes/telemetry/lib/span-tree.js';
import { MIN_BAR_WIDTH, formatDuration, niceStep, timeScale } from '../../web/console/routes/telemetry/lib/time-scale.js';
import { parseConversation } from '../../web/console/routes/telemetry/lib/chat.js';
import { sendTracesSnippets } from '../../web/console/routes/telemetry/lib/snippets.js';
import { formatMetricValue } from '../../web/console/routes/telemetry/lib/metric-format.js';
import { moreFiltersSet, tracesQuery } from '../../web/console/routes/telemetry/lib/trace-filters.js';
import { readFileSync } from 'node:fs';

const at = (ms: number) => new Date(Date.UTC(2026, 10, 22) + ms).toISOString();
const s = (span_id: string, parent_span_id: string | null, start: number) => ({ span_id, parent_span_id, start_time: at(start) });

describe('flattenSpanTree', () => {
  const spans = [s('c', 'a', 20), s('a', null, 0), s('b', 'a', 10), s('d', 'b', 11), s('e', 'b', 11), s('orphan', 'missing', 5)];

  it('depth-first, children by start time then id, orphans as roots', () => {
    expect(flattenSpanTree(spans).map((r) => [r.span.span_id, r.depth, r.childCount])).toEqual([
      ['a', 0, 2],
      ['b', 1, 2],
      ['d', 2, 0],
      ['e', 2, 0],
      ['c', 1, 0],
      ['orphan', 0, 0],
    ]);
  });

  it('a collapsed span hides its descendants and says so', () => {
    const rows = flattenSpanTree(spans, new Set(['b']));
    expect(rows.map((r) => r.span.span_id)).toEqual(['a', 'b', 'c', 'orphan']);
    expect(rows[1]!.collapsed).toBe(true);
    expect(flattenSpanTree(spans, parentIds(spans)).map((r) => r.span.span_id)).toEqual(['a', 'orphan']);
  });

  it('a cycle in parent links is cut: every span once', () => {
    const rows = flattenSpanTree([s('x', 'y', 0), s('y', 'x', 1), s('z', 'z', 2)]);
    expect(rows.map((r) => r.span.span_id).sort()).toEqual(['x', 'y', 'z']);
  });

  it('a chain of 5,000 spans flattens without recursion, quickly', () => {
    const chain = Array.from({ length: 5000 }, (_, i) => s(`s${i}`, i === 0 ? null : `s${i - 1}`, i));
    const t0 = performance.now();
    const rows = flattenSpanTree(chain);
    expect(performance.now() - t0).toBeLessThan(200);
    expect(rows).toHaveLength(5000);
    expect(rows[4999]!.depth).toBe(4999);
  });
});

describe('timeScale', () => {
  it('places bars on one scale with a minimum width, and round ticks', () => {
    const scale = timeScale(1000, 3000, 4);
    expect(scale.bar(1000, 3000)).toEqual({ left: 0, width: 1 });
    expect(scale.bar(1500, 2000)).toEqual({ left: 0.25, width: 0.25 });
    expect(scale.bar(2000, 2000).width).toBe(MIN_BAR_WIDTH);
    expect(scale.ticks.map((t) => t.label)).toEqual(['0 ms', '500 ms', '1 s', '1.5 s', '2 s']);
  });

  it('a zero-length trace does not divide by zero', () => {
    const scale = timeScale(5, 5);
    expect(scale.bar(5, 5)).toEqual({ left: 0, width: MIN_BAR_WIDTH });
  });

  it('steps are 1, 2 or 5 × 10ⁿ; durations read well', () => {
    expect([niceStep(2350, 6), niceStep(90, 6), niceStep(1_000_000, 5)]).toEqual([500, 20, 200_000]);
    expect([formatDuration(0), formatDuration(0.5), formatDuration(180), formatDuration(2350), formatDuration(125_000)]).toEqual(['0 ms', '0.50 ms', '180 ms', '2.35 s', '2 min 5 s']);
  });
});

describe('parseConversation', () => {
  it('GenAI semantic conventions: system instructions, input and output messages with tool calls and results', () => {
    const c = parseConversation({
      'gen_ai.system_instructions': JSON.stringify([{ type: 'text', content: 'You are a support agent.' }]),
      'gen_ai.input.messages': JSON.stringify([
        { role: 'user', parts: [{ type: 'text', content: 'Where is order 1234?' }] },
        { role: 'assistant', parts: [{ type: 'tool_call', id: 'call_1', name: 'lookup_order', arguments: { id: 1234 } }] },
        { role: 'tool', parts: [{ type: 'tool_call_response', id: 'call_1', response: 'shipped' }] },
      ]),
      'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'It shipped yesterday.' }], finish_reason: 'stop' }]),
    });
    expect(c.format).toBe('gen_ai');
    expect(c.messages.map((m) => [m.role, m.content, m.side])).toEqual([
      ['system', 'You are a support agent.', 'input'],
      ['user', 'Where is order 1234?', 'input'],
      ['assistant', null, 'input'],
      ['tool', 'shipped', 'input'],
      ['assistant', 'It shipped yesterday.', 'output'],
    ]);
    expect(c.messages[2]!.toolCalls).toEqual([{ id: 'call_1', name: 'lookup_order', arguments: '{"id":1234}' }]);
    expect(c.messages[3]!.toolCallId).toBe('call_1');
    expect(c.messages[4]!.finishReason).toBe('stop');
  });

  it("OpenLLMetry's flattened gen_ai.prompt / gen_ai.completion, in index order (10 after 9), with tool calls", () => {
    const attrs: Record<string, string> = {};
    for (let i = 0; i < 11; i++) {
      attrs[`gen_ai.prompt.${i}.role`] = i === 0 ? 'system' : 'user';
      attrs[`gen_ai.prompt.${i}.content`] = `m${i}`;
    }
    attrs['gen_ai.completion.0.role'] = 'assistant';
    attrs['gen_ai.completion.0.finish_reason'] = 'tool_calls';
    attrs['gen_ai.completion.0.tool_calls.0.id'] = 'call_9';
    attrs['gen_ai.completion.0.tool_calls.0.name'] = 'search_docs';
    attrs['gen_ai.completion.0.tool_calls.0.arguments'] = '{"q":"refund"}';
    const c = parseConversation(attrs);
    expect(c.format).toBe('openllmetry');
    expect(c.messages.map((m) => m.content)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8', 'm9', 'm10', null]);
    expect(c.messages[0]!.role).toBe('system');
    expect(c.messages[11]).toMatchObject({ role: 'assistant', side: 'output', finishReason: 'tool_calls', toolCalls: [{ id: 'call_9', name: 'search_docs', arguments: '{"q":"refund"}' }] });
  });

  it('OpenAI-style content parts become their text; older llm.prompts spellings; nothing is none', () => {
    const c = parseConversation({ 'gen_ai.prompt.0.role': 'user', 'gen_ai.prompt.0.content': JSON.stringify([{ type: 'text', text: 'hello' }, { type: 'text', text: 'there' }]) });
    expect(c.messages[0]!.content).toBe('hello\nthere');
    const legacy = parseConversation({ 'llm.prompts.0.role': 'user', 'llm.prompts.0.content': 'hi', 'llm.completions.0.content': 'hey' });
    expect(legacy).toMatchObject({ format: 'llm', messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hey', side: 'output' }] });
    expect(parseConversation({ 'llm.model': 'gpt-4o' })).toEqual({ messages: [], format: null });
  });

  it('malformed JSON never throws: the semantic-convention attribute is ignored, flattened ones still read', () => {
    const c = parseConversation({ 'gen_ai.input.messages': '[{"role":', 'gen_ai.prompt.0.content': 'plain [not json' });
    expect(c).toMatchObject({ format: 'openllmetry', messages: [{ role: 'user', content: 'plain [not json' }] });
  });
});

describe('sendTracesSnippets', () => {
  const docs = readFileSync(new URL('../../docs/send-traces.md', import.meta.url), 'utf8');
  it('are docs/send-traces.md\'s code blocks word for word, for the local endpoint', () => {
    const snippets = sendTracesSnippets('http://localhost:3001/v1/otlp');
    expect(snippets.map((s) => s.id)).toEqual(['python-otel', 'python-openllmetry', 'node-otel', 'node-openllmetry']);
    for (const snippet of snippets) for (const block of snippet.blocks) expect(docs).toContain('```' + block.lang + '\n' + block.text + '```');
  });
  it("fill in the project's endpoint everywhere", () => {
    const text = JSON.stringify(sendTracesSnippets('https://api.kassa.example/v1/otlp'));
    expect(text).not.toContain('localhost:3001');
    for (const snippet of sendTracesSnippets('https://api.kassa.example/v1/otlp'))
      expect(snippet.blocks.some((b) => b.text.includes('https://api.kassa.example/v1/otlp'))).toBe(true);
  });
});

describe('trace filters', () => {
  const now = Date.UTC(2026, 10, 28, 12);

  it('the query: the last 24 hours by default, a range or explicit times, and only well-formed numbers', () => {
    expect(tracesQuery({}, now)).toEqual({ limit: 50, start_time: '2026-11-27T12:00:00.000Z' });
    expect(tracesQuery({ range: '1h', status: 'error', min_latency_ms: '250', min_cost: '0.5' }, now)).toEqual({
      limit: 50,
      start_time: '2026-11-28T11:00:00.000Z',
      status: 'error',
      min_latency_ms: 250,
      min_cost: 0.5,
    });
    expect(tracesQuery({ range: 'forever', status: 'maybe', min_latency_ms: '2.5', min_cost: 'lots' }, now)).toEqual({ limit: 50, start_time: '2026-11-27T12:00:00.000Z' });
    expect(tracesQuery({ start_time: '2026-11-01T00:00:00.000Z', end_time: '2026-11-02T00:00:00.000Z', range: '1h' }, now)).toEqual({
      limit: 50,
      start_time: '2026-11-01T00:00:00.000Z',
      end_time: '2026-11-02T00:00:00.000Z',
    });
    expect(tracesQuery({ attribute_key: 'env' }, now)).not.toHaveProperty('attribute_key');
  });

  it('"More filters" counts what it hides that is set: an attribute and its value once, blanks not at all', () => {
    expect(moreFiltersSet({})).toBe(0);
    expect(moreFiltersSet({ range: '7d', status: 'error', model: 'gpt-4o', sort: '-cost' })).toBe(0);
    expect(moreFiltersSet({ session_id: 'conv-1' })).toBe(1);
    expect(moreFiltersSet({ attribute_key: 'env', attribute_value: 'prod', user_id: 'u', min_cost: ' ' })).toBe(2);
    expect(moreFiltersSet({ attribute_value: 'prod' })).toBe(1);
    expect(moreFiltersSet({ min_latency_ms: '1', min_cost: '1', attribute_key: 'k', trace_id: 't', session_id: 's', user_id: 'u' })).toBe(6);
  });
});

describe('formatMetricValue', () => {
  it('groups thousands, writes cost by the LLM cost rule (six decimals) and other figures to at most 2, and writes no value as a dash', () => {
    expect(formatMetricValue(1200, 'tokens_in')).toBe('1,200');
    expect(formatMetricValue(1234567.891, 'p95')).toBe('1,234,567.89');
    expect(formatMetricValue(0, 'requests')).toBe('0');
    expect(formatMetricValue(12.5, 'p50')).toBe('12.5');
    expect(formatMetricValue(1234.5, 'cost')).toBe('$1,234.500000');
    expect(formatMetricValue(0.00004, 'cost')).toBe('$0.000040');
    expect(formatMetricValue(null, 'requests')).toBe('—');
    expect(formatMetricValue(undefined, 'cost')).toBe('—');
  });
});
