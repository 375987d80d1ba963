/**
 * The snippets the project settings page shows to send traces from Python and Node, with the
 * project's OTLP endpoint filled in. They are docs/send-traces.md's code blocks, word for word
 * (test/web/telemetry-explorer-lib.test.ts checks that they still are).
 */
export interface Snippet {
  id: string;
  title: string;
  blocks: Array<{ lang: 'sh' | 'python' | 'ts'; text: string }>;
}

export function sendTracesSnippets(endpoint: string): Snippet[] {
  return [
    {
      id: 'python-otel',
      title: 'Python · OpenTelemetry SDK',
      blocks: [
        { lang: 'python', text: `"""OpenTelemetry's Python SDK sending a model call to Kassa over OTLP/HTTP protobuf.

    pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
    OTEL_EXPORTER_OTLP_ENDPOINT=${endpoint} \\
    OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20$KASSA_TELEMETRY_KEY" \\
    OTEL_EXPORTER_OTLP_COMPRESSION=gzip \\
    OTEL_SERVICE_NAME=support-bot \\
    python otel-python.py

Prints {"trace_id": "..."}; read the trace back with GET /v1/traces/{trace_id}.
"""
import json

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)

tracer = trace.get_tracer("support-bot")
with tracer.start_as_current_span("chat gpt-4o") as span:
    # Your model call goes here; record what it used with the GenAI attributes.
    span.set_attributes({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 350,
    })
    trace_id = format(span.get_span_context().trace_id, "032x")

provider.shutdown()  # flushes the batch before the process exits
print(json.dumps({"trace_id": trace_id}))
` },
      ],
    },
    {
      id: 'python-openllmetry',
      title: 'Python · OpenLLMetry',
      blocks: [
        { lang: 'sh', text: `pip install traceloop-sdk openai
export TRACELOOP_BASE_URL=${endpoint}      # Traceloop appends /v1/traces
export TRACELOOP_HEADERS="Authorization=Bearer%20$KASSA_TELEMETRY_KEY"
` },
        { lang: 'python', text: `from traceloop.sdk import Traceloop
from traceloop.sdk.decorators import workflow
from openai import OpenAI

Traceloop.init(app_name="support-bot")  # reads TRACELOOP_BASE_URL and TRACELOOP_HEADERS
client = OpenAI()

@workflow(name="support_answer")        # the trace's name in Kassa
def answer(question: str) -> str:
    completion = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": question}])
    return completion.choices[0].message.content
` },
      ],
    },
    {
      id: 'node-otel',
      title: 'Node · OpenTelemetry SDK',
      blocks: [
        { lang: 'sh', text: `mkdir support-bot && cd support-bot
npm init -y
npm pkg set type=module   # npm init writes a CommonJS package; top-level await needs an ES module
npm install @opentelemetry/api @opentelemetry/resources @opentelemetry/sdk-trace-node @opentelemetry/exporter-trace-otlp-proto tsx
` },
        { lang: 'ts', text: `/**
 * OpenTelemetry's own Node SDK sending a model call to Kassa over OTLP/HTTP protobuf. The
 * exporter takes its endpoint, key and compression from the standard environment variables:
 *
 *   OTEL_EXPORTER_OTLP_ENDPOINT=${endpoint} \\
 *   OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20$KASSA_TELEMETRY_KEY" \\
 *   OTEL_EXPORTER_OTLP_COMPRESSION=gzip \\
 *   npx tsx scripts/examples/telemetry/otel-node.ts
 *
 * Prints {"trace_id": "…"}; read the trace back with GET /v1/traces/{trace_id}.
 */
import { trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'support-bot' }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
provider.register();

const tracer = trace.getTracer('support-bot');
const traceId = tracer.startActiveSpan('chat gpt-4o', (span) => {
  // Your model call goes here; record what it used with the GenAI attributes.
  span.setAttributes({
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'openai',
    'gen_ai.request.model': 'gpt-4o',
    'gen_ai.usage.input_tokens': 1200,
    'gen_ai.usage.output_tokens': 350,
  });
  span.end();
  return span.spanContext().traceId;
});

await provider.shutdown(); // flushes the batch before the process exits
console.log(JSON.stringify({ trace_id: traceId }));
` },
        { lang: 'sh', text: `OTEL_EXPORTER_OTLP_ENDPOINT=${endpoint} \\
OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20$KASSA_TELEMETRY_KEY" \\
OTEL_EXPORTER_OTLP_COMPRESSION=gzip \\
npx tsx otel-node.ts
` },
      ],
    },
    {
      id: 'node-openllmetry',
      title: 'Node · OpenLLMetry',
      blocks: [
        { lang: 'sh', text: `npm install @traceloop/node-server-sdk openai
` },
        { lang: 'ts', text: `/**
 * OpenLLMetry (Traceloop's Node SDK) tracing the official OpenAI client and exporting to Kassa
 * (OTLP/HTTP protobuf). Traceloop appends /v1/traces to TRACELOOP_BASE_URL:
 *
 *   TRACELOOP_BASE_URL=${endpoint} \\
 *   TRACELOOP_HEADERS="Authorization=Bearer $KASSA_TELEMETRY_KEY" \\
 *   OPENAI_API_KEY=sk-… \\
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
` },
        { lang: 'sh', text: `TRACELOOP_BASE_URL=${endpoint} \\
TRACELOOP_HEADERS="Authorization=Bearer $KASSA_TELEMETRY_KEY" \\
npx tsx openllmetry-node.ts
` },
      ],
    },
  ];
}
