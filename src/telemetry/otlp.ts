/**
 * OTLP/HTTP JSON (`ExportTraceServiceRequest`) → the same normalized batch as native ingest
 * (openapi/telemetry.yaml, ingestOtlpTraces): spans grouped by trace id, nanosecond times
 * truncated to milliseconds, resource attributes under the span's, AnyValue mapped to scalars.
 */
import type { components } from '../../generated/telemetry.js';
import { AppError } from '../kernel/errors.js';
import {
  OTLP_NAMES,
  capContent,
  inTimestampRange,
  invalidTrace,
  normalizeSpan,
  type AttributeValue,
  type Attributes,
  type NormalizedBatch,
  type NormalizedTrace,
  type SpanEvent,
  type SpanStatusCode,
} from './normalize.js';
import type { PriceTable } from './prices.js';

type OtlpRequest = components['schemas']['OtlpExportTraceServiceRequest'];
type OtlpKeyValue = components['schemas']['OtlpKeyValue'];
type OtlpAnyValue = components['schemas']['OtlpAnyValue'];
type OtlpScalarValue = components['schemas']['OtlpScalarValue'];
type OtlpSpanEvent = components['schemas']['OtlpSpanEvent'];

const MAX_TRACES = 1000;
const MAX_SPANS_PER_TRACE = 1000;
const MAX_ATTRIBUTES = 200;
/** Events kept per span (the first ones); OpenLLMetry and GenAI record prompts and completions as events. */
export const MAX_EVENTS_PER_SPAN = 128;
const STATUS: SpanStatusCode[] = ['UNSET', 'OK', 'ERROR'];
const KIND: Array<string | null> = [null, 'INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'];

/** int64 as decimal text or number → a JS number when exact, else the decimal text. */
function int64(value: string | number): number | string {
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : String(value);
}

function scalar(value: OtlpScalarValue): string | number | boolean | undefined {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return int64(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.bytesValue !== undefined) return value.bytesValue;
  return undefined;
}

/** An empty AnyValue drops the attribute (undefined). */
function anyValue(value: OtlpAnyValue | undefined): AttributeValue | undefined {
  if (!value) return undefined;
  if (value.arrayValue !== undefined) {
    const items: Array<string | number | boolean> = [];
    for (const v of value.arrayValue.values ?? []) {
      const s = scalar(v);
      if (s !== undefined) items.push(s);
    }
    return items;
  }
  if (value.kvlistValue !== undefined) {
    const obj: Record<string, string | number | boolean | null> = {};
    for (const kv of value.kvlistValue.values ?? []) obj[kv.key] = kv.value ? (scalar(kv.value) ?? null) : null;
    return JSON.stringify(obj);
  }
  return scalar(value);
}

function attributesOf(list: OtlpKeyValue[] | undefined, into: Attributes): void {
  for (const kv of list ?? []) {
    const v = anyValue(kv.value);
    if (v === undefined) delete into[kv.key];
    else into[kv.key] = v;
  }
}

/** Span events with their attributes; every string value is capped like prompt text (CONTENT_CAP_CHARS). */
function eventsOf(events: OtlpSpanEvent[] | undefined): SpanEvent[] | undefined {
  if (!events?.length) return undefined;
  return events.slice(0, MAX_EVENTS_PER_SPAN).map((event) => {
    const attributes: Attributes = {};
    attributesOf(event.attributes, attributes);
    for (const key in attributes) {
      const value = attributes[key];
      if (typeof value === 'string') attributes[key] = capContent(value);
    }
    const timeMs = event.timeUnixNano === undefined ? null : nanosToMs(event.timeUnixNano);
    return { name: event.name ?? '', timeMs: timeMs !== null && inTimestampRange(timeMs) ? timeMs : null, attributes };
  });
}

/** Unix nanoseconds (decimal text or number) → epoch ms, truncated. */
function nanosToMs(value: string | number): number {
  if (typeof value === 'number') return Math.floor(value / 1e6);
  return Number(BigInt(value) / 1_000_000n);
}

/** Spans refused one by one (OTLP `partial_success`): how many, and the first reason. */
export interface OtlpRejections {
  count: number;
  firstMessage: string | null;
}

