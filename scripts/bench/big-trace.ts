/** The bench's 5,000-span trace (scripts/bench/explorer.ts, scripts/bench/waterfall.ts). */
import type { Knex } from 'knex';
import { normalizeIngest } from '../../src/telemetry/normalize.js';
import { summarize } from '../../src/telemetry/ingest.service.js';
import { PriceTable } from '../../src/telemetry/prices.js';
import { KnexTraceWriter } from '../../src/telemetry/traces.repository.js';

/** One trace of `n` spans: a root and a chain of children with model calls among them. */
export async function writeBigTrace(db: Knex, projectId: string, n: number, startMs: number, copy = true): Promise<string> {
  const traceId = 'f'.repeat(16) + '0'.repeat(15) + '1';
  const iso = (ms: number) => new Date(ms).toISOString();
  const hex = (i: number) => i.toString(16).padStart(16, '0');
  const spans = Array.from({ length: n }, (_, i) => ({
    span_id: hex(i + 1),
    parent_span_id: i === 0 ? null : hex(Math.max(1, Math.floor(i / 4))),
    name: i % 10 === 3 ? 'chat gpt-4o-mini' : `step ${i}`,
    start_time: iso(startMs + i * 3),
    end_time: iso(startMs + i * 3 + 50 + (i % 7) * 20),
    attributes: (i % 10 === 3
        ? { 'gen_ai.request.model': 'gpt-4o-mini', 'gen_ai.usage.input_tokens': 900, 'gen_ai.usage.output_tokens': 120, 'gen_ai.prompt.0.role': 'user', 'gen_ai.prompt.0.content': 'What is the status of order 1234?', 'gen_ai.completion.0.role': 'assistant', 'gen_ai.completion.0.content': 'Order 1234 shipped yesterday.' }
        : { 'step.index': i, 'service.name': 'agent' }) as Record<string, string | number>,
  }));
  const batch = normalizeIngest({ traces: [{ trace_id: traceId, spans }] }, new PriceTable());
  await db.transaction(async (trx) => {
    const writer = new KnexTraceWriter(trx, copy);
    const writes = batch.traces.map((t) => ({ ...summarize(t), spans: t.spans }));
    await writer.claimTraces(projectId, writes, new Date(), { optimistic: true });
    // As ingest does (a no-op here: the trace names no session or user).
    await writer.updateGroups(projectId, writes.map((w) => ({ before: null, after: w })), new Date());
  });
  return traceId;
}

