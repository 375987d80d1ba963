/**
 * OpenLLMetry (Traceloop's Node SDK) tracing the official OpenAI client and exporting to Kassa
 * (OTLP/HTTP protobuf). Traceloop appends /v1/traces to TRACELOOP_BASE_URL:
 *
 *   TRACELOOP_BASE_URL=http://localhost:3001/v1/otlp \
 *   TRACELOOP_HEADERS="Authorization=Bearer $KASSA_TELEMETRY_KEY" \
 *   OPENAI_API_KEY=sk-… \
 *   npx tsx scripts/examples/telemetry/openllmetry-node.ts
 *
 * Prints {"trace_id": "…", "answer": "…"}; the trace is named after the workflow.
 */
import { trace } from '@opentelemetry/api';
import * as traceloop from '@traceloop/node-server-sdk';
import OpenAI from 'openai';

traceloop.initialize({
  appName: 'support-bot',
  disableBatch: true,
  silenceInitializationMessage: true,
  // Instrument the client explicitly: ES modules are not patched on import. (The SDK's types
  // name openai's CommonJS build; the class is the same.)
  instrumentModules: { openAI: OpenAI as never },
});

const openai = new OpenAI();

const result = await traceloop.withWorkflow({ name: 'support_answer' }, async () => {
  const completion = await openai.chat.completions.create({
    model: 'gpt-4o',
    messages: [{ role: 'user', content: 'Where is my order?' }],
  });
  return { trace_id: trace.getActiveSpan()?.spanContext().traceId, answer: completion.choices[0]?.message.content };
});

await traceloop.forceFlush();
console.log(JSON.stringify(result));