export interface NormalizedOtlpBatch extends NormalizedBatch {
  rejected: OtlpRejections;
}

/**
 * A span that breaks a rule the schema cannot express (times, all-zero ids, a repeated span id,
 * attribute types and limits) is rejected alone and counted; the others are stored. When every
 * span of a non-empty request is rejected, the first rejection is the answer (400).
 */
export function normalizeOtlp(body: OtlpRequest, prices: PriceTable): NormalizedOtlpBatch {
  const traces = new Map<string, NormalizedTrace & { seen: Set<string> }>();
  const rejected: OtlpRejections = { count: 0, firstMessage: null };
  let firstError: AppError | undefined;
  let spanCount = 0;
  (body.resourceSpans ?? []).forEach((rs, resourceIndex) => {
    const resourceAttributes: Attributes = {};
    attributesOf(rs.resource?.attributes, resourceAttributes);
    (rs.scopeSpans ?? []).forEach((ss, scopeIndex) => {
      (ss.spans ?? []).forEach((span, spanIndex) => {
        const traceId = span.traceId.toLowerCase();
        const spanId = span.spanId.toLowerCase();
        const where = { resource_index: resourceIndex, scope_index: scopeIndex, span_index: spanIndex, trace_id: traceId, span_id: spanId };
        const prefix = `resourceSpans[${resourceIndex}].scopeSpans[${scopeIndex}].spans[${spanIndex}]`;
        try {
          if (/^0+$/.test(traceId)) throw invalidTrace(`${prefix}: traceId must not be all zeros`, { ...where, field: 'traceId' });
          let trace = traces.get(traceId);
          if (!trace) {
            if (traces.size >= MAX_TRACES) {
              throw new AppError('VALIDATION_ERROR', `At most ${MAX_TRACES} distinct trace ids per request`, { details: { limit: MAX_TRACES } });
            }
            trace = { traceId, spans: [], seen: new Set() };
          }
          if (trace.spans.length >= MAX_SPANS_PER_TRACE) {
            throw invalidTrace(`${prefix}: at most ${MAX_SPANS_PER_TRACE} spans per trace id`, { ...where, field: 'spanId' });
          }
          if (trace.seen.has(spanId)) throw invalidTrace(`${prefix}: spanId ${spanId} appears more than once in the trace`, { ...where, field: 'spanId' });
          const attributes: Attributes = { ...resourceAttributes };
          attributesOf(span.attributes, attributes);
          if (Object.keys(attributes).length > MAX_ATTRIBUTES) {
            throw invalidTrace(`${prefix}: more than ${MAX_ATTRIBUTES} attributes (resource and span together)`, { ...where, field: 'attributes' });
          }
          const parent = span.parentSpanId ? span.parentSpanId.toLowerCase() : null;
          const normalized = normalizeSpan(
            traceId,
            {
              spanId,
              parentSpanId: parent,
              name: span.name,
              kind: KIND[span.kind ?? 0] ?? null,
              startMs: nanosToMs(span.startTimeUnixNano),
              endMs: nanosToMs(span.endTimeUnixNano),
              statusCode: STATUS[span.status?.code ?? 0]!,
              statusMessage: span.status?.message || null,
              attributes,
            },
            prices,
            { resource_index: resourceIndex, scope_index: scopeIndex, span_index: spanIndex },
            OTLP_NAMES,
          );
          normalized.events = eventsOf(span.events);
          if (!traces.has(traceId)) traces.set(traceId, trace);
          trace.seen.add(spanId);
          trace.spans.push(normalized);
          spanCount++;
        } catch (err) {
          // Only a span's own problem rejects it alone; a request-wide limit rejects the request.
          if (!(err instanceof AppError) || err.options.telemetryCode !== 'invalid_trace') throw err;
          rejected.count++;
          rejected.firstMessage ??= err.message;
          firstError ??= err;
        }
      });
    });
  });
  if (spanCount === 0 && firstError) throw firstError;
  return {
    traces: [...traces.values()].map(({ traceId, spans }) => ({ traceId, spans })),
    metrics: [],
    spanCount,
    rejected,
  };
}
