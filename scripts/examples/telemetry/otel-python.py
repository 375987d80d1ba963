"""OpenTelemetry's Python SDK sending a model call to Kassa over OTLP/HTTP protobuf.

    pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:3001/v1/otlp \
    OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20$KASSA_TELEMETRY_KEY" \
    OTEL_EXPORTER_OTLP_COMPRESSION=gzip \
    OTEL_SERVICE_NAME=support-bot \
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
