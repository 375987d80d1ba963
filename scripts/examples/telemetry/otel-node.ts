/**
 * OpenTelemetry's own Node SDK sending a model call to Kassa over OTLP/HTTP protobuf. The
 * exporter takes its endpoint, key and compression from the standard environment variables:
 *
 *   OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:3001/v1/otlp \
 *   OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20$KASSA_TELEMETRY_KEY" \
 *   OTEL_EXPORTER_OTLP_COMPRESSION=gzip \
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
